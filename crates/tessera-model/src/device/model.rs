//! The decoder as candle operations on a device: the same blocks as
//! [`crate::host`] (RMSNorm → q/k/v → RoPE → cache write → paged attention →
//! o_proj → residual → RMSNorm → SwiGLU MLP → residual), with candle's
//! quantized matmuls (CUDA/Metal kernels on a GPU) and Tessera's two cache
//! kernels as custom ops. On `Device::Cpu` it runs the kernels' Rust contract,
//! which is how the whole path is tested without a GPU.

use super::kv::DeviceKv;
use super::meta::KernelMeta;
use super::ops::{DeviceMeta, PagedAttention};
use super::reference::HeadShape;
use super::DeviceSpec;
use crate::batch::{BatchPlan, Logits, SeqInput};
use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::kv_cache::{KvDtype, KvLayout};
use crate::rope::Rope;
use crate::tensors::{TensorSource, WeightNames};
use candle_core::quantized::{QMatMul, QStorage, QTensor};
use candle_core::{DType, Device, Module, Tensor};

/// A projection: a (quantized) weight and an optional bias.
#[derive(Debug)]
struct Projection {
    weight: QMatMul,
    bias: Option<Tensor>,
}

impl Projection {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let y = self.weight.forward(x)?;
        match &self.bias {
            Some(bias) => y.broadcast_add(bias),
            None => Ok(y),
        }
    }
}

#[derive(Debug)]
struct DeviceBlock {
    attn_norm: Tensor,
    q: Projection,
    k: Projection,
    v: Projection,
    o: Projection,
    ffn_norm: Tensor,
    gate: Projection,
    up: Projection,
    down: Projection,
}

/// A decoder whose weights and activations live on a device.
#[derive(Debug)]
pub struct DeviceModel {
    config: ModelConfig,
    spec: DeviceSpec,
    device: Device,
    embedding: Tensor,
    blocks: Vec<DeviceBlock>,
    norm: Tensor,
    lm_head: Projection,
    rope: Rope,
}

/// Per-forward values shared by every block.
struct Step<'a> {
    meta: &'a DeviceMeta,
    cos: &'a Tensor,
    sin: &'a Tensor,
    rows: usize,
}

fn device_error(what: &str, error: candle_core::Error) -> ModelError {
    ModelError::Device(format!("{what}: {error}"))
}

impl DeviceModel {
    /// Load every weight of `source` onto `device`; `dequantize` keeps dense f32 weights.
    pub(crate) fn load(
        config: ModelConfig,
        source: &mut dyn TensorSource,
        names: &WeightNames,
        spec: DeviceSpec,
        dequantize: bool,
    ) -> Result<Self> {
        config.validate()?;
        let device = spec.open().map_err(|e| ModelError::Device(e.to_string()))?;
        let mut loader = Loader {
            source,
            device: &device,
            dequantize,
        };
        let embedding = loader.dense(names.embedding)?;
        let blocks = (0..config.num_layers)
            .map(|layer| loader.block(names, layer))
            .collect::<Result<Vec<_>>>()?;
        let norm = loader.dense(names.norm)?;
        let head_name = if loader.source.has(names.lm_head) {
            names.lm_head
        } else {
            names.embedding
        };
        let lm_head = loader.projection(head_name, None)?;
        let rope = config.decoder_parts(&format!("`{}`", names.embedding), embedding.dims(), blocks.len())?;
        Ok(Self {
            config,
            spec,
            device,
            embedding,
            blocks,
            norm,
            lm_head,
            rope,
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The device it runs on.
    pub fn spec(&self) -> DeviceSpec {
        self.spec
    }

    /// Zeroed K/V pools for this model on its device.
    pub fn new_kv(&self, layout: KvLayout, dtype: KvDtype) -> Result<DeviceKv> {
        DeviceKv::new(self.spec, &self.device, self.config.num_layers, layout, dtype)
    }

    /// Run one ragged batch (see [`crate::model::Model::forward`]).
    pub fn forward(&self, batch: &[SeqInput<'_>], layout: KvLayout, kv: &DeviceKv) -> Result<Logits> {
        let plan = BatchPlan::without_attention(batch, layout, &self.config)?;
        let meta = kv.upload(KernelMeta::new(batch, layout)?)?;
        self.run(&plan, &meta, kv)
            .map_err(|e| device_error(&format!("forward on {}", self.spec), e))
    }

    fn run(&self, plan: &BatchPlan<'_>, meta: &DeviceMeta, kv: &DeviceKv) -> candle_core::Result<Logits> {
        let rows = plan.tokens.len();
        let tokens = Tensor::from_slice(&plan.tokens, rows, &self.device)?;
        let mut x = self.embedding.index_select(&tokens, 0)?;
        let angles = self.rope.angles(&plan.positions);
        let half = self.config.head_dim / 2;
        let cos = Tensor::from_slice(angles.cos(), (rows, half), &self.device)?;
        let sin = Tensor::from_slice(angles.sin(), (rows, half), &self.device)?;
        let step = Step {
            meta,
            cos: &cos,
            sin: &sin,
            rows,
        };
        for (layer, block) in self.blocks.iter().enumerate() {
            x = self.block_forward(layer, block, &x, &step, kv)?;
        }
        self.logits(&x, plan)
    }

    fn block_forward(
        &self,
        layer: usize,
        block: &DeviceBlock,
        x: &Tensor,
        step: &Step<'_>,
        kv: &DeviceKv,
    ) -> candle_core::Result<Tensor> {
        let c = &self.config;
        let (rows, dim) = (step.rows, c.head_dim);
        let h = candle_nn::ops::rms_norm(x, &block.attn_norm, c.rms_norm_eps)?;
        let q = self.rotate(&block.q.forward(&h)?, c.num_heads, step)?;
        let k = self.rotate(&block.k.forward(&h)?, c.num_kv_heads, step)?;
        let v = block.v.forward(&h)?.reshape((rows, c.num_kv_heads, dim))?;
        kv.write(layer, &k, &v, step.meta)
            .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        let (keys, values) = kv.pools(layer);
        let attention = q.apply_op1_no_bwd(&PagedAttention {
            shape: HeadShape {
                num_heads: c.num_heads,
                scale: 1.0 / (dim as f32).sqrt(),
            },
            keys,
            values,
            meta: step.meta,
        })?;
        let x = (x + block.o.forward(&attention.reshape((rows, c.num_heads * dim))?)?)?;
        let h = candle_nn::ops::rms_norm(&x, &block.ffn_norm, c.rms_norm_eps)?;
        let act = (candle_nn::ops::silu(&block.gate.forward(&h)?)? * block.up.forward(&h)?)?;
        x + block.down.forward(&act)?
    }

    /// RoPE on `[rows, heads × head_dim]` → contiguous `[rows, heads, head_dim]`.
    fn rotate(&self, x: &Tensor, heads: usize, step: &Step<'_>) -> candle_core::Result<Tensor> {
        let dim = self.config.head_dim;
        let x = x.reshape((1, step.rows, heads, dim))?.transpose(1, 2)?.contiguous()?;
        let x = if self.config.rope_neox {
            candle_nn::rotary_emb::rope(&x, step.cos, step.sin)?
        } else {
            candle_nn::rotary_emb::rope_i(&x, step.cos, step.sin)?
        };
        x.transpose(1, 2)?.contiguous()?.reshape((step.rows, heads, dim))
    }

    /// Final norm and LM head for the logit rows only, copied back to the host.
    fn logits(&self, x: &Tensor, plan: &BatchPlan<'_>) -> candle_core::Result<Logits> {
        let seq_of_row = plan.logit_rows.iter().map(|&(_, seq)| seq).collect();
        if plan.logit_rows.is_empty() {
            return Ok(Logits::new(Vec::new(), self.config.vocab_size, seq_of_row));
        }
        let picked: Vec<u32> = plan.logit_rows.iter().map(|&(row, _)| row as u32).collect();
        let picked = Tensor::from_slice(&picked, picked.len(), &self.device)?;
        let h = candle_nn::ops::rms_norm(&x.index_select(&picked, 0)?, &self.norm, self.config.rms_norm_eps)?;
        let logits = self
            .lm_head
            .forward(&h)?
            .to_dtype(DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        Ok(Logits::new(logits, self.config.vocab_size, seq_of_row))
    }
}

/// Reads weights from a source onto the device.
struct Loader<'a> {
    source: &'a mut dyn TensorSource,
    device: &'a Device,
    dequantize: bool,
}

impl Loader<'_> {
    fn dense(&mut self, name: &str) -> Result<Tensor> {
        Ok(self.source.dense(name)?.to_dtype(DType::F32)?.to_device(self.device)?)
    }

    fn projection(&mut self, name: &str, bias: Option<&str>) -> Result<Projection> {
        let stored = self.source.qtensor(name)?;
        let weight = if self.dequantize {
            QMatMul::Tensor(stored.dequantize(self.device)?)
        } else {
            let storage = QStorage::from_data(stored.data()?, self.device, stored.dtype())?;
            QMatMul::from_qtensor(QTensor::new(storage, stored.shape().clone())?)?
        };
        let bias = match bias {
            Some(bias) if self.source.has(bias) => Some(self.dense(bias)?),
            _ => None,
        };
        Ok(Projection { weight, bias })
    }

    fn block(&mut self, names: &WeightNames, layer: usize) -> Result<DeviceBlock> {
        let name = |pattern: &str| pattern.replace("{}", &layer.to_string());
        let [attn_norm, q, k, v, o, ffn_norm, gate, up, down] = names.layer.map(name);
        let [q_bias, k_bias, v_bias] = names.bias.map(name);
        Ok(DeviceBlock {
            attn_norm: self.dense(&attn_norm)?,
            q: self.projection(&q, Some(&q_bias))?,
            k: self.projection(&k, Some(&k_bias))?,
            v: self.projection(&v, Some(&v_bias))?,
            o: self.projection(&o, None)?,
            ffn_norm: self.dense(&ffn_norm)?,
            gate: self.projection(&gate, None)?,
            up: self.projection(&up, None)?,
            down: self.projection(&down, None)?,
        })
    }
}
