//! The engine's typed errors. Input errors name the field (a [`Field`], not
//! a string: the OpenAI layer maps it to the request field once) and the limit;
//! internal failures keep the error that caused them as their `source`.

use std::fmt;
use std::sync::Arc;

/// An error kept as the source of an [`EngineError`] (shared: one forward
/// failure fails every sequence of its batch).
pub type SourceError = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// A field of a generation request, as the engine checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The prompt as a whole (it must not be empty).
    Prompt,
    /// The prompt's length in tokens.
    PromptTokens,
    /// One token id of the prompt.
    PromptTokenId,
    /// The most tokens to generate.
    MaxTokens,
    /// The stop strings (how many, or one that is empty).
    Stop,
    /// One stop string's length in bytes.
    StopStringBytes,
    /// The tool constraint (its tools and choice).
    ToolChoice,
    /// A sampling parameter, by the name `tessera-sample` checks it under
    /// (`temperature`, `top_p`, …: the same as the request field).
    Sampling(&'static str),
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Prompt => "prompt",
            Field::PromptTokens => "prompt tokens",
            Field::PromptTokenId => "prompt token id",
            Field::MaxTokens => "max_tokens",
            Field::Stop => "stop",
            Field::StopStringBytes => "stop string bytes",
            Field::ToolChoice => "tool_choice",
            Field::Sampling(name) => name,
        })
    }
}

/// Why a request or an engine command failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// A request field is out of range.
    #[error("{field} is {value}, over the limit of {limit}")]
    OverLimit {
        /// The offending field.
        field: Field,
        /// Its value.
        value: usize,
        /// The largest accepted value.
        limit: usize,
    },
    /// A request field is invalid for another reason.
    #[error("{field}: {message}")]
    Invalid {
        /// The offending field.
        field: Field,
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
    /// The model (or its tokenizer) failed while running this request (an
    /// internal error).
    #[error("the model failed {doing}: {source}")]
    Model {
        /// What the engine was doing ("in the forward pass", "decoding token 17").
        doing: String,
        /// The model's or tokenizer's error.
        #[source]
        source: SourceError,
    },
    /// Sampling found no token to draw (every logit masked or not finite),
    /// or the constraint refused the drawn token.
    #[error("sampling failed: {source}")]
    Sampling {
        /// The sampler's or the matcher's error.
        #[source]
        source: SourceError,
    },
    /// Saving or restoring the persisted prefix cache failed.
    #[error("prefix cache persistence, {doing}: {source}")]
    Persist {
        /// What was being done ("creating /var/cache/tessera").
        doing: String,
        /// The I/O or format error.
        #[source]
        source: SourceError,
    },
}

impl EngineError {
    /// [`EngineError::Model`] while `doing` something.
    pub fn model(doing: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Model {
            doing: doing.into(),
            source: Arc::new(source),
        }
    }

    /// [`EngineError::Persist`] while `doing` something.
    pub fn persist(doing: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Persist {
            doing: doing.into(),
            source: Arc::new(source),
        }
    }

    /// [`EngineError::Sampling`] from its cause.
    pub fn sampling(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Sampling {
            source: Arc::new(source),
        }
    }
}

/// Two errors are equal when they are the same kind and say the same (a
/// source is compared by its message: errors of other crates are not `Eq`).
impl PartialEq for EngineError {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other) && self.to_string() == other.to_string()
    }
}

impl Eq for EngineError {}

impl From<tessera_sample::SamplingError> for EngineError {
    fn from(error: tessera_sample::SamplingError) -> Self {
        match error {
            tessera_sample::SamplingError::InvalidParameter { field, .. } => EngineError::Invalid {
                field: Field::Sampling(field),
                message: error.to_string(),
            },
            other => EngineError::sampling(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn internal_errors_keep_their_source_and_limits_name_their_field() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "read-only");
        let error = EngineError::persist("creating /cache", io);
        assert_eq!(
            error.to_string(),
            "prefix cache persistence, creating /cache: read-only"
        );
        let source = error.source().expect("the I/O error is kept");
        assert_eq!(source.to_string(), "read-only");
        let over = EngineError::OverLimit {
            field: Field::PromptTokens,
            value: 9000,
            limit: 8191,
        };
        assert_eq!(over.to_string(), "prompt tokens is 9000, over the limit of 8191");
    }
}
