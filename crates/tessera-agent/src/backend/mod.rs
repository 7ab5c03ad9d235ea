//! Where model requests go: the engine in this process ([`InProcess`], through
//! `tessera-openai`, so validation, prompt rendering and masking are the
//! server's code without its HTTP) or any OpenAI-compatible URL ([`Http`]).
//! Both stream, and one [`sse::Assembler`] reads both streams' chunks, so TTFT is measured the same
//! way: from sending the request to the first content or tool-call delta.

mod http;
mod inprocess;
pub mod sse;

pub use http::Http;
pub use inprocess::InProcess;

use crate::AgentError;
use serde_json::Value;
use std::time::Duration;

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
    /// `stop`, `length`, `tool_calls`, …
    pub finish_reason: String,
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
    /// Send `body` (an OpenAI chat request; the backend turns streaming on)
    /// with `session` as the `X-Session-Id` header, and read the answer.
    fn chat(&mut self, body: &Value, session: &str) -> Result<ChatOutcome, AgentError>;
    /// The model id requests name.
    fn model(&self) -> &str;
}

/// `body` with streaming and the usage chunk turned on, and the model named.
fn streaming_body(body: &Value, model: &str) -> Value {
    let mut body = body.clone();
    body["stream"] = Value::Bool(true);
    body["stream_options"] = serde_json::json!({"include_usage": true});
    body["model"] = Value::String(model.to_string());
    body
}

/// The message of an OpenAI-shaped error body, or the body itself.
fn error_message(status: u16, body: &str) -> AgentError {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.chars().take(500).collect());
    AgentError::Backend(format!("HTTP {status}: {message}"))
}
