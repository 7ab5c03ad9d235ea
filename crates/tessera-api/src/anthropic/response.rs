//! What `/v1/messages` answers: a message, or its stream of events
//! (`message_start`, `content_block_start`, `ping`, `content_block_delta`
//! with `text_delta` / `input_json_delta`, `content_block_stop`,
//! `message_delta`, `message_stop`), as the official SDKs parse them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `stop_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model ended its turn.
    EndTurn,
    /// `max_tokens` (or the context) was reached.
    MaxTokens,
    /// A stop sequence ended it (named in `stop_sequence`).
    StopSequence,
    /// It called tools.
    ToolUse,
    /// The context window was reached before `max_tokens`.
    ModelContextWindowExceeded,
}

impl From<&crate::FinishReason> for StopReason {
    fn from(reason: &crate::FinishReason) -> Self {
        match reason {
            crate::FinishReason::EndTurn => Self::EndTurn,
            crate::FinishReason::StopSequence(_) => Self::StopSequence,
            crate::FinishReason::Length => Self::MaxTokens,
            crate::FinishReason::ToolCalls => Self::ToolUse,
            crate::FinishReason::ContextWindow => Self::ModelContextWindowExceeded,
        }
    }
}

/// The stop sequence that ended an answer, if one did.
pub(crate) fn stop_sequence(reason: &crate::FinishReason) -> Option<String> {
    match reason {
        crate::FinishReason::StopSequence(stop) => Some(stop.clone()),
        _ => None,
    }
}

/// Token accounting: `input_tokens` counts the prompt tokens computed,
/// `cache_read_input_tokens` those served from the prefix cache (their sum
/// is the prompt, a forced call's opening included), as Anthropic counts
/// them. The split is known when the answer ends: a stream's
/// `message_start` counts the prompt as sent in `input_tokens`, and its
/// `message_delta` carries the final figures, which the SDKs take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens not served from the cache.
    pub input_tokens: usize,
    /// Tokens generated.
    pub output_tokens: usize,
    /// Always 0: every computed block is cached without being asked.
    pub cache_creation_input_tokens: usize,
    /// Prompt tokens served from the prefix cache.
    pub cache_read_input_tokens: usize,
    /// Tessera's extension: speculative decoding's counts (absent when nothing was drafted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<crate::SpeculationUsage>,
}

impl From<tessera_engine::Usage> for Usage {
    fn from(usage: tessera_engine::Usage) -> Self {
        Self {
            input_tokens: usage.prompt_tokens - usage.cached_tokens.min(usage.prompt_tokens),
            output_tokens: usage.completion_tokens,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: usage.cached_tokens,
            speculation: crate::SpeculationUsage::of(&usage),
        }
    }
}

/// A whole answer (`"type": "message"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MessageResponse {
    /// `msg_…`.
    pub id: String,
    /// `message`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `assistant`.
    pub role: String,
    /// The model id.
    pub model: String,
    /// Text, then calls.
    pub content: Vec<ResponseBlock>,
    /// Why it ended (null in `message_start`).
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that ended it.
    pub stop_sequence: Option<String>,
    /// Token accounting.
    pub usage: Usage,
}

/// A block of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseBlock {
    /// Free text.
    Text {
        /// The text.
        text: String,
    },
    /// A call.
    ToolUse {
        /// `toolu_…`.
        id: String,
        /// The tool.
        name: String,
        /// The arguments (`{}` when a block starts; the deltas fill it).
        input: Value,
    },
}

/// One event of a streamed answer; its `type` is also the SSE event name.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// The message, empty, with the prompt's usage.
    MessageStart {
        /// The message so far.
        message: MessageResponse,
    },
    /// A block opens.
    ContentBlockStart {
        /// Its position.
        index: usize,
        /// The block, empty.
        content_block: ResponseBlock,
    },
    /// Keeps the connection alive.
    Ping,
    /// A block grows.
    ContentBlockDelta {
        /// Its position.
        index: usize,
        /// What it adds.
        delta: BlockDelta,
    },
    /// A block is complete.
    ContentBlockStop {
        /// Its position.
        index: usize,
    },
    /// How the message ended, with the final usage.
    MessageDelta {
        /// Stop reason and sequence.
        delta: MessageDelta,
        /// The whole answer's usage.
        usage: Usage,
    },
    /// The last event.
    MessageStop,
}

impl StreamEvent {
    /// The SSE event name (the `type`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::MessageStart { .. } => "message_start",
            Self::ContentBlockStart { .. } => "content_block_start",
            Self::Ping => "ping",
            Self::ContentBlockDelta { .. } => "content_block_delta",
            Self::ContentBlockStop { .. } => "content_block_stop",
            Self::MessageDelta { .. } => "message_delta",
            Self::MessageStop => "message_stop",
        }
    }
}

/// What a delta adds to a block.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta {
    /// More text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// More of a call's arguments (JSON text).
    InputJsonDelta {
        /// The next piece.
        partial_json: String,
    },
}

/// `message_delta.delta`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MessageDelta {
    /// Why it ended.
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that ended it.
    pub stop_sequence: Option<String>,
}

/// `POST /v1/messages/count_tokens`'s answer.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TokenCount {
    /// Prompt tokens the request renders to.
    pub input_tokens: usize,
}
