//! The runtime model configuration, built from GGUF metadata or an HF `config.json`.
//! Serialized configs (wire formats) stay in their loaders; this is what the forward uses.

use crate::error::{ModelError, Result};
use crate::rope::Rope;

/// Model families with a Llama-shaped block (pre-norm, RoPE, GQA, SwiGLU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// Llama 1/2/3, SmolLM, TinyLlama.
    Llama,
    /// Mistral (the Llama block; sliding-window attention is not applied).
    Mistral,
    /// Qwen2: biases on the q/k/v projections, NEOX RoPE.
    Qwen2,
}

impl Architecture {
    /// Parse an architecture name as GGUF (`general.architecture`) or HF (`model_type`) spell it.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "llama" => Ok(Self::Llama),
            "mistral" => Ok(Self::Mistral),
            "qwen2" => Ok(Self::Qwen2),
            other => Err(ModelError::UnsupportedArchitecture(other.to_string())),
        }
    }
}

/// Everything the forward pass needs to know about the model's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// The model family.
    pub architecture: Architecture,
    /// Vocabulary size (rows of the embedding).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the MLP.
    pub intermediate_size: usize,
    /// Number of transformer blocks.
    pub num_layers: usize,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (GQA: `num_heads % num_kv_heads == 0`).
    pub num_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f32,
    /// RoPE base frequency θ.
    pub rope_theta: f32,
    /// RoPE pairing: `true` = NEOX (i, i+d/2), `false` = interleaved (2i, 2i+1) as GGUF llama weights expect.
    pub rope_neox: bool,
    /// Longest context the model was trained for.
    pub max_context: usize,
}

impl ModelConfig {
    /// Query heads per key/value head.
    pub fn group_size(&self) -> usize {
        self.num_heads / self.num_kv_heads
    }

    /// What every decoder (host or device) checks of its parts when it is
    /// built: this shape is consistent, the embedding (`embedding`, named
    /// `what` in the error) is `[vocab, hidden]` and there is a block per layer;
    /// and the rotary table it derives from the shape.
    pub(crate) fn decoder_parts(&self, what: &str, embedding: &[usize], blocks: usize) -> Result<Rope> {
        self.validate()?;
        if embedding != [self.vocab_size, self.hidden_size] || blocks != self.num_layers {
            return Err(ModelError::InvalidConfig(format!(
                "{what} of shape {embedding:?} for vocab {} × hidden {}, and {blocks} blocks for {} layers",
                self.vocab_size, self.hidden_size, self.num_layers
            )));
        }
        Ok(Rope::new(self.head_dim, self.rope_theta, self.rope_neox))
    }

    /// Check the shape is internally consistent.
    pub fn validate(&self) -> Result<()> {
        let fail = |msg: String| Err(ModelError::InvalidConfig(msg));
        if self.num_heads == 0 || self.num_kv_heads == 0 || self.num_layers == 0 {
            return fail(format!(
                "heads ({}), kv heads ({}) and layers ({}) must be positive",
                self.num_heads, self.num_kv_heads, self.num_layers
            ));
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return fail(format!(
                "query heads ({}) must be a multiple of kv heads ({})",
                self.num_heads, self.num_kv_heads
            ));
        }
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(2) {
            return fail(format!("head_dim ({}) must be even and positive", self.head_dim));
        }
        if self.vocab_size == 0 || self.hidden_size == 0 || self.max_context == 0 {
            return fail("vocab size, hidden size and context length must be positive".into());
        }
        Ok(())
    }
}
