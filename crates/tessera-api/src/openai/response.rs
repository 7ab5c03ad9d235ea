//! What `/v1/chat/completions` and `/v1/completions` answer: typed bodies and
//! chunks, serialized by the server and read back by Tessera's own clients
//! (the agent reads chunks in process as these structs, over HTTP as their
//! JSON).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `finish_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model ended its turn, or a stop string ended it.
    Stop,
    /// The length limit.
    Length,
    /// It called tools.
    ToolCalls,
    /// Another server filtered the content (never sent by Tessera).
    ContentFilter,
    /// Another server's word Tessera does not know.
    #[serde(other)]
    Other,
}

impl From<&crate::FinishReason> for FinishReason {
    fn from(reason: &crate::FinishReason) -> Self {
        match reason {
            crate::FinishReason::EndTurn | crate::FinishReason::StopSequence(_) => Self::Stop,
            crate::FinishReason::Length | crate::FinishReason::ContextWindow => Self::Length,
            crate::FinishReason::ToolCalls => Self::ToolCalls,
        }
    }
}

/// Token accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: usize,
    /// Generated tokens.
    #[serde(default)]
    pub completion_tokens: usize,
    /// Their sum.
    #[serde(default)]
    pub total_tokens: usize,
    /// Prompt tokens served from the prefix cache (absent or null from
    /// other servers: none).
    #[serde(default, deserialize_with = "null_as_default")]
    pub prompt_tokens_details: PromptTokensDetails,
    /// Tessera's extension: speculative decoding's counts (absent when nothing was drafted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<crate::SpeculationUsage>,
}

/// A field another server may send as `null`: read as its default.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens whose K/V was reused.
    #[serde(default, deserialize_with = "null_as_default")]
    pub cached_tokens: usize,
}

impl From<tessera_engine::Usage> for Usage {
    fn from(usage: tessera_engine::Usage) -> Self {
        Self {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.prompt_tokens + usage.completion_tokens,
            prompt_tokens_details: PromptTokensDetails {
                cached_tokens: usage.cached_tokens,
            },
            speculation: crate::SpeculationUsage::of(&usage),
        }
    }
}

/// A whole chat answer (`chat.completion`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// `chatcmpl-…`.
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// The model id.
    pub model: String,
    /// One choice.
    pub choices: Vec<ChatChoice>,
    /// Token accounting.
    pub usage: Option<Usage>,
    /// Always null.
    #[serde(default)]
    pub system_fingerprint: Option<String>,
}

/// The one choice of a chat answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatChoice {
    /// 0.
    pub index: usize,
    /// The assistant's message.
    pub message: AssistantMessage,
    /// Why it ended.
    pub finish_reason: Option<FinishReason>,
    /// Always null.
    #[serde(default)]
    pub logprobs: Option<Value>,
}

/// The assistant's answer: `content` is null when it is only calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// `assistant`.
    pub role: String,
    /// The free text.
    pub content: Option<String>,
    /// The calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
}

/// A call in an answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolCall {
    /// `call_…`.
    pub id: String,
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name and arguments.
    pub function: FunctionCall,
}

/// A call's function: its arguments as the model wrote them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool.
    pub name: String,
    /// JSON text.
    pub arguments: String,
}

/// One chunk of a streamed chat answer (`chat.completion.chunk`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    /// The answer's id.
    #[serde(default)]
    pub id: String,
    /// `chat.completion.chunk`.
    #[serde(default)]
    pub object: String,
    /// Unix seconds.
    #[serde(default)]
    pub created: u64,
    /// The model id.
    #[serde(default)]
    pub model: String,
    /// One choice, or none in the usage chunk.
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    /// With `include_usage`: null on every chunk but the last, which has only this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<Usage>>,
}

/// The one choice of a chunk.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkChoice {
    /// 0.
    #[serde(default)]
    pub index: usize,
    /// What this chunk adds.
    #[serde(default)]
    pub delta: ChunkDelta,
    /// Set on the last chunk with a choice.
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
    /// Always null.
    #[serde(default)]
    pub logprobs: Option<Value>,
}

/// What a chunk adds to the message.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChunkDelta {
    /// `assistant`, on the first chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// More free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// A call starts or its arguments grow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

/// A piece of a call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolCallDelta {
    /// Which call (its position in the answer).
    #[serde(default)]
    pub index: Option<usize>,
    /// Its id, on the first piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function`, on the first piece.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name (first piece) and argument text.
    #[serde(default)]
    pub function: FunctionDelta,
}

/// A piece of a call's function.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FunctionDelta {
    /// The tool, on the first piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// More argument text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// A raw completion, whole or one chunk of it (`text_completion`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TextCompletion {
    /// `cmpl-…`.
    pub id: String,
    /// `text_completion`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// The model id.
    pub model: String,
    /// One choice, or none in the usage chunk.
    pub choices: Vec<TextChoice>,
    /// The whole answer's usage; in a stream, as for chat chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<Usage>>,
}

/// The one choice of a raw completion.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TextChoice {
    /// 0.
    pub index: usize,
    /// The text (a chunk's piece of it).
    pub text: String,
    /// Why it ended (the last piece).
    pub finish_reason: Option<FinishReason>,
    /// Always null.
    #[serde(default)]
    pub logprobs: Option<Value>,
}
