//! Engine configuration: pool size, the per-step token budget, queue limits
//! and where the prefix cache persists.

use crate::{EngineError, SpeculationConfig};
use std::path::PathBuf;
use tessera_kv::DEFAULT_BLOCK_SIZE;
use tessera_model::KvDtype;

/// How an engine is sized and scheduled.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// K/V blocks in the pool (each holds `block_size` tokens of every layer).
    pub kv_blocks: usize,
    /// Token slots per block.
    pub block_size: usize,
    /// Element type of the K/V pools (`f16`: half the memory and attention bandwidth).
    pub kv_dtype: KvDtype,
    /// Tokens per forward pass: decode tokens plus prefill chunks. Larger values
    /// prefill faster; smaller ones bound how long a prefill delays running decodes.
    pub max_batch_tokens: usize,
    /// Sequences running at once (decoding or prefilling).
    pub max_running: usize,
    /// Requests waiting for admission before `submit` answers `QueueFull`.
    pub max_waiting: usize,
    /// Persist the prefix cache here: restored at start, written at shutdown
    /// and on [`EngineHandle::save_prefix_cache`](crate::EngineHandle::save_prefix_cache).
    pub kv_cache_dir: Option<PathBuf>,
    /// Identity of the model's weights (see `tessera_model::model_fingerprint`):
    /// keys the persisted cache. Required with `kv_cache_dir`.
    pub model_fingerprint: Option<String>,
    /// Drafts verified beside each decoding sequence's token (grammar
    /// fast-forward and prompt lookup); [`SpeculationConfig::off`] decodes plainly.
    pub speculation: SpeculationConfig,
    /// Where the prefix index's changes go (a KV-event publisher): a
    /// `Cleared` first, then, after every step, what it stored and removed.
    pub kv_events: Option<KvEventSink>,
}

/// Receives the prefix index's changes in batches, in order (sending never blocks the engine).
pub type KvEventSink = tokio::sync::mpsc::UnboundedSender<Vec<tessera_kv::IndexEvent>>;

impl Default for EngineConfig {
    fn default() -> Self {
        Self::for_tokens(16 * 1024)
    }
}

impl EngineConfig {
    /// Defaults with a pool of at least `kv_tokens` token slots.
    pub fn for_tokens(kv_tokens: usize) -> Self {
        Self {
            kv_blocks: kv_tokens.div_ceil(DEFAULT_BLOCK_SIZE).max(1),
            block_size: DEFAULT_BLOCK_SIZE,
            kv_dtype: KvDtype::default(),
            max_batch_tokens: 512,
            max_running: 16,
            max_waiting: 256,
            kv_cache_dir: None,
            model_fingerprint: None,
            speculation: SpeculationConfig::default(),
            kv_events: None,
        }
    }

    /// Token slots in the pool.
    pub fn kv_tokens(&self) -> usize {
        self.kv_blocks * self.block_size
    }

    /// Check the numbers fit together; the error names the field.
    pub fn validate(&self) -> Result<(), EngineError> {
        let positive = [
            ("kv_blocks", self.kv_blocks),
            ("block_size", self.block_size),
            ("max_batch_tokens", self.max_batch_tokens),
            ("max_running", self.max_running),
            ("max_waiting", self.max_waiting),
        ];
        if let Some((field, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(EngineError::Config(format!("{field} must be at least 1")));
        }
        if self.kv_blocks >= u32::MAX as usize {
            return Err(EngineError::Config(format!(
                "kv_blocks is {}, over the limit of {}",
                self.kv_blocks,
                u32::MAX - 1
            )));
        }
        if self.max_running > self.max_batch_tokens {
            return Err(EngineError::Config(format!(
                "max_running ({}) exceeds max_batch_tokens ({}): every running sequence needs a token per step",
                self.max_running, self.max_batch_tokens
            )));
        }
        if self.kv_cache_dir.is_some() && self.model_fingerprint.is_none() {
            return Err(EngineError::Config(
                "kv_cache_dir needs model_fingerprint to key the persisted cache".into(),
            ));
        }
        Ok(())
    }
}
