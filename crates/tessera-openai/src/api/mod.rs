//! The OpenAI wire format: what clients send (deserialized once, at the
//! boundary) and what they get back. Unknown fields are ignored, as OpenAI's
//! own clients send fields a server may not know; known fields of the wrong
//! type are errors naming the field.

mod words;

pub use words::{
    Content, ContentPartKind, ResponseFormatKind, Role, ToolChoiceKind, ToolChoiceMode, ToolChoiceObject,
    ToolChoiceSpec, ToolKind,
};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    /// Ignored beyond being echoed: one model is served.
    #[serde(default)]
    pub model: Option<String>,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(default)]
    pub tools: Option<Vec<ToolSpec>>,
    /// `none` | `auto` | `required` | a named function | an allowed-tools set.
    #[serde(default)]
    pub tool_choice: Option<ToolChoiceSpec>,
    /// Replaces `tool_choice` when sent: carries a choice (a family such as
    /// `browser_*`) through a gateway that refuses it in `tool_choice`.
    #[serde(default)]
    pub x_tessera_tool_choice: Option<ToolChoiceSpec>,
    /// Whether more than one call may be made (default true, as OpenAI).
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    /// Stream server-sent events.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Streaming options.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Sampling temperature, 0 to 2 (default 1).
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass, (0, 1] (default 1).
    #[serde(default)]
    pub top_p: Option<f32>,
    /// Most tokens to generate (deprecated OpenAI name).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Most tokens to generate.
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    /// Seed for sampling.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Up to 4 strings that end the response.
    #[serde(default)]
    pub stop: Option<StopSpec>,
    /// `text`, `json_object` or `json_schema`.
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
    /// The end user or session (a session hint when no `X-Session-Id` is sent).
    #[serde(default)]
    pub user: Option<String>,
    /// Number of choices: only 1 is supported.
    #[serde(default)]
    pub n: Option<u32>,
    /// Only 0 is supported.
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    /// Only 0 is supported.
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    /// Only false is supported.
    #[serde(default)]
    pub logprobs: Option<bool>,
}

/// One message of the conversation.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Text, or text parts; may be null for an assistant message with tool calls.
    #[serde(default)]
    pub content: Option<Content>,
    /// Calls an assistant made.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallSpec>>,
    /// Which call a tool message answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// One content part (only text parts are supported).
#[derive(Debug, Clone, Deserialize)]
pub struct ContentPartText {
    /// `text`.
    #[serde(rename = "type")]
    pub kind: ContentPartKind,
    /// Its text.
    pub text: String,
}

/// A call in an assistant message of the history.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolCallSpec {
    /// The call's id.
    #[serde(default)]
    pub id: Option<String>,
    /// The function called.
    pub function: FunctionCallSpec,
}

/// A function call: its name and its arguments as a JSON string.
#[derive(Debug, Clone, Deserialize)]
pub struct FunctionCallSpec {
    /// The tool.
    pub name: String,
    /// JSON text of the arguments object.
    pub arguments: String,
}

/// A tool definition.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolSpec {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: ToolKind,
    /// The function.
    pub function: FunctionSpec,
}

/// A function's name, description and parameter schema.
#[derive(Debug, Clone, Deserialize)]
pub struct FunctionSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Schema of the arguments object (default: any object).
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// `{"name": …}`.
#[derive(Debug, Clone, Deserialize)]
pub struct NamedFunction {
    /// A tool name, or `prefix*`.
    pub name: String,
}

/// A restricted tool set.
#[derive(Debug, Clone, Deserialize)]
pub struct AllowedTools {
    /// `auto` or `required`.
    pub mode: ToolChoiceMode,
    /// The tools allowed.
    pub tools: Vec<AllowedToolSpec>,
}

/// One allowed tool: a bare name, `{"type": "function", "function": {"name": …}}`
/// (Chat Completions) or `{"type": "function", "name": …}` (the Responses API, SMG).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum AllowedToolSpec {
    /// A name, or `prefix*`.
    Name(String),
    /// The Chat Completions object form.
    Function {
        /// The named function.
        function: NamedFunction,
    },
    /// The flat object form.
    Flat {
        /// A name, or `prefix*`.
        name: String,
    },
}

/// `stop`: one string or a list.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum StopSpec {
    /// One stop string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Clone, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with the usage.
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// `response_format`.
#[derive(Debug, Clone, Deserialize)]
pub struct ResponseFormat {
    /// `text`, `json_object` or `json_schema`.
    #[serde(rename = "type")]
    pub kind: ResponseFormatKind,
    /// For `json_schema`.
    #[serde(default)]
    pub json_schema: Option<JsonSchemaFormat>,
}

/// `response_format.json_schema`.
#[derive(Debug, Clone, Deserialize)]
pub struct JsonSchemaFormat {
    /// A name for the schema.
    #[serde(default)]
    pub name: Option<String>,
    /// The schema (an object schema).
    #[serde(default)]
    pub schema: Option<Value>,
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct CompletionRequest {
    /// Echoed.
    #[serde(default)]
    pub model: Option<String>,
    /// The prompt text (a string, or a list holding one string).
    pub prompt: PromptSpec,
    /// Most tokens to generate (default 16, as OpenAI).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Sampling temperature, 0 to 2.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default)]
    pub top_p: Option<f32>,
    /// Seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Stop strings.
    #[serde(default)]
    pub stop: Option<StopSpec>,
    /// Stream server-sent events.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Streaming options.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Session hint.
    #[serde(default)]
    pub user: Option<String>,
    /// Only 1 is supported.
    #[serde(default)]
    pub n: Option<u32>,
    /// Only false is supported.
    #[serde(default)]
    pub echo: Option<bool>,
    /// Not supported (only absent or 0).
    #[serde(default)]
    pub logprobs: Option<u32>,
    /// Not supported.
    #[serde(default)]
    pub suffix: Option<String>,
    /// Only 1 is supported.
    #[serde(default)]
    pub best_of: Option<u32>,
    /// Only 0 is supported.
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    /// Only 0 is supported.
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
}

/// `prompt`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PromptSpec {
    /// One prompt.
    One(String),
    /// A batch (only one prompt is supported).
    Many(Vec<String>),
}

/// Token accounting in responses.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct UsageBody {
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Generated tokens.
    pub completion_tokens: usize,
    /// Their sum.
    pub total_tokens: usize,
    /// Prompt tokens served from the prefix cache.
    pub prompt_tokens_details: PromptTokensDetails,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct PromptTokensDetails {
    /// Prompt tokens whose K/V was reused.
    pub cached_tokens: usize,
}

impl From<tessera_engine::Usage> for UsageBody {
    fn from(usage: tessera_engine::Usage) -> Self {
        Self {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.prompt_tokens + usage.completion_tokens,
            prompt_tokens_details: PromptTokensDetails {
                cached_tokens: usage.cached_tokens,
            },
        }
    }
}
