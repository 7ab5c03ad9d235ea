//! The engine's typed errors. Input errors name the field and the limit.

/// Why a request or an engine command failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    /// A request field is out of range.
    #[error("{field} is {value}, over the limit of {limit}")]
    OverLimit {
        /// The offending field.
        field: &'static str,
        /// Its value.
        value: usize,
        /// The largest accepted value.
        limit: usize,
    },
    /// A request field is invalid for another reason.
    #[error("{field}: {message}")]
    Invalid {
        /// The offending field.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The waiting queue is full; retry later.
    #[error("the engine's queue is full ({limit} requests waiting); retry later")]
    QueueFull {
        /// The queue's capacity.
        limit: usize,
    },
    /// The engine was configured wrongly.
    #[error("engine configuration: {0}")]
    Config(String),
    /// The engine has stopped (shut down, or its thread ended).
    #[error("the engine has stopped")]
    Stopped,
    /// The model failed while running this request (an internal error).
    #[error("the model failed: {0}")]
    Model(String),
    /// Sampling found no token to draw (every logit masked or not finite).
    #[error("sampling failed: {0}")]
    Sampling(String),
    /// Saving or restoring the persisted prefix cache failed.
    #[error("prefix cache persistence: {0}")]
    Persist(String),
}

impl From<tessera_sample::SamplingError> for EngineError {
    fn from(error: tessera_sample::SamplingError) -> Self {
        match error {
            tessera_sample::SamplingError::InvalidParameter { field, .. } => EngineError::Invalid {
                field,
                message: error.to_string(),
            },
            other => EngineError::Sampling(other.to_string()),
        }
    }
}
