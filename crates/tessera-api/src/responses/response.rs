//! What `/v1/responses` answers: a response object, or its stream of events,
//! in the shapes the official SDK's stream accumulator checks (every event
//! with `sequence_number`; items found by `output_index`, parts by
//! `content_index`; the same response id throughout; each item added, then
//! done, then listed in the final response).

use super::wire::{TextConfig, Tool};
use crate::openai::ToolChoiceSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResponseObject {
    /// `resp_…`.
    pub id: String,
    /// `response`.
    pub object: String,
    /// Unix seconds.
    pub created_at: u64,
    /// `in_progress`, `completed`, `incomplete` or `failed`.
    pub status: Status,
    /// The model id.
    pub model: String,
    /// Output items: the text as one message, then the calls.
    pub output: Vec<OutputItem>,
    /// Token accounting (null until the end).
    pub usage: Option<Usage>,
    /// Why it is incomplete.
    pub incomplete_details: Option<IncompleteDetails>,
    /// Why a failed response failed.
    pub error: Option<ResponseError>,
    /// The request's instructions.
    pub instructions: Option<String>,
    /// The request's limit.
    pub max_output_tokens: Option<u64>,
    /// Whether several calls could be made.
    pub parallel_tool_calls: bool,
    /// The stored response this one continues.
    pub previous_response_id: Option<String>,
    /// Whether it is stored for a later `previous_response_id`.
    pub store: bool,
    /// The temperature used.
    pub temperature: f32,
    /// The top_p used.
    pub top_p: f32,
    /// The request's tool choice (`auto` when it sent none).
    pub tool_choice: ToolChoiceSpec,
    /// The request's tools.
    pub tools: Vec<Tool>,
    /// The request's text format.
    pub text: TextConfig,
    /// Always `disabled`.
    pub truncation: String,
    /// The request's metadata.
    pub metadata: serde_json::Map<String, Value>,
}

/// A response's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Being generated.
    InProgress,
    /// Finished.
    Completed,
    /// Cut by the length limit.
    Incomplete,
    /// Failed after it started (`error` says why).
    Failed,
}

/// `error` of a failed response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResponseError {
    /// `server_error`, `rate_limit_exceeded`, …
    pub code: String,
    /// For a person.
    pub message: String,
}

/// `incomplete_details`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IncompleteDetails {
    /// `max_output_tokens`.
    pub reason: String,
}

/// Token accounting: `input_tokens` counts the whole prompt, of which
/// `cached_tokens` came from the prefix cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: usize,
    /// The cached part.
    pub input_tokens_details: InputTokensDetails,
    /// Tokens generated.
    pub output_tokens: usize,
    /// Always 0 reasoning tokens.
    pub output_tokens_details: OutputTokensDetails,
    /// Their sum.
    pub total_tokens: usize,
    /// Tessera's extension: speculative decoding's counts (absent when nothing was drafted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<crate::SpeculationUsage>,
}

/// `usage.input_tokens_details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputTokensDetails {
    /// Prompt tokens whose K/V was reused.
    pub cached_tokens: usize,
}

/// `usage.output_tokens_details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputTokensDetails {
    /// Always 0.
    pub reasoning_tokens: usize,
}

impl From<tessera_engine::Usage> for Usage {
    fn from(usage: tessera_engine::Usage) -> Self {
        Self {
            input_tokens: usage.prompt_tokens,
            input_tokens_details: InputTokensDetails {
                cached_tokens: usage.cached_tokens,
            },
            output_tokens: usage.completion_tokens,
            output_tokens_details: OutputTokensDetails::default(),
            total_tokens: usage.prompt_tokens + usage.completion_tokens,
            speculation: crate::SpeculationUsage::of(&usage),
        }
    }
}

/// An output item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    /// The answer's text.
    Message {
        /// `msg_…`.
        id: String,
        /// `in_progress` or `completed`.
        status: ItemStatus,
        /// `assistant`.
        role: String,
        /// One `output_text` part.
        content: Vec<OutputText>,
    },
    /// A call.
    FunctionCall {
        /// `fc_…`.
        id: String,
        /// `call_…`, which the call's result names.
        call_id: String,
        /// The tool.
        name: String,
        /// The arguments as the model wrote them (JSON text).
        arguments: String,
        /// `in_progress` or `completed`.
        status: ItemStatus,
    },
}

/// An item's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    /// Being generated.
    InProgress,
    /// Finished.
    Completed,
    /// Cut by the length limit.
    Incomplete,
}

/// An `output_text` part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputText {
    /// `output_text`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text.
    pub text: String,
    /// Always empty.
    pub annotations: Vec<Value>,
    /// Always empty.
    pub logprobs: Vec<Value>,
}

impl OutputText {
    /// A part holding `text`.
    pub fn new(text: String) -> Self {
        Self {
            kind: "output_text".into(),
            text,
            annotations: Vec::new(),
            logprobs: Vec::new(),
        }
    }
}

/// One event of a streamed response, with its place in the stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamEvent {
    /// 0, 1, 2… in the order sent.
    pub sequence_number: usize,
    /// The event.
    #[serde(flatten)]
    pub body: EventBody,
}

/// What an event says; its `type` is also the SSE event name.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EventBody {
    /// The response exists (first).
    #[serde(rename = "response.created")]
    Created {
        /// The response, empty.
        response: Box<ResponseObject>,
    },
    /// It is being generated.
    #[serde(rename = "response.in_progress")]
    InProgress {
        /// The response, empty.
        response: Box<ResponseObject>,
    },
    /// An item starts.
    #[serde(rename = "response.output_item.added")]
    ItemAdded {
        /// Its position.
        output_index: usize,
        /// The item, empty.
        item: OutputItem,
    },
    /// A message's text part starts.
    #[serde(rename = "response.content_part.added")]
    PartAdded {
        /// The message.
        item_id: String,
        /// Its position.
        output_index: usize,
        /// The part's position (0).
        content_index: usize,
        /// The part, empty.
        part: OutputText,
    },
    /// More text.
    #[serde(rename = "response.output_text.delta")]
    TextDelta {
        /// The message.
        item_id: String,
        /// Its position.
        output_index: usize,
        /// The part's position.
        content_index: usize,
        /// The text.
        delta: String,
        /// Always empty.
        logprobs: Vec<Value>,
    },
    /// The text is complete.
    #[serde(rename = "response.output_text.done")]
    TextDone {
        /// The message.
        item_id: String,
        /// Its position.
        output_index: usize,
        /// The part's position.
        content_index: usize,
        /// The whole text.
        text: String,
        /// Always empty.
        logprobs: Vec<Value>,
    },
    /// The text part is complete.
    #[serde(rename = "response.content_part.done")]
    PartDone {
        /// The message.
        item_id: String,
        /// Its position.
        output_index: usize,
        /// The part's position.
        content_index: usize,
        /// The whole part.
        part: OutputText,
    },
    /// More of a call's arguments.
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        /// The call item.
        item_id: String,
        /// Its position.
        output_index: usize,
        /// The next piece.
        delta: String,
    },
    /// A call's arguments are complete.
    #[serde(rename = "response.function_call_arguments.done")]
    ArgumentsDone {
        /// The call item.
        item_id: String,
        /// Its position.
        output_index: usize,
        /// The tool.
        name: String,
        /// The whole arguments.
        arguments: String,
    },
    /// An item is complete.
    #[serde(rename = "response.output_item.done")]
    ItemDone {
        /// Its position.
        output_index: usize,
        /// The whole item.
        item: OutputItem,
    },
    /// The response is complete (last).
    #[serde(rename = "response.completed")]
    Completed {
        /// The whole response.
        response: Box<ResponseObject>,
    },
    /// The response was cut by the length limit (last).
    #[serde(rename = "response.incomplete")]
    Incomplete {
        /// The whole response, `incomplete_details` set.
        response: Box<ResponseObject>,
    },
    /// The response failed after it started (last).
    #[serde(rename = "response.failed")]
    Failed {
        /// The response so far, `error` set.
        response: Box<ResponseObject>,
    },
}

impl EventBody {
    /// The SSE event name (the `type`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Created { .. } => "response.created",
            Self::InProgress { .. } => "response.in_progress",
            Self::ItemAdded { .. } => "response.output_item.added",
            Self::PartAdded { .. } => "response.content_part.added",
            Self::TextDelta { .. } => "response.output_text.delta",
            Self::TextDone { .. } => "response.output_text.done",
            Self::PartDone { .. } => "response.content_part.done",
            Self::ArgumentsDelta { .. } => "response.function_call_arguments.delta",
            Self::ArgumentsDone { .. } => "response.function_call_arguments.done",
            Self::ItemDone { .. } => "response.output_item.done",
            Self::Completed { .. } => "response.completed",
            Self::Incomplete { .. } => "response.incomplete",
            Self::Failed { .. } => "response.failed",
        }
    }
}
