//! The OpenAI chat and completions layer, without HTTP: the wire types
//! ([`api`]), the history rendered into a prompt ([`prompt`]), the answer's
//! bodies and chunks ([`answer`]), and the pipeline that turns streamed token text into content and tool-call
//! deltas ([`pipeline`]). `tessera-server` puts routes, SSE framing, auth,
//! limits and the one mapping from errors to HTTP statuses around it; an
//! in-process caller can use it without a socket.
//!
//! [`chat_job`] and [`completion_job`] validate a request into a [`Job`]
//! (the engine's request and how to answer it) against an [`OpenAi`]
//! context; what they refuse is an [`OpenAiError`], a client's mistake
//! always an [`InvalidRequest`] naming the request field at fault.
//! [`start`] submits a job; its [`Answer`] is read as one JSON body or as
//! [`Chunks`] ([`answer`]).
#![deny(missing_docs)]

pub mod answer;
pub mod api;
mod chat;
pub mod choice;
mod completions;
mod context;
mod error;
pub mod pipeline;
pub mod prompt;

pub use answer::{start, Answer, Chunk, Chunks, Endpoint};
pub use chat::{chat_job, Job};
pub use completions::completion_job;
pub use context::{OpenAi, OpenAiConfig, DEFAULT_MAX_TOKENS};
pub use error::{InvalidRequest, OpenAiError};
pub use pipeline::{Delta, Pipeline, StopScanner};
