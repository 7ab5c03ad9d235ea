//! Why this layer refused or failed a request, typed; `tessera-server` maps
//! each kind to an HTTP status once.

use super::endpoint::Endpoint;
use tessera_engine::{EngineError, SourceError};

/// A request refused by this layer: the field at fault (`messages[2].content`)
/// and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{param}: {message}")]
pub struct InvalidRequest {
    /// The request field, as a path into the request body.
    pub param: String,
    /// What is wrong, for a person.
    pub message: String,
}

impl InvalidRequest {
    /// The request is wrong in `param`.
    pub fn new(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            param: param.into(),
            message: message.into(),
        }
    }
}

/// Why a request could not become a job or an answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RequestError {
    /// The client's request is wrong (a 400).
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    /// The engine refused or failed it (its own kinds: input, queue full,
    /// stopped, internal).
    #[error("{source}")]
    Engine {
        /// The engine's error.
        #[source]
        source: EngineError,
        /// The request field it is about, as the endpoint names it.
        param: Option<&'static str>,
    },
    /// Something failed inside this layer (not the client's doing).
    #[error("{doing}: {source}")]
    Internal {
        /// What was being done.
        doing: &'static str,
        /// The error that caused it.
        #[source]
        source: SourceError,
    },
}

impl RequestError {
    /// The request is wrong in `param`.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid(InvalidRequest::new(param, message))
    }

    /// The engine's `error`, its field named as `endpoint`'s requests name it.
    pub fn engine(error: EngineError, endpoint: Endpoint) -> Self {
        let param = match &error {
            EngineError::OverLimit { field, .. } | EngineError::Invalid { field, .. } => Some(endpoint.param(*field)),
            _ => None,
        };
        Self::Engine { source: error, param }
    }

    /// An internal failure while `doing` something.
    pub fn internal(doing: &'static str, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Internal {
            doing,
            source: std::sync::Arc::new(source),
        }
    }
}
