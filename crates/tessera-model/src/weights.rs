//! Building a [`Model`] from any weight source (GGUF or safetensors) through
//! one table of checkpoint names per format.

use crate::layers::{Linear, RmsNorm};
use crate::model::{Block, Model};
use crate::{ModelConfig, ModelError, Result};
use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Tensor};

/// Where tensors come from.
pub(crate) trait TensorSource {
    /// Whether a tensor of that name exists.
    fn has(&self, name: &str) -> bool;
    /// A tensor's dimensions, without reading its data.
    fn shape(&self, name: &str) -> Result<Vec<usize>>;
    /// A tensor as stored (quantized or not).
    fn qtensor(&mut self, name: &str) -> Result<QTensor>;
    /// A weight matrix ready for matmul (repacked if the source does that).
    fn matrix(&mut self, name: &str) -> Result<QMatMul>;
    /// A tensor as dense f32.
    fn dense(&mut self, name: &str) -> Result<Tensor>;
}

/// Checkpoint tensor names; `{}` stands for the layer index.
pub(crate) struct WeightNames {
    embedding: &'static str,
    norm: &'static str,
    lm_head: &'static str,
    layer: [&'static str; 9],
    bias: [&'static str; 3],
}

impl WeightNames {
    pub fn gguf() -> Self {
        Self {
            embedding: "token_embd.weight",
            norm: "output_norm.weight",
            lm_head: "output.weight",
            layer: [
                "blk.{}.attn_norm.weight",
                "blk.{}.attn_q.weight",
                "blk.{}.attn_k.weight",
                "blk.{}.attn_v.weight",
                "blk.{}.attn_output.weight",
                "blk.{}.ffn_norm.weight",
                "blk.{}.ffn_gate.weight",
                "blk.{}.ffn_up.weight",
                "blk.{}.ffn_down.weight",
            ],
            bias: ["blk.{}.attn_q.bias", "blk.{}.attn_k.bias", "blk.{}.attn_v.bias"],
        }
    }

    pub fn hugging_face() -> Self {
        Self {
            embedding: "model.embed_tokens.weight",
            norm: "model.norm.weight",
            lm_head: "lm_head.weight",
            layer: [
                "model.layers.{}.input_layernorm.weight",
                "model.layers.{}.self_attn.q_proj.weight",
                "model.layers.{}.self_attn.k_proj.weight",
                "model.layers.{}.self_attn.v_proj.weight",
                "model.layers.{}.self_attn.o_proj.weight",
                "model.layers.{}.post_attention_layernorm.weight",
                "model.layers.{}.mlp.gate_proj.weight",
                "model.layers.{}.mlp.up_proj.weight",
                "model.layers.{}.mlp.down_proj.weight",
            ],
            bias: [
                "model.layers.{}.self_attn.q_proj.bias",
                "model.layers.{}.self_attn.k_proj.bias",
                "model.layers.{}.self_attn.v_proj.bias",
            ],
        }
    }
}

/// Load every weight of a Llama-family model.
pub(crate) fn build_model(config: ModelConfig, source: &mut dyn TensorSource, names: &WeightNames) -> Result<Model> {
    let embedding = source.dense(names.embedding)?;
    check_shape(names.embedding, &embedding, &[config.vocab_size, config.hidden_size])?;
    let embedding = to_vec(&embedding)?;
    let blocks = (0..config.num_layers)
        .map(|layer| load_block(&config, source, names, layer))
        .collect::<Result<Vec<_>>>()?;
    let norm = RmsNorm::new(to_vec(&source.dense(names.norm)?)?, config.rms_norm_eps);
    let head_name = if source.has(names.lm_head) { names.lm_head } else { names.embedding };
    let lm_head = Linear::new(source.matrix(head_name)?, None, config.vocab_size, config.hidden_size);
    Model::new(config, embedding, blocks, norm, lm_head)
}

fn load_block(config: &ModelConfig, source: &mut dyn TensorSource, names: &WeightNames, layer: usize) -> Result<Block> {
    let name = |pattern: &str| pattern.replace("{}", &layer.to_string());
    let (hidden, q_width) = (config.hidden_size, config.num_heads * config.head_dim);
    let kv_width = config.num_kv_heads * config.head_dim;
    let mut linear = |index: usize, bias: Option<usize>, out: usize, input: usize| -> Result<Linear> {
        let weight_name = name(names.layer[index]);
        let weight = source.shape(&weight_name)?;
        if weight != [out, input] {
            return Err(ModelError::InvalidConfig(format!("`{weight_name}` has shape {weight:?}, expected [{out}, {input}]")));
        }
        let bias = match bias.map(|b| name(names.bias[b])).filter(|b| source.has(b)) {
            Some(bias_name) => Some(to_vec(&source.dense(&bias_name)?)?),
            None => None,
        };
        Ok(Linear::new(source.matrix(&weight_name)?, bias, out, input))
    };
    let (q, k, v) = (linear(1, Some(0), q_width, hidden)?, linear(2, Some(1), kv_width, hidden)?, linear(3, Some(2), kv_width, hidden)?);
    let o = linear(4, None, hidden, q_width)?;
    let ffn = config.intermediate_size;
    let (gate, up, down) = (linear(6, None, ffn, hidden)?, linear(7, None, ffn, hidden)?, linear(8, None, hidden, ffn)?);
    let mut norm = |index: usize| -> Result<RmsNorm> { Ok(RmsNorm::new(to_vec(&source.dense(&name(names.layer[index]))?)?, config.rms_norm_eps)) };
    Ok(Block {
        attn_norm: norm(0)?,
        q_proj: q,
        k_proj: k,
        v_proj: v,
        o_proj: o,
        ffn_norm: norm(5)?,
        gate_proj: gate,
        up_proj: up,
        down_proj: down,
    })
}

fn check_shape(name: &str, tensor: &Tensor, want: &[usize]) -> Result<()> {
    if tensor.dims() != want {
        return Err(ModelError::InvalidConfig(format!("`{name}` has shape {:?}, expected {want:?}", tensor.dims())));
    }
    Ok(())
}

fn to_vec(tensor: &Tensor) -> Result<Vec<f32>> {
    Ok(tensor.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
}
