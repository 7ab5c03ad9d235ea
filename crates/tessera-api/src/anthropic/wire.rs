//! What Anthropic clients send to `/v1/messages` and
//! `/v1/messages/count_tokens`. Unknown fields are ignored (clients send
//! fields a server may not know, `cache_control` among them: caching here is
//! automatic); a known field of the wrong type is an error naming its path.
//! Content the model cannot read (images, documents) and extended thinking
//! parse into variants of their own, so that they are refused with a clear
//! message rather than a shape error.

use crate::openai::ToolChoiceSpec;
use crate::words::Listed;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/messages` (and, without `max_tokens`, `/v1/messages/count_tokens`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct MessagesRequest {
    /// Echoed: one model is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Most tokens to generate: required by `/v1/messages`, as Anthropic requires it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The conversation, alternating user and assistant turns.
    pub messages: Vec<InputMessage>,
    /// Instructions: a string or text blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Blocks<TextBlock>>,
    /// Strings that end the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Stream server-sent events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// 0 to 1 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Keep the k most likely tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<usize>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// `auto` | `any` | `tool` | `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Replaces `tool_choice` when sent, in OpenAI's forms (an allowed list,
    /// a `browser_*` family), as on the chat route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x_tessera_tool_choice: Option<ToolChoiceSpec>,
    /// `user_id` names the session when no `X-Session-Id` is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Extended thinking: `disabled`, or `adaptive` (the model decides, and the models here never
    /// think in blocks); `enabled` is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// Output options: `format` (a JSON schema the answer obeys) and `effort` (a hint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_config: Option<OutputConfig>,
    /// Server-side context edits: only clearing thinking blocks (there are none) is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_management: Option<ContextManagement>,
}

/// One turn of the conversation.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct InputMessage {
    /// `user` or `assistant`.
    pub role: Role,
    /// A string, or content blocks.
    pub content: Blocks<ContentBlock>,
}

wire_words! {
    /// Who wrote a turn.
    pub enum Role ("role") {
        /// The user (tool results come in user turns).
        User = "user",
        /// The model.
        Assistant = "assistant",
        /// Instructions in the middle of the conversation (Claude Code's `mid-conversation-system`).
        System = "system",
    }
}

/// A string, or a list of blocks.
pub type Blocks<B> = crate::words::TextOr<B>;

impl Listed for TextBlock {
    const LIST: &'static str = "text blocks";
}

impl Listed for ContentBlock {
    const LIST: &'static str = "content blocks";
}

impl Listed for ResultBlock {
    const LIST: &'static str = "content blocks";
}

/// A text block (system prompt, tool results).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct TextBlock {
    /// `text`.
    #[serde(rename = "type")]
    pub kind: TextKind,
    /// The text.
    pub text: String,
}

wire_words! {
    /// The one block type of a system prompt.
    pub enum TextKind ("block type") {
        /// Text.
        Text = "text",
    }
}

/// A content block of a turn.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A call the model made (in an assistant turn).
    ToolUse {
        /// Its id.
        id: String,
        /// The tool.
        name: String,
        /// The arguments object.
        input: Value,
    },
    /// A tool's result (in a user turn).
    ToolResult {
        /// The call it answers.
        tool_use_id: String,
        /// The result: a string or text blocks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Blocks<ResultBlock>>,
        /// Whether the tool failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
    },
    /// An image (refused: the models served read text only).
    Image {},
    /// A document (refused).
    Document {},
    /// A thinking block (refused: no model here thinks in blocks).
    Thinking {},
    /// A redacted thinking block (refused).
    RedactedThinking {},
}

/// A block of a tool result.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResultBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image (refused).
    Image {},
    /// A document (refused).
    Document {},
}

/// A tool definition.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Tool {
    /// Absent or `custom` for a client tool; Anthropic's server tools
    /// (`bash_…`, `web_search_…`) are refused.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The name the model calls it by.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the input object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
}

/// `tool_choice`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice {
    /// Text or calls, as the model chooses.
    Auto {
        /// At most one call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// At least one call, of any tool.
    Any {
        /// Exactly one call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// A call of this tool (or, Tessera's extension, of a `prefix*` family).
    Tool {
        /// The tool.
        name: String,
        /// Exactly one call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// No calls.
    None {},
}

/// `metadata`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Metadata {
    /// The end user (a session hint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

/// `thinking`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Thinking {
    /// `enabled` is refused; `disabled` and `adaptive` are what happens anyway.
    #[serde(rename = "type")]
    pub kind: String,
}

/// `output_config`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct OutputConfig {
    /// How hard the model should work: a hint, taken as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The answer's format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<OutputFormat>,
}

/// `output_config.format`: `{"type": "json_schema", "schema": …}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct OutputFormat {
    /// `json_schema`.
    #[serde(rename = "type")]
    pub kind: OutputFormatKind,
    /// The schema the answer obeys.
    pub schema: Value,
}

wire_words! {
    /// `output_config.format.type`.
    pub enum OutputFormatKind ("output format") {
        /// JSON obeying `schema`.
        JsonSchema = "json_schema",
    }
}

/// `context_management`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ContextManagement {
    /// The edits asked for.
    #[serde(default)]
    pub edits: Vec<ContextEdit>,
}

/// One context edit.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ContextEdit {
    /// `clear_thinking_…` (accepted: no thinking blocks exist) or another (refused).
    #[serde(rename = "type")]
    pub kind: String,
}

impl MessagesRequest {
    /// A request for `messages` with `max_tokens`, every other field unset.
    pub fn new(messages: Vec<InputMessage>, max_tokens: u64) -> Self {
        Self {
            messages,
            max_tokens: Some(max_tokens),
            ..Self::default()
        }
    }
}
