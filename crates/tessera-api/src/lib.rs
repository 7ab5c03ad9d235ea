//! The typed core every protocol Tessera serves is a thin adapter onto, and
//! the adapters, without HTTP:
//! - the core: a protocol-neutral [`ChatRequest`] validated by [`chat_job`]
//!   into a [`Job`] (rendering, tokenizing, constraint building: once, for
//!   every protocol), submitted by [`start`], answered as protocol-neutral
//!   [`Step`]s, [`Collected`] whole or rendered event by event through a
//!   protocol's [`Render`] ([`Frames`]);
//! - Chat Completions and Completions, in [`openai`];
//! - Messages, in [`anthropic`];
//! - the OpenAI Responses API (with its response store), in [`responses`].
//!
//! Each adapter parses its wire body into the core and renders the core's
//! answers back out; none validates, renders prompts or reads engine events
//! on its own. `tessera-server` puts routes, SSE framing, auth, limits and the
//! one mapping from errors to HTTP statuses around it; the agent and
//! `tessera generate` use it in process, without serializing anything.
//! What the core refuses is a [`RequestError`], a client's mistake always an
//! [`InvalidRequest`] naming the request field at fault.
#![deny(missing_docs)]

#[macro_use]
pub mod words;
pub mod anthropic;
mod core;
pub mod openai;
pub mod responses;

pub use crate::core::answer::{
    start, Answer, Call, Collected, Ending, FinishReason, Frame, Frames, Header, Render, SpeculationUsage, Step,
};
pub use crate::core::context::{Api, ApiConfig, DEFAULT_MAX_TOKENS, DEFAULT_STORED_RESPONSES};
pub use crate::core::endpoint::Endpoint;
pub use crate::core::error::{InvalidRequest, RequestError};
pub use crate::core::job::{chat_job, count_tokens, prompt_tokens, raw_job, Job};
pub use crate::core::memory::{Reply, ReplyMemory};
pub use crate::core::pipeline::{Delta, Pipeline, StopScanner};
pub use crate::core::prompt::{self, replayed_arguments};
pub use crate::core::request::{ChatRequest, Choice, Message, PastArguments, PastCall, RawRequest, Sampling};
pub use crate::core::tools_section::tools_prompt;
