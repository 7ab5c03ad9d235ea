//! A Chat Completions request parsed into the core's [`ChatRequest`]: roles,
//! contents and earlier calls into core messages, tools into definitions,
//! every form of `tool_choice` a client or a gateway sends into a [`Choice`]:
//! - a mode: `none`, `auto`, `required`;
//! - one function: `{"type": "function", "function": {"name": N}}`;
//! - an allowed set, nested as Chat Completions writes it
//!   (`{"type": "allowed_tools", "allowed_tools": {"mode": M, "tools": [...]}}`) or flat as the
//!   Responses API and SMG write it (`{"type": "allowed_tools", "mode": M, "tools": [...]}`),
//!   each tool a bare name, `{"type": "function", "function": {"name": N}}` or
//!   `{"type": "function", "name": N}`; a name ending in `*` is a family (`browser_*`).
//!
//! `x_tessera_tool_choice`, when sent, replaces `tool_choice`: a gateway that
//! refuses families or unknown forms in `tool_choice` (SMG checks every name
//! against `tools`) forwards an unknown top-level field unchanged.

use super::wire::{AllowedToolSpec, ChatCompletionRequest, Message, ResponseFormat, StopSpec, ToolSpec};
use super::words::{
    Content, ResponseFormatKind, Role, ToolChoiceKind, ToolChoiceMode, ToolChoiceObject, ToolChoiceSpec, ToolKind,
};
use crate::core::request::{self as core, Choice, PastArguments, PastCall, Sampling};
use crate::RequestError;
use serde_json::{json, Value};
use tessera_constrain::{AllowedTool, CallMode, ToolDef};

/// The extension field that carries a choice past a gateway.
pub const EXTENSION_FIELD: &str = "x_tessera_tool_choice";

/// How a chat request wants its answer.
#[derive(Debug, Clone, Copy)]
pub struct Streaming {
    /// As server-sent events.
    pub stream: bool,
    /// With a last usage chunk.
    pub include_usage: bool,
}

/// `body` as the core's request; `session` is the `X-Session-Id` header, if sent.
pub fn chat_request(
    body: ChatCompletionRequest,
    session: Option<String>,
) -> Result<(core::ChatRequest, Streaming), RequestError> {
    unsupported(&body)?;
    let messages = body
        .messages
        .iter()
        .enumerate()
        .map(|(i, message)| core_message(i, message))
        .collect();
    let choice = match &body.x_tessera_tool_choice {
        Some(spec) => Some(parse_choice(spec, EXTENSION_FIELD)?),
        None => body
            .tool_choice
            .as_ref()
            .map(|spec| parse_choice(spec, "tool_choice"))
            .transpose()?,
    };
    let streaming = Streaming {
        stream: body.stream.unwrap_or(false),
        include_usage: body
            .stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false),
    };
    let request = core::ChatRequest {
        tools: tool_defs(body.tools.as_deref().unwrap_or_default()),
        tool_choice: choice,
        parallel_tool_calls: body.parallel_tool_calls,
        json_format: json_format(body.response_format.as_ref())?,
        sampling: Sampling {
            temperature: body.temperature,
            top_p: body.top_p,
            seed: body.seed,
            ..Sampling::default()
        },
        max_tokens: body.max_completion_tokens.or(body.max_tokens),
        stop: stop_strings(body.stop),
        session: session.or(body.user),
        model: body.model,
        ..core::ChatRequest::new(messages)
    };
    Ok((request, streaming))
}

/// Parameters Tessera does not implement are refused, not silently ignored.
fn unsupported(body: &ChatCompletionRequest) -> Result<(), RequestError> {
    if body.n.is_some_and(|n| n != 1) {
        return Err(RequestError::invalid("n", "only n = 1 is supported"));
    }
    for (param, value) in [
        ("presence_penalty", body.presence_penalty),
        ("frequency_penalty", body.frequency_penalty),
    ] {
        if value.is_some_and(|v| v != 0.0) {
            return Err(RequestError::invalid(
                param,
                format!("{param} is not supported (only 0)"),
            ));
        }
    }
    if body.logprobs == Some(true) {
        return Err(RequestError::invalid("logprobs", "logprobs are not supported"));
    }
    Ok(())
}

fn core_message(i: usize, message: &Message) -> core::Message {
    let text = content_text(message.content.as_ref());
    match message.role {
        Role::System | Role::Developer => core::Message::System(text),
        Role::User => core::Message::User(text),
        Role::Tool => core::Message::Tool {
            text,
            call_id: message.tool_call_id.clone(),
            field: format!("messages[{i}].tool_call_id"),
        },
        Role::Assistant => {
            let calls = message.tool_calls.as_deref().unwrap_or_default();
            let calls = calls
                .iter()
                .enumerate()
                .map(|(j, call)| PastCall {
                    id: call.id.clone(),
                    name: call.function.name.clone(),
                    arguments: PastArguments::Text(call.function.arguments.clone()),
                    field: format!("messages[{i}].tool_calls[{j}].function.arguments"),
                })
                .collect();
            core::Message::Assistant { text, calls }
        }
    }
}

/// A message's text: a string, or its text parts joined.
fn content_text(content: Option<&Content>) -> String {
    match content {
        None => String::new(),
        Some(Content::Text(text)) => text.clone(),
        Some(Content::List(parts)) => parts.iter().map(|part| part.text.as_str()).collect(),
    }
}

/// The tool definitions of a request (names and schemas are checked when the set compiles).
pub fn tool_defs(tools: &[ToolSpec]) -> Vec<ToolDef> {
    tools
        .iter()
        .map(|tool| {
            let ToolKind::Function = tool.kind;
            ToolDef {
                name: tool.function.name.clone(),
                description: tool.function.description.clone().unwrap_or_default(),
                parameters: parameters_or_any(tool.function.parameters.clone()),
            }
        })
        .collect()
}

/// A tool's parameter schema; without one, any object.
pub(crate) fn parameters_or_any(parameters: Option<Value>) -> Value {
    parameters.unwrap_or_else(|| json!({"type": "object", "properties": {}}))
}

/// `json_object` = any object; `json_schema` = its schema.
fn json_format(format: Option<&ResponseFormat>) -> Result<Option<Value>, RequestError> {
    let Some(format) = format else {
        return Ok(None);
    };
    match format.kind {
        ResponseFormatKind::Text => Ok(None),
        ResponseFormatKind::JsonObject => Ok(Some(json!({"type": "object"}))),
        ResponseFormatKind::JsonSchema => format
            .json_schema
            .as_ref()
            .and_then(|s| s.schema.clone())
            .map(Some)
            .ok_or_else(|| {
                RequestError::invalid(
                    "response_format.json_schema.schema",
                    "a json_schema format needs `schema`",
                )
            }),
    }
}

pub(crate) fn stop_strings(stop: Option<StopSpec>) -> Vec<String> {
    match stop {
        None => Vec::new(),
        Some(StopSpec::One(one)) => vec![one],
        Some(StopSpec::Many(many)) => many,
    }
}

/// `spec`, sent in the request field `field` (named in errors).
pub fn parse_choice(spec: &ToolChoiceSpec, field: &'static str) -> Result<Choice, RequestError> {
    match spec {
        ToolChoiceSpec::Mode(mode) => Ok(Choice::mode(call_mode(*mode), field)),
        ToolChoiceSpec::Object(object) => parse_object(object, field),
    }
}

pub(crate) fn call_mode(mode: ToolChoiceMode) -> CallMode {
    match mode {
        ToolChoiceMode::None => CallMode::None,
        ToolChoiceMode::Auto => CallMode::Auto,
        ToolChoiceMode::Required => CallMode::Required,
    }
}

fn parse_object(object: &ToolChoiceObject, field: &'static str) -> Result<Choice, RequestError> {
    match object.kind {
        ToolChoiceKind::Function => {
            let name = match (&object.function, &object.name) {
                (Some(function), _) => &function.name,
                (None, Some(name)) => name,
                (None, None) => {
                    return Err(RequestError::invalid(
                        format!("{field}.function"),
                        "a named choice needs `function.name` (or, flat, `name`)",
                    ))
                }
            };
            Ok(Choice::named(name, field))
        }
        ToolChoiceKind::AllowedTools => match (&object.allowed_tools, object.mode, &object.tools) {
            (Some(nested), _, _) => allowed_set(nested.mode, &nested.tools, field, &format!("{field}.allowed_tools")),
            (None, Some(mode), Some(tools)) => allowed_set(mode, tools, field, field),
            (None, _, _) => Err(RequestError::invalid(
                field,
                "an allowed_tools choice needs `allowed_tools` (or, flat, `mode` and `tools`)",
            )),
        },
    }
}

/// An allowed set: `mode` and `tools` sit under `path`.
pub(crate) fn allowed_set(
    mode: ToolChoiceMode,
    tools: &[AllowedToolSpec],
    field: &'static str,
    path: &str,
) -> Result<Choice, RequestError> {
    if mode == ToolChoiceMode::None {
        return Err(RequestError::invalid(
            format!("{path}.mode"),
            "must be auto or required",
        ));
    }
    let names = tools
        .iter()
        .map(|tool| match tool {
            AllowedToolSpec::Name(name) | AllowedToolSpec::Flat { name } => AllowedTool::parse(name),
            AllowedToolSpec::Function { function } => AllowedTool::parse(&function.name),
        })
        .collect();
    Ok(Choice::allowed(call_mode(mode), Some(names), field))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(value: Value) -> Result<Choice, RequestError> {
        parse_choice(&serde_json::from_value(value).unwrap(), "tool_choice")
    }

    fn names(choice: &Choice) -> Vec<String> {
        choice
            .choice
            .allowed
            .iter()
            .flatten()
            .map(|tool| format!("{tool:?}"))
            .collect()
    }

    #[test]
    fn nested_and_flat_allowed_sets_are_the_same_choice() {
        let nested = choice(json!({"type": "allowed_tools", "allowed_tools": {"mode": "required",
            "tools": ["fs_read", {"type": "function", "function": {"name": "browser_*"}}]}}))
        .unwrap();
        let flat = choice(json!({"type": "allowed_tools", "mode": "required",
            "tools": [{"type": "function", "name": "fs_read"}, {"type": "function", "name": "browser_*"}]}))
        .unwrap();
        assert_eq!(nested.choice.mode, CallMode::Required);
        assert_eq!(flat.choice.mode, CallMode::Required);
        assert_eq!(names(&nested), names(&flat));
        assert_eq!(names(&flat).len(), 2);
    }

    #[test]
    fn a_flat_set_without_its_fields_names_them() {
        let Err(RequestError::Invalid(invalid)) = choice(json!({"type": "allowed_tools", "mode": "auto"})) else {
            panic!("a flat set needs tools");
        };
        assert_eq!(invalid.param, "tool_choice");
        assert!(invalid.message.contains("`mode` and `tools`"), "{}", invalid.message);
        let Err(RequestError::Invalid(invalid)) =
            choice(json!({"type": "allowed_tools", "mode": "none", "tools": ["a"]}))
        else {
            panic!("mode none is refused");
        };
        assert_eq!(invalid.param, "tool_choice.mode");
    }

    #[test]
    fn the_constructors_serialize_to_what_the_parser_reads() {
        let spec = ToolChoiceSpec::allowed(ToolChoiceMode::Required, ["file_*".to_string()]);
        let parsed = choice(serde_json::to_value(&spec).unwrap()).unwrap();
        assert_eq!(names(&parsed), ["Family(\"file_\")"]);
        let named = choice(serde_json::to_value(ToolChoiceSpec::named("finish")).unwrap()).unwrap();
        assert_eq!(names(&named), ["Name(\"finish\")"]);
    }
}
