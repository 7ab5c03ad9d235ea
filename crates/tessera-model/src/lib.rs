//! Tessera's model runtime: loading GGUF and safetensors checkpoints, the
//! tokenizer and chat template, and a Llama-family forward pass over a ragged
//! batch whose attention reads K/V through paged block tables.
//!
//! Only this crate touches `candle` tensors; the KV bookkeeping it relies on
//! (`tessera_kv`) is pure. The attention, RoPE, norm and cache-write kernels are
//! our own code on flat `f32` buffers, and the quantized products run on
//! `tessera_kernels` (candle's `QMatMul` only for formats without one of ours,
//! and on the device path). Features: `catalogue` (the shipped models and
//! `--model` resolution) and `diagnostics` (`check_kernels`), for the binary
//! and the test fixtures; `cuda` and `metal` for the device path.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(clippy::missing_safety_doc)]

pub mod attention;
mod batch;
mod cache;
mod config;
pub mod device;
mod error;
mod gguf;
mod host;
mod kv_cache;
mod kv_persist;
mod layers;
mod load;
mod matrix;
mod model;
#[cfg(any(test, feature = "diagnostics"))]
mod noise;
pub mod parallel;
mod protect;
mod rope;
mod safetensors;
mod sequence;
#[cfg(feature = "catalogue")]
mod shipped;
pub mod simd;
#[cfg(feature = "catalogue")]
mod source;
mod template;
mod tensors;
mod token_bytes;
mod tokenizer;
mod weights;

pub use batch::{Logits, LogitsFor, SeqInput};
pub use cache::KvCache;
pub use config::{Architecture, ModelConfig};
pub use device::{DeviceError, DeviceSpec};
pub use error::{ModelError, Result};
pub use gguf::GgufSource;
pub use kv_cache::{KvDtype, KvLayout, LayerKv};
pub use kv_persist::{load_prefix_cache, model_fingerprint, save_prefix_cache, PersistError};
pub use load::{LoadOptions, LoadedModel, ModelLocation};
pub use model::Model;
pub use protect::Protected;
pub use safetensors::HfDir;
pub use sequence::{Runtime, Sequence};
#[cfg(feature = "catalogue")]
pub use shipped::{default_model, shipped_model, ShippedModel, SHIPPED_MODELS};
#[cfg(feature = "catalogue")]
pub use source::{hf_hub_cache_dir, load_spec, resolve_offline, resolve_offline_in, ResolveError};
pub use template::{ChatMessage, ChatRole, ChatTemplate, CHATML_TEMPLATE};
pub use tokenizer::{GgufVocab, TextStream, Tokenizer};

impl LoadedModel {
    /// Load the model at `location`.
    pub fn load(location: &ModelLocation, options: &LoadOptions) -> Result<Self> {
        parallel::check_candle_pinned();
        match location {
            ModelLocation::Gguf(path) => gguf::load_gguf(path, options),
            ModelLocation::HfDir(dir) => safetensors::load_safetensors_dir(dir, options),
        }
    }
}
