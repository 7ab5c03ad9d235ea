//! OpenAI Chat Completions (`/v1/chat/completions`) and Completions
//! (`/v1/completions`): the wire types ([`wire`], [`words`], [`response`]),
//! parsed into the core ([`convert`], [`completion_job`]) and rendered out of
//! it ([`render`]).

mod completions;
pub mod convert;
pub mod render;
pub mod response;
pub mod wire;
pub mod words;

pub use completions::completion_job;
pub use convert::{chat_request, Streaming, EXTENSION_FIELD};
pub use render::{chat_completion, text_completion, ChatRender, CompletionRender};
pub use response::{ChatCompletion, ChatCompletionChunk, FinishReason, TextCompletion, Usage};
pub use wire::{ChatCompletionRequest, CompletionRequest, Message, StreamOptions, ToolCallSpec, ToolSpec};
pub use words::{Content, Role, ToolChoiceMode, ToolChoiceSpec};

use crate::{Api, Endpoint, Job, RequestError};

/// A Chat Completions body validated into a job (parsed into the core, then
/// [`crate::chat_job`]); `session` is the `X-Session-Id` header, if sent.
pub fn chat_job(
    api: &Api,
    body: ChatCompletionRequest,
    session: Option<String>,
) -> Result<(Job, Streaming), RequestError> {
    let (request, streaming) = chat_request(body, session)?;
    Ok((crate::chat_job(api, Endpoint::Chat, request)?, streaming))
}
