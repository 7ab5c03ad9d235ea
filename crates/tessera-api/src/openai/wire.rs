//! What OpenAI clients send to `/v1/chat/completions` and `/v1/completions`:
//! deserialized once, at the boundary, and serialized by Tessera's own
//! clients (the agent's HTTP backend). Unknown fields are ignored, as
//! OpenAI's own clients send fields a server may not know; known fields of
//! the wrong type are errors naming the field.

use super::words::{Content, ContentPartKind, ResponseFormatKind, Role, ToolChoiceMode, ToolChoiceSpec, ToolKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ChatCompletionRequest {
    /// Ignored beyond being echoed: one model is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSpec>>,
    /// `none` | `auto` | `required` | a named function | an allowed-tools set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoiceSpec>,
    /// Replaces `tool_choice` when sent: carries a choice (a family such as
    /// `browser_*`) through a gateway that refuses it in `tool_choice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x_tessera_tool_choice: Option<ToolChoiceSpec>,
    /// Whether more than one call may be made (default true, as OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Stream server-sent events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Streaming options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Sampling temperature, 0 to 2 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass, (0, 1] (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Most tokens to generate (deprecated OpenAI name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Most tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// Seed for sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Up to 4 strings that end the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopSpec>,
    /// `text`, `json_object` or `json_schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// The end user or session (a session hint when no `X-Session-Id` is sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Number of choices: only 1 is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// Only 0 is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f32>,
    /// Only 0 is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    /// Only false is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<bool>,
}

/// One message of the conversation.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Text, or text parts; may be null for an assistant message with tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// Calls an assistant made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallSpec>>,
    /// Which call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// One content part (only text parts are supported).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ContentPartText {
    /// `text`.
    #[serde(rename = "type")]
    pub kind: ContentPartKind,
    /// Its text.
    pub text: String,
}

/// A call in an assistant message of the history.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ToolCallSpec {
    /// The call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function` (optional when read).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    /// The function called.
    pub function: FunctionCallSpec,
}

/// A function call: its name and its arguments as a JSON string.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct FunctionCallSpec {
    /// The tool.
    pub name: String,
    /// JSON text of the arguments object.
    pub arguments: String,
}

/// A tool definition.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ToolSpec {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: ToolKind,
    /// The function.
    pub function: FunctionSpec,
}

/// A function's name, description and parameter schema.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct FunctionSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments object (default: any object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// `{"name": …}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct NamedFunction {
    /// A tool name, or `prefix*`.
    pub name: String,
}

/// A restricted tool set.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct AllowedTools {
    /// `auto` or `required`.
    pub mode: ToolChoiceMode,
    /// The tools allowed.
    pub tools: Vec<AllowedToolSpec>,
}

/// One allowed tool: a bare name, `{"type": "function", "function": {"name": …}}`
/// (Chat Completions) or `{"type": "function", "name": …}` (the Responses API, SMG).
#[derive(Debug, Clone, Deserialize, Serialize)]
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
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum StopSpec {
    /// One stop string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct StreamOptions {
    /// Send a last chunk with the usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
}

/// `response_format`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ResponseFormat {
    /// `text`, `json_object` or `json_schema`.
    #[serde(rename = "type")]
    pub kind: ResponseFormatKind,
    /// For `json_schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_schema: Option<JsonSchemaFormat>,
}

/// `response_format.json_schema`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct JsonSchemaFormat {
    /// A name for the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The schema (an object schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CompletionRequest {
    /// Echoed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The prompt text (a string, or a list holding one string).
    pub prompt: PromptSpec,
    /// Most tokens to generate (default 16, as OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Sampling temperature, 0 to 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Stop strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopSpec>,
    /// Stream server-sent events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Streaming options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Session hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Only 1 is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// Only false is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo: Option<bool>,
    /// Not supported (only absent or 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<u32>,
    /// Not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// Only 1 is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_of: Option<u32>,
    /// Only 0 is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f32>,
    /// Only 0 is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
}

/// `prompt`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum PromptSpec {
    /// One prompt.
    One(String),
    /// A batch (only one prompt is supported).
    Many(Vec<String>),
}

impl ChatCompletionRequest {
    /// A request for `messages`, every other field unset.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }
}

impl Message {
    fn text(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(Content::Text(text.into())),
            tool_calls: None,
            tool_call_id: None,
        }
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::text(Role::System, text)
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::text(Role::User, text)
    }

    /// An assistant's reply of text only.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::text(Role::Assistant, text)
    }

    /// An assistant's calls, after its text (none when empty).
    pub fn assistant_calls(text: &str, calls: Vec<ToolCallSpec>) -> Self {
        Self {
            content: (!text.is_empty()).then(|| Content::Text(text.to_string())),
            tool_calls: Some(calls),
            ..Self::text(Role::Assistant, "")
        }
    }

    /// The result of call `call_id`.
    pub fn tool(call_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            ..Self::text(Role::Tool, text)
        }
    }
}

impl ToolCallSpec {
    /// A call of `name` with `arguments` (JSON text), as the model made it.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            id: Some(id.into()),
            kind: Some(ToolKind::Function),
            function: FunctionCallSpec {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }
}

impl ToolSpec {
    /// A function tool.
    pub fn function(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            kind: ToolKind::Function,
            function: FunctionSpec {
                name: name.into(),
                description: Some(description.into()),
                parameters: Some(parameters),
            },
        }
    }
}

impl ResponseFormat {
    /// Answers must be one JSON value of `schema`.
    pub fn json_schema(name: impl Into<String>, schema: Value) -> Self {
        Self {
            kind: ResponseFormatKind::JsonSchema,
            json_schema: Some(JsonSchemaFormat {
                name: Some(name.into()),
                schema: Some(schema),
            }),
        }
    }
}

impl ToolChoiceSpec {
    /// `none`, `auto` or `required`.
    pub fn mode(mode: ToolChoiceMode) -> Self {
        Self::Mode(mode)
    }

    /// A call of `name` (or of a `prefix*` family) is required.
    pub fn named(name: impl Into<String>) -> Self {
        Self::Object(super::words::ToolChoiceObject {
            kind: super::words::ToolChoiceKind::Function,
            function: Some(NamedFunction { name: name.into() }),
            name: None,
            allowed_tools: None,
            mode: None,
            tools: None,
        })
    }

    /// `mode` (`auto` or `required`) over the tools `names` (names or families).
    pub fn allowed(mode: ToolChoiceMode, names: impl IntoIterator<Item = String>) -> Self {
        let tools = names
            .into_iter()
            .map(|name| AllowedToolSpec::Function {
                function: NamedFunction { name },
            })
            .collect();
        Self::Object(super::words::ToolChoiceObject {
            kind: super::words::ToolChoiceKind::AllowedTools,
            function: None,
            name: None,
            allowed_tools: Some(AllowedTools { mode, tools }),
            mode: None,
            tools: None,
        })
    }
}
