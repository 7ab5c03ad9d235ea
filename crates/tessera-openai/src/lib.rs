//! The OpenAI chat and completions layer, without HTTP: the wire types
//! ([`api`]), the history rendered into a prompt ([`prompt`]), and the
//! pipeline that turns streamed token text into content and tool-call
//! deltas ([`pipeline`]). `tessera-server` puts routes, SSE framing, auth,
//! limits and the one mapping from errors to HTTP statuses around it; an
//! in-process caller can use it without a socket.
//!
//! A request this layer refuses is an [`InvalidRequest`] naming the request
//! field at fault.
#![deny(missing_docs)]

pub mod api;
pub mod pipeline;
pub mod prompt;

pub use pipeline::{Delta, Pipeline, StopScanner};

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
