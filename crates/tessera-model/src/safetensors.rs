//! Hugging Face checkpoints: a directory with `config.json`, `*.safetensors`
//! (f32/f16/bf16) and `tokenizer.json`, plus `tokenizer_config.json` for the
//! chat template and special tokens when present.

use crate::config::{Architecture, ModelConfig};
use crate::error::{ModelError, Result};
use crate::load::{LoadOptions, LoadedModel};
use crate::matrix::Matrix;
use crate::tensors::{TensorSource, WeightNames};
use crate::tokenizer::Tokenizer;
use crate::weights::build_model;
use candle_core::quantized::QTensor;
use candle_core::{DType, Device, Tensor};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The fields of HF `config.json` Tessera reads.
#[derive(Debug, Deserialize)]
struct HfConfig {
    model_type: String,
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    rms_norm_eps: f64,
    rope_theta: Option<f64>,
    max_position_embeddings: Option<usize>,
}

impl HfConfig {
    fn runtime(&self) -> Result<ModelConfig> {
        let config = ModelConfig {
            architecture: Architecture::parse(&self.model_type)?,
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            num_layers: self.num_hidden_layers,
            num_heads: self.num_attention_heads,
            num_kv_heads: self.num_key_value_heads.unwrap_or(self.num_attention_heads),
            head_dim: self
                .head_dim
                .unwrap_or(self.hidden_size / self.num_attention_heads.max(1)),
            rms_norm_eps: self.rms_norm_eps as f32,
            rope_theta: self.rope_theta.unwrap_or(10_000.0) as f32,
            // HF checkpoints keep q/k in the rotate-half layout for every family.
            rope_neox: true,
            max_context: self.max_position_embeddings.unwrap_or(4096),
        };
        config.validate()?;
        Ok(config)
    }
}

/// All tensors of a checkpoint, loaded into memory.
struct SafetensorsSource {
    tensors: std::sync::Arc<HashMap<String, Tensor>>,
}

impl TensorSource for SafetensorsSource {
    fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    fn shape(&self, name: &str) -> Result<Vec<usize>> {
        Ok(self.get(name)?.dims().to_vec())
    }

    fn qtensor(&mut self, name: &str) -> Result<QTensor> {
        Ok(QTensor::quantize(
            &self.dense(name)?,
            candle_core::quantized::GgmlDType::F32,
        )?)
    }

    fn matrix(&mut self, name: &str) -> Result<Matrix> {
        Ok(Matrix::Dense(self.dense(name)?))
    }

    fn dense(&mut self, name: &str) -> Result<Tensor> {
        Ok(self.get(name)?.to_dtype(DType::F32)?)
    }

    fn fork(&self) -> Result<Box<dyn TensorSource + Send>> {
        Ok(Box::new(Self {
            tensors: std::sync::Arc::clone(&self.tensors),
        }))
    }
}

impl SafetensorsSource {
    fn get(&self, name: &str) -> Result<&Tensor> {
        self.tensors
            .get(name)
            .ok_or_else(|| ModelError::missing("tensor", name))
    }
}

/// The files of an HF checkpoint directory, or what is missing from it.
#[derive(Debug)]
pub struct HfDir {
    /// `config.json`.
    pub config: PathBuf,
    /// The weight shards.
    pub weights: Vec<PathBuf>,
    /// `tokenizer.json`.
    pub tokenizer: PathBuf,
    /// `tokenizer_config.json`, if present.
    pub tokenizer_config: Option<PathBuf>,
}

impl HfDir {
    /// Inspect `dir`; the error lists every missing file.
    pub fn inspect(dir: &Path) -> Result<Self> {
        let mut weights: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| ModelError::io(dir, e))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|ext| ext == "safetensors"))
            .collect();
        weights.sort();
        let mut missing = Vec::new();
        for required in ["config.json", "tokenizer.json"] {
            if !dir.join(required).is_file() {
                missing.push(required.to_string());
            }
        }
        if weights.is_empty() {
            missing.push("*.safetensors".into());
        }
        if !missing.is_empty() {
            return Err(ModelError::MissingFiles {
                dir: dir.to_path_buf(),
                missing: missing.join(", "),
            });
        }
        let tokenizer_config = Some(dir.join("tokenizer_config.json")).filter(|p| p.is_file());
        Ok(Self {
            config: dir.join("config.json"),
            weights,
            tokenizer: dir.join("tokenizer.json"),
            tokenizer_config,
        })
    }
}

/// Load an HF checkpoint directory.
pub fn load_safetensors_dir(dir: &Path, options: &LoadOptions) -> Result<LoadedModel> {
    let files = HfDir::inspect(dir)?;
    let text = std::fs::read_to_string(&files.config).map_err(|e| ModelError::io(&files.config, e))?;
    let hf: HfConfig = serde_json::from_str(&text).map_err(|e| ModelError::Corrupt {
        path: files.config.clone(),
        format: "config.json",
        reason: e.to_string(),
    })?;
    let config = hf.runtime()?;
    let mut tensors = HashMap::new();
    for shard in &files.weights {
        let loaded = candle_core::safetensors::load(shard, &Device::Cpu).map_err(|e| ModelError::Corrupt {
            path: shard.clone(),
            format: "safetensors",
            reason: e.to_string(),
        })?;
        tensors.extend(loaded);
    }
    let tokenizer_path = options.tokenizer.clone().unwrap_or(files.tokenizer.clone());
    let mut tokenizer = Tokenizer::from_file(&tokenizer_path)?;
    let template = match &files.tokenizer_config {
        Some(path) => read_tokenizer_config(path, &mut tokenizer)?,
        None => None,
    };
    let model = build_model(
        config,
        &mut SafetensorsSource {
            tensors: std::sync::Arc::new(tensors),
        },
        &WeightNames::hugging_face(),
        options.device,
        options.dequantize,
    )?;
    LoadedModel::assemble(model, tokenizer, template)
}

/// Read the chat template and special tokens of `tokenizer_config.json`.
fn read_tokenizer_config(path: &Path, tokenizer: &mut Tokenizer) -> Result<Option<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| ModelError::Corrupt {
        path: path.to_path_buf(),
        format: "tokenizer_config.json",
        reason: e.to_string(),
    })?;
    let token_id = |key: &str| {
        let value = json.get(key)?;
        let text = value.as_str().or_else(|| value.get("content")?.as_str())?;
        tokenizer.token_to_id(text)
    };
    let (bos, eos) = (token_id("bos_token"), token_id("eos_token"));
    tokenizer.set_special_tokens(bos, eos);
    let template = match json.get("chat_template") {
        Some(serde_json::Value::String(source)) => Some(source.clone()),
        Some(serde_json::Value::Array(named)) => named
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template")?.as_str())
            .map(str::to_string),
        _ => None,
    };
    Ok(template)
}
