//! What clients send to `/v1/responses`. Unknown fields are ignored; a known
//! field of the wrong type is an error naming its path. Input items are read
//! as one flat shape whose `type` (absent for a bare `{"role", "content"}`
//! message) says which fields must be there, so a missing field is named
//! with its item's index; kinds of item and content the models here cannot
//! handle parse into words of their own and are refused by name.

use crate::openai::ToolChoiceSpec;
use crate::words::{Listed, TextOr};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/responses`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ResponsesRequest {
    /// Echoed: one model is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A string (one user message) or items.
    pub input: Input,
    /// A system message ahead of the input (not carried over by `previous_response_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Function tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// `none` | `auto` | `required` | `{"type": "function", "name"}` | `{"type": "allowed_tools", "mode", "tools"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoiceSpec>,
    /// Replaces `tool_choice` when sent (a gateway's carrier, as on the chat route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x_tessera_tool_choice: Option<ToolChoiceSpec>,
    /// Whether more than one call may be made (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Most tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// 0 to 2 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// `format`: text, `json_object` or `json_schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextConfig>,
    /// Continue a stored response's conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    /// Keep this response for a later `previous_response_id` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// Stream server-sent events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// The end user (a session hint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The conversation's cache key (a session hint; Codex sends its conversation id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    /// Reasoning options: only absent (or an effort of `none`/`minimal`) is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
    /// Run in the background: not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    /// Most calls in the response: only 1 (one call, no parallel calls) is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u64>,
    /// Extra output to include: only reasoning's (there is none) is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// Log probabilities: not supported (only 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u64>,
    /// `disabled` (a prompt over the context is refused); `auto` is not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncation: Option<String>,
    /// A server-side conversation: not supported (send `previous_response_id` or the items).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Value>,
    /// A stored prompt template: not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Value>,
    /// Echoed in the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Map<String, Value>>,
}

/// `input`: a string (one user message) or items.
pub type Input = TextOr<InputItem>;

impl Listed for InputItem {
    const LIST: &'static str = "input items";
}

wire_words! {
    /// An input item's `type`.
    pub enum ItemKind ("item type") {
        /// A message (also what an item without `type` is).
        Message = "message",
        /// A call the model made.
        FunctionCall = "function_call",
        /// A call's result.
        FunctionCallOutput = "function_call_output",
        /// A reasoning item (refused: no model here reasons in items).
        Reasoning = "reasoning",
        /// A reference to a stored item (refused: send the item).
        ItemReference = "item_reference",
    }
}

wire_words! {
    /// A message's role.
    pub enum ItemRole ("role") {
        /// The user.
        User = "user",
        /// The model.
        Assistant = "assistant",
        /// Instructions.
        System = "system",
        /// Instructions from the developer (read as `system`).
        Developer = "developer",
    }
}

/// One input item, every kind's fields in one shape.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct InputItem {
    /// Absent for a bare message.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ItemKind>,
    /// A message's role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<ItemRole>,
    /// A message's content: a string or parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Parts>,
    /// A call's id (`function_call`, `function_call_output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// A call's tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A call's arguments (JSON text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// A call's result: a string or parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Parts>,
    /// The item's id (ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A string, or content parts.
pub type Parts = TextOr<ContentPart>;

impl Listed for ContentPart {
    const LIST: &'static str = "content parts";
}

wire_words! {
    /// A content part's type.
    pub enum PartKind ("content part type") {
        /// Text the user (or a tool) wrote.
        InputText = "input_text",
        /// Text the model wrote.
        OutputText = "output_text",
        /// A refusal the model wrote (read as text).
        Refusal = "refusal",
        /// An image (refused: the models here read text only).
        InputImage = "input_image",
        /// A file (refused).
        InputFile = "input_file",
    }
}

/// A content part.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ContentPart {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: PartKind,
    /// Its text (text parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A refusal's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}

/// A tool: function tools are supported; other types are refused by name.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Tool {
    /// `function` (anything else is refused).
    #[serde(rename = "type")]
    pub kind: String,
    /// The name the model calls it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Strict schema adherence (always: every call obeys its schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `text`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct TextConfig {
    /// The answer's format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TextFormat>,
}

wire_words! {
    /// `text.format.type`.
    pub enum FormatKind ("text format") {
        /// Free text.
        Text = "text",
        /// Any JSON object.
        JsonObject = "json_object",
        /// JSON obeying `schema`.
        JsonSchema = "json_schema",
    }
}

/// `text.format`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct TextFormat {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: FormatKind,
    /// A name for the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The schema (`json_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Strict adherence (always).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `reasoning`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Reasoning {
    /// The effort asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
}

impl ResponsesRequest {
    /// A request for `input`, every other field unset.
    pub fn new(input: Input) -> Self {
        Self {
            input,
            ..Self::default()
        }
    }
}

impl InputItem {
    /// A message of `role` with `text`.
    pub fn message(role: ItemRole, text: impl Into<String>) -> Self {
        Self {
            kind: Some(ItemKind::Message),
            role: Some(role),
            content: Some(Parts::Text(text.into())),
            ..Self::default()
        }
    }

    /// A call's result.
    pub fn function_call_output(call_id: impl Into<String>, output: impl Into<String>) -> Self {
        Self {
            kind: Some(ItemKind::FunctionCallOutput),
            call_id: Some(call_id.into()),
            output: Some(Parts::Text(output.into())),
            ..Self::default()
        }
    }
}
