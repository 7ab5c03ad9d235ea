//! GGUF loading: metadata → [`ModelConfig`], `tokenizer.ggml.*` → [`Tokenizer`],
//! `tokenizer.chat_template` → [`ChatTemplate`], tensors → [`Model`].
//! Every quant type candle reads is accepted. Q4_1 and Q8_0 matrices run on
//! Tessera's kernels as stored; `repack_q4_1` requantizes Q4_1 to Q8_0 at
//! load instead (the default before the Q4_1 kernel, kept for comparisons).

use crate::config::{Architecture, ModelConfig};
use crate::error::{ModelError, Result};
use crate::load::{LoadOptions, LoadedModel};
use crate::matrix::{GgmlMatrix, Matrix};
use crate::tensors::{TensorSource, WeightNames};
use crate::tokenizer::{GgufVocab, Tokenizer};
use crate::weights::build_model;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open GGUF file: parsed header plus a reader for tensor data.
pub struct GgufSource {
    path: PathBuf,
    content: Arc<Content>,
    reader: BufReader<File>,
    repack_q4_1: bool,
    dequantize: bool,
}

impl GgufSource {
    /// Open and parse the header of `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| ModelError::io(path, e))?;
        let mut reader = BufReader::new(file);
        let corrupt = |reason: String| ModelError::Corrupt {
            path: path.to_path_buf(),
            format: "GGUF",
            reason,
        };
        // candle's header reader divides by `general.alignment` unchecked: a
        // damaged file's 0 panics inside it. That panic is the file's fault
        // and is reported as such (found by the GGUF fuzz target).
        let content = match std::panic::catch_unwind(AssertUnwindSafe(|| Content::read(&mut reader))) {
            Ok(Ok(content)) => content,
            Ok(Err(error)) => return Err(corrupt(error.to_string())),
            Err(_) => return Err(corrupt("the header is malformed (e.g. an alignment of 0)".into())),
        };
        Ok(Self {
            path: path.to_path_buf(),
            content: Arc::new(content),
            reader,
            repack_q4_1: false,
            dequantize: false,
        })
    }

    /// Bytes of the weight matrices one decoded token reads, as stored: every
    /// 2-D tensor, the token embedding only when it doubles as the LM head
    /// (no `output.weight`). Over the machine's read bandwidth, the decode limit.
    pub fn weight_bytes_per_token(&self) -> u64 {
        let tied = !self.content.tensor_infos.contains_key("output.weight");
        self.content
            .tensor_infos
            .iter()
            .filter(|(name, info)| info.shape.rank() == 2 && (name.as_str() != "token_embd.weight" || tied))
            .map(|(_, info)| {
                let dtype = info.ggml_dtype;
                (info.shape.elem_count() / dtype.block_size() * dtype.type_size()) as u64
            })
            .sum()
    }

    /// A metadata value.
    pub fn metadata(&self, key: &str) -> Option<&Value> {
        self.content.metadata.get(key)
    }

    fn required(&self, key: &str) -> Result<&Value> {
        self.metadata(key)
            .ok_or_else(|| ModelError::missing("metadata key", key))
    }

    fn usize_of(&self, key: &str) -> Result<usize> {
        let value = self.required(key)?;
        value
            .to_u64()
            .map(|v| v as usize)
            .or_else(|_| value.to_u32().map(|v| v as usize))
            .or_else(|_| value.to_i32().map(|v| v.max(0) as usize))
            .map_err(|_| ModelError::InvalidConfig(format!("metadata `{key}` is not an integer")))
    }

    fn f32_of(&self, key: &str) -> Result<f32> {
        let value = self.required(key)?;
        value
            .to_f32()
            .or_else(|_| value.to_f64().map(|v| v as f32))
            .map_err(|_| ModelError::InvalidConfig(format!("metadata `{key}` is not a float")))
    }

    fn string_of(&self, key: &str) -> Option<String> {
        self.metadata(key).and_then(|v| v.to_string().ok()).cloned()
    }

    fn strings_of(&self, key: &str) -> Result<Vec<String>> {
        let values = self
            .required(key)?
            .to_vec()
            .map_err(|_| ModelError::InvalidConfig(format!("`{key}` is not an array")))?;
        values
            .iter()
            .map(|v| {
                v.to_string()
                    .cloned()
                    .map_err(|_| ModelError::InvalidConfig(format!("`{key}` holds a non-string")))
            })
            .collect()
    }

    /// The runtime configuration from `{arch}.*` metadata.
    pub fn config(&self) -> Result<ModelConfig> {
        let arch_name = self
            .string_of("general.architecture")
            .ok_or_else(|| ModelError::missing("metadata key", "general.architecture"))?;
        let architecture = Architecture::parse(&arch_name)?;
        let key = |suffix: &str| format!("{arch_name}.{suffix}");
        let num_heads = self.usize_of(&key("attention.head_count"))?;
        let hidden_size = self.usize_of(&key("embedding_length"))?;
        let vocab_size = match self.content.tensor_infos.get("token_embd.weight") {
            Some(info) => info.shape.dims().first().copied().unwrap_or(0),
            None => return Err(ModelError::missing("tensor", "token_embd.weight")),
        };
        let config = ModelConfig {
            architecture,
            vocab_size,
            hidden_size,
            intermediate_size: self.usize_of(&key("feed_forward_length"))?,
            num_layers: self.usize_of(&key("block_count"))?,
            num_heads,
            num_kv_heads: self.usize_of(&key("attention.head_count_kv")).unwrap_or(num_heads),
            head_dim: self
                .usize_of(&key("rope.dimension_count"))
                .unwrap_or(hidden_size / num_heads.max(1)),
            rms_norm_eps: self.f32_of(&key("attention.layer_norm_rms_epsilon"))?,
            rope_theta: self.f32_of(&key("rope.freq_base")).unwrap_or(10_000.0),
            rope_neox: architecture == Architecture::Qwen2,
            max_context: self.usize_of(&key("context_length")).unwrap_or(4096),
        };
        config.validate()?;
        Ok(config)
    }

    /// The tokenizer described by `tokenizer.ggml.*`.
    pub fn tokenizer(&self) -> Result<Tokenizer> {
        let token_types = match self.metadata("tokenizer.ggml.token_type") {
            Some(value) => value
                .to_vec()
                .map_err(|_| ModelError::InvalidConfig("`tokenizer.ggml.token_type` is not an array".into()))?
                .iter()
                .map(|v| v.to_i32().unwrap_or(1))
                .collect(),
            None => Vec::new(),
        };
        let vocab = GgufVocab {
            model: self
                .string_of("tokenizer.ggml.model")
                .ok_or_else(|| ModelError::missing("metadata key", "tokenizer.ggml.model"))?,
            pre: self.string_of("tokenizer.ggml.pre"),
            tokens: self.strings_of("tokenizer.ggml.tokens")?,
            merges: self.strings_of("tokenizer.ggml.merges").unwrap_or_default(),
            token_types,
        };
        let mut tokenizer = Tokenizer::from_gguf_vocab(&vocab)?;
        let id = |key: &str| self.usize_of(key).ok().map(|v| v as u32);
        tokenizer.set_special_tokens(id("tokenizer.ggml.bos_token_id"), id("tokenizer.ggml.eos_token_id"));
        Ok(tokenizer)
    }

    /// The Jinja chat template, if the file carries one.
    pub fn chat_template_source(&self) -> Option<String> {
        self.string_of("tokenizer.chat_template")
    }
}

impl GgufSource {
    /// A 2-D tensor of a type Tessera's own kernels run, read as stored
    /// (`None` for the other types, and when the options ask for candle's
    /// dequantized or requantized copy): one read, no candle copy, so the
    /// load repacks straight from the file's bytes.
    fn own_kernel_matrix(&mut self, name: &str) -> Result<Option<Matrix>> {
        let info = self.info(name)?;
        let dtype = info.ggml_dtype;
        let own = crate::matrix::kernel_format(dtype).is_some() || crate::matrix::half_kind(dtype).is_some();
        let requantized = self.repack_q4_1 && dtype == GgmlDType::Q4_1;
        let &[rows, cols] = info.shape.dims() else {
            return Ok(None);
        };
        if !own || self.dequantize || requantized || !cols.is_multiple_of(dtype.block_size()) {
            return Ok(None);
        }
        let (start, len) = self.extent(name)?;
        let corrupt = |e: std::io::Error| ModelError::Corrupt {
            path: self.path.clone(),
            format: "GGUF",
            reason: format!("tensor `{name}` ({len} bytes at {start}): {e}"),
        };
        let mut bytes = vec![0u8; len];
        self.reader.seek(SeekFrom::Start(start)).map_err(corrupt)?;
        self.reader.read_exact(&mut bytes).map_err(corrupt)?;
        Ok(Some(Matrix::Ggml(GgmlMatrix {
            dtype,
            rows,
            cols,
            bytes,
        })))
    }
}

impl GgufSource {
    fn info(&self, name: &str) -> Result<&candle_core::quantized::gguf_file::TensorInfo> {
        self.content
            .tensor_infos
            .get(name)
            .ok_or_else(|| ModelError::missing("tensor", name))
    }

    /// Where tensor `name`'s bytes lie: (start, length), checked to lie
    /// inside the file with no overflow. candle's reader multiplies the
    /// header's dimensions unchecked, so a damaged header's product can wrap
    /// to a small size that passes its bound and then allocate the true,
    /// huge one; every read of tensor data goes through this check first.
    fn extent(&self, name: &str) -> Result<(u64, usize)> {
        let info = self.info(name)?;
        let dtype = info.ggml_dtype;
        let dims = info.shape.dims();
        let start = self.content.tensor_data_offset.checked_add(info.offset);
        let file_len = self
            .reader
            .get_ref()
            .metadata()
            .map_err(|e| ModelError::io(&self.path, e))?
            .len();
        let len = dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|values| values.is_multiple_of(dtype.block_size()))
            .and_then(|values| (values / dtype.block_size()).checked_mul(dtype.type_size()));
        match (start, len) {
            (Some(start), Some(len)) if start.checked_add(len as u64).is_some_and(|end| end <= file_len) => {
                Ok((start, len))
            }
            _ => Err(ModelError::Corrupt {
                path: self.path.clone(),
                format: "GGUF",
                reason: format!(
                    "tensor `{name}` of shape {dims:?} ({dtype:?}) at offset {} runs past the file's {file_len} bytes",
                    info.offset
                ),
            }),
        }
    }
}

impl TensorSource for GgufSource {
    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    fn shape(&self, name: &str) -> Result<Vec<usize>> {
        self.content
            .tensor_infos
            .get(name)
            .map(|info| info.shape.dims().to_vec())
            .ok_or_else(|| ModelError::missing("tensor", name))
    }

    fn qtensor(&mut self, name: &str) -> Result<QTensor> {
        self.extent(name)?;
        self.content
            .tensor(&mut self.reader, name, &Device::Cpu)
            .map_err(|e| ModelError::Corrupt {
                path: self.path.clone(),
                format: "GGUF",
                reason: format!("tensor `{name}`: {e}"),
            })
    }

    fn matrix(&mut self, name: &str) -> Result<Matrix> {
        if let Some(matrix) = self.own_kernel_matrix(name)? {
            return Ok(matrix);
        }
        let tensor = self.qtensor(name)?;
        // F16/BF16 stay as stored (Tessera's half-precision kernel); F32 is dense.
        if self.dequantize || tensor.dtype() == GgmlDType::F32 {
            return Ok(Matrix::Dense(tensor.dequantize(&Device::Cpu)?));
        }
        let tensor = if self.repack_q4_1 && tensor.dtype() == GgmlDType::Q4_1 {
            QTensor::quantize(&tensor.dequantize(&Device::Cpu)?, GgmlDType::Q8_0)?
        } else {
            tensor
        };
        Ok(Matrix::Quantized(tensor))
    }

    fn dense(&mut self, name: &str) -> Result<Tensor> {
        Ok(self.qtensor(name)?.dequantize(&Device::Cpu)?)
    }

    fn fork(&self) -> Result<Box<dyn TensorSource + Send>> {
        let file = File::open(&self.path).map_err(|e| ModelError::io(&self.path, e))?;
        Ok(Box::new(Self {
            path: self.path.clone(),
            content: Arc::clone(&self.content),
            reader: BufReader::new(file),
            repack_q4_1: self.repack_q4_1,
            dequantize: self.dequantize,
        }))
    }
}

/// Load everything from one GGUF file.
pub fn load_gguf(path: &Path, options: &LoadOptions) -> Result<LoadedModel> {
    let mut source = GgufSource::open(path)?;
    source.repack_q4_1 = options.repack_q4_1;
    source.dequantize = options.dequantize;
    let config = source.config()?;
    let template = source.chat_template_source();
    // The tokenizer (151,936 tokens and their merges for Qwen2.5) builds on
    // another thread while the weights load through a second handle.
    let mut weights_source = source.fork()?;
    let (tokenizer, model) = std::thread::scope(|scope| {
        let tokenizer = scope.spawn(|| match &options.tokenizer {
            Some(file) => Tokenizer::from_file(file),
            None => source.tokenizer(),
        });
        let model = build_model(
            config,
            weights_source.as_mut(),
            &WeightNames::gguf(),
            options.device,
            options.dequantize,
        );
        let tokenizer = tokenizer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (tokenizer, model)
    });
    let (tokenizer, model) = (tokenizer?, model?);
    LoadedModel::assemble(model, tokenizer, template)
}
