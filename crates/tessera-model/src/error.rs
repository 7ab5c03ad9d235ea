//! The model crate's typed errors. Each message names the file, key or field
//! involved and, for limits, the limit.

use std::path::PathBuf;

/// Everything that can go wrong loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a readable GGUF / safetensors / JSON file.
    #[error("{path} is not a valid {format} file: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The expected format.
        format: &'static str,
        /// What the parser said.
        reason: String,
    },
    /// A required metadata key or tensor is absent.
    #[error("model is missing {what} `{name}`")]
    Missing {
        /// "metadata key", "tensor", "config field"...
        what: &'static str,
        /// Its name.
        name: String,
    },
    /// A model directory lacks files it needs.
    #[error("{dir} is not a complete model: missing {missing}")]
    MissingFiles {
        /// The directory inspected.
        dir: PathBuf,
        /// The missing files, comma-separated.
        missing: String,
    },
    /// The architecture is not one Tessera implements.
    #[error("unsupported architecture `{0}`: Tessera runs llama (SmolLM2, TinyLlama, Llama 2/3), mistral and qwen2")]
    UnsupportedArchitecture(String),
    /// A metadata value is present but unusable.
    #[error("invalid model configuration: {0}")]
    InvalidConfig(String),
    /// Tokenizer construction or use failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// Chat template compilation or rendering failed.
    #[error("chat template: {0}")]
    Template(String),
    /// The input does not fit a limit of the model or the cache.
    #[error("{field} is {value}, over the limit of {limit}")]
    OverLimit {
        /// What was measured ("prompt tokens", "token id"...).
        field: &'static str,
        /// The value.
        value: usize,
        /// The limit.
        limit: usize,
    },
    /// A batch handed to the forward pass is malformed (a caller bug).
    #[error("invalid batch: {0}")]
    InvalidBatch(String),
    /// The device could not be opened, or an operation on it failed.
    #[error("device: {0}")]
    Device(String),
    /// The model and the KV cache live on different devices.
    #[error("the model runs on {model} but the KV cache lives on {cache}")]
    DeviceMismatch {
        /// The model's device.
        model: crate::device::spec::DeviceSpec,
        /// The cache's device.
        cache: crate::device::spec::DeviceSpec,
    },
    /// An error from candle's tensor operations.
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),
}

/// Shorthand for results in this crate.
pub type Result<T> = std::result::Result<T, ModelError>;

impl ModelError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn missing(what: &'static str, name: impl Into<String>) -> Self {
        Self::Missing {
            what,
            name: name.into(),
        }
    }
}
