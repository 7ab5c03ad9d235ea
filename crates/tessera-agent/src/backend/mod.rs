//! Where model requests go: the engine in this process ([`InProcess`], through
//! `tessera-api`, so validation, prompt rendering and masking are the
//! server's code without its HTTP) or any OpenAI-compatible URL ([`Http`]).
//! Both stream, and one [`sse::Assembler`] reads both streams' chunks, so TTFT is measured the same
//! way: from sending the request to the first content or tool-call delta.

mod http;
mod inprocess;
pub mod sse;

pub use http::Http;
pub use inprocess::InProcess;

use crate::AgentError;
use std::time::Duration;
use tessera_api::openai::{ChatCompletionRequest, FinishReason, StreamOptions};

/// One tool call as the model wrote it (arguments are the raw JSON text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatCall {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments' JSON text.
    pub arguments: String,
}

/// One answered chat request.
#[derive(Debug, Clone, Default)]
pub struct ChatOutcome {
    /// Free text.
    pub content: String,
    /// Tool calls, in order.
    pub calls: Vec<ChatCall>,
    /// Why the answer ended (`None` when the server did not say).
    pub finish_reason: Option<FinishReason>,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// From sending the request to the first content or call delta.
    pub ttft: Duration,
    /// From sending the request to the end of the stream.
    pub total: Duration,
}

/// A chat-completions endpoint.
pub trait Backend {
    /// Send `request` (the backend turns streaming on) with `session` as the
    /// `X-Session-Id` header, and read the answer.
    fn chat(&mut self, request: &ChatCompletionRequest, session: &str) -> Result<ChatOutcome, AgentError>;
    /// The model id requests name.
    fn model(&self) -> &str;
}

/// `request` with streaming and the usage chunk turned on, and the model named.
fn streaming(request: &ChatCompletionRequest, model: &str) -> ChatCompletionRequest {
    ChatCompletionRequest {
        stream: Some(true),
        stream_options: Some(StreamOptions {
            include_usage: Some(true),
        }),
        model: Some(model.to_string()),
        ..request.clone()
    }
}

/// The message of an OpenAI-shaped error body, or the body itself.
fn error_message(status: u16, body: &str) -> AgentError {
    let message = serde_json::from_str::<sse::ErrorBody>(body)
        .map(|body| body.error.message)
        .unwrap_or_else(|_| body.chars().take(500).collect());
    AgentError::Backend(format!("HTTP {status}: {message}"))
}
