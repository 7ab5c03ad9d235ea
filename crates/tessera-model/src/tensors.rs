//! Where a checkpoint's tensors come from ([`TensorSource`]) and what they
//! are called ([`WeightNames`]): read by the host and the device builders.

use crate::error::Result;
use crate::matrix::Matrix;
use candle_core::quantized::QTensor;
use candle_core::Tensor;

/// Where tensors come from.
pub(crate) trait TensorSource {
    /// Whether a tensor of that name exists.
    fn has(&self, name: &str) -> bool;
    /// A tensor's dimensions, without reading its data.
    fn shape(&self, name: &str) -> Result<Vec<usize>>;
    /// A tensor as stored (quantized or not).
    fn qtensor(&mut self, name: &str) -> Result<QTensor>;
    /// A weight matrix ready for matmul (repacked or dequantized as the source is configured).
    fn matrix(&mut self, name: &str) -> Result<Matrix>;
    /// A tensor as dense f32.
    fn dense(&mut self, name: &str) -> Result<Tensor>;
    /// An independent source over the same tensors (its own file handle),
    /// so that several threads can load layers at once.
    fn fork(&self) -> Result<Box<dyn TensorSource + Send>>;
}

/// Checkpoint tensor names; `{}` stands for the layer index.
pub(crate) struct WeightNames {
    pub embedding: &'static str,
    pub norm: &'static str,
    pub lm_head: &'static str,
    pub layer: [&'static str; 9],
    pub bias: [&'static str; 3],
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
