//! A Responses request parsed into the core's [`ChatRequest`]:
//! - `instructions` become the system message (not carried over by
//!   `previous_response_id`, as OpenAI does);
//! - `previous_response_id` puts the stored response's conversation (its
//!   input and its output, as generated) ahead of the new input;
//! - message items become messages; `function_call` items join the
//!   assistant message before them (or make one), so an answer of text and
//!   calls renders back exactly as it was generated; `function_call_output`
//!   items become tool messages;
//! - function tools become definitions; `tool_choice` is read by the same
//!   parser as the chat route's (the flat `{"type": "function", "name"}` and
//!   `allowed_tools` forms, families included).
//!
//! Refused with the field at fault: images and files, reasoning items and
//! item references, tools other than functions, reasoning effort, background runs.

use super::store::Stored;
use super::wire::{
    FormatKind, Input, InputItem, ItemKind, ItemRole, PartKind, Parts, ResponsesRequest, TextConfig, TextFormat, Tool,
};
use crate::core::request::{self as core, PastArguments, PastCall, Sampling};
use crate::openai::convert::{parameters_or_any, parse_choice, EXTENSION_FIELD};
use crate::openai::{ToolChoiceMode, ToolChoiceSpec};
use crate::{Api, RequestError};
use serde_json::json;
use std::sync::Arc;
use tessera_constrain::ToolDef;

/// What answering a Responses request needs besides the core request.
#[derive(Debug, Clone)]
pub struct Continuation {
    /// Answer with server-sent events.
    pub stream: bool,
    /// Keep the response for a later `previous_response_id`.
    pub store: bool,
    /// The stored response this one continues.
    pub previous: Option<Arc<Stored>>,
    /// This request's input (the instructions are not part of it).
    pub input: Vec<core::Message>,
    /// The request's settings, echoed in the response.
    pub echo: Echo,
}

/// The request's settings a response repeats.
#[derive(Debug, Clone)]
pub struct Echo {
    /// `instructions`.
    pub instructions: Option<String>,
    /// `max_output_tokens`.
    pub max_output_tokens: Option<u64>,
    /// `parallel_tool_calls` (default true).
    pub parallel_tool_calls: bool,
    /// `previous_response_id`.
    pub previous_response_id: Option<String>,
    /// `temperature` (default 1).
    pub temperature: f32,
    /// `top_p` (default 1).
    pub top_p: f32,
    /// `tool_choice` (default `auto`).
    pub tool_choice: ToolChoiceSpec,
    /// `tools`.
    pub tools: Vec<Tool>,
    /// `text`.
    pub text: TextConfig,
    /// `metadata`.
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// `body` as the core's request; `session` is the `X-Session-Id` header, if sent.
pub fn responses_request(
    api: &Api,
    body: ResponsesRequest,
    session: Option<String>,
) -> Result<(core::ChatRequest, Continuation), RequestError> {
    unsupported(&body)?;
    let previous = match &body.previous_response_id {
        None => None,
        Some(id) => Some(api.responses.get(id).ok_or_else(|| {
            RequestError::invalid(
                "previous_response_id",
                format!(
                    "no stored response `{id}`: it is unknown, was not stored, or was evicted (the server keeps the last {})",
                    api.config.stored_responses
                ),
            )
        })?),
    };
    let mut input = Vec::new();
    match &body.input {
        Input::Text(text) => input.push(core::Message::User(text.clone())),
        Input::List(items) => {
            for (i, item) in items.iter().enumerate() {
                input_item(i, item, &mut input)?;
            }
        }
    }
    let mut messages = Vec::with_capacity(input.len() + 1);
    messages.extend(body.instructions.clone().map(core::Message::System));
    messages.extend(previous.iter().flat_map(|stored| stored.conversation()));
    messages.extend(input.iter().cloned());
    let choice = match (&body.x_tessera_tool_choice, &body.tool_choice) {
        (Some(spec), _) => Some(parse_choice(spec, EXTENSION_FIELD)?),
        (None, Some(spec)) => Some(parse_choice(spec, "tool_choice")?),
        (None, None) => None,
    };
    let tools = body.tools.clone().unwrap_or_default();
    let request = core::ChatRequest {
        tools: tool_defs(&tools)?,
        tool_choice: choice,
        parallel_tool_calls: match body.max_tool_calls {
            Some(_) => Some(false),
            None => body.parallel_tool_calls,
        },
        json_format: json_format(body.text.as_ref())?,
        sampling: Sampling {
            temperature: body.temperature,
            top_p: body.top_p,
            ..Sampling::default()
        },
        max_tokens: body.max_output_tokens,
        session: session.or(body.prompt_cache_key.clone()).or(body.user.clone()),
        model: body.model.clone(),
        ..core::ChatRequest::new(messages)
    };
    let continuation = Continuation {
        stream: body.stream.unwrap_or(false),
        store: body.store.unwrap_or(true),
        previous,
        input,
        echo: Echo {
            instructions: body.instructions,
            max_output_tokens: body.max_output_tokens,
            parallel_tool_calls: body.parallel_tool_calls.unwrap_or(true) && body.max_tool_calls.is_none(),
            previous_response_id: body.previous_response_id,
            temperature: body.temperature.unwrap_or(1.0),
            top_p: body.top_p.unwrap_or(1.0),
            tool_choice: body.tool_choice.unwrap_or(ToolChoiceSpec::Mode(ToolChoiceMode::Auto)),
            tools,
            metadata: body.metadata.unwrap_or_default(),
            text: body.text.unwrap_or(TextConfig {
                format: Some(TextFormat {
                    kind: FormatKind::Text,
                    name: None,
                    schema: None,
                    strict: None,
                }),
            }),
        },
    };
    Ok((request, continuation))
}

fn unsupported(body: &ResponsesRequest) -> Result<(), RequestError> {
    if body.background == Some(true) {
        return Err(RequestError::invalid(
            "background",
            "background responses are not supported",
        ));
    }
    let effort = body.reasoning.as_ref().and_then(|r| r.effort.as_deref());
    if let Some(effort) = effort.filter(|e| !matches!(*e, "none" | "minimal")) {
        return Err(RequestError::invalid(
            "reasoning.effort",
            format!("reasoning effort `{effort}` is not supported: the models served here do not reason in items (send none)"),
        ));
    }
    Ok(())
}

/// Item `i` appended to the conversation.
fn input_item(i: usize, item: &InputItem, out: &mut Vec<core::Message>) -> Result<(), RequestError> {
    let field = |name: &str| format!("input[{i}].{name}");
    let need = |value: Option<&String>, name: &str| {
        value
            .cloned()
            .ok_or_else(|| RequestError::invalid(field(name), format!("this item needs `{name}`")))
    };
    match item.kind.unwrap_or(ItemKind::Message) {
        ItemKind::Message => {
            let role = item
                .role
                .ok_or_else(|| RequestError::invalid(field("role"), "a message item needs `role`"))?;
            let text = parts_text(item.content.as_ref(), &field("content"))?;
            out.push(match role {
                ItemRole::User => core::Message::User(text),
                ItemRole::System | ItemRole::Developer => core::Message::System(text),
                ItemRole::Assistant => core::Message::Assistant {
                    text,
                    calls: Vec::new(),
                },
            });
        }
        ItemKind::FunctionCall => {
            let call = PastCall {
                id: item.call_id.clone(),
                name: need(item.name.as_ref(), "name")?,
                arguments: PastArguments::Text(need(item.arguments.as_ref(), "arguments")?),
                field: field("arguments"),
            };
            match out.last_mut() {
                Some(core::Message::Assistant { calls, .. }) => calls.push(call),
                _ => out.push(core::Message::Assistant {
                    text: String::new(),
                    calls: vec![call],
                }),
            }
        }
        ItemKind::FunctionCallOutput => {
            let text = parts_text(item.output.as_ref(), &field("output"))?;
            out.push(core::Message::Tool {
                text,
                call_id: item.call_id.clone(),
                field: field("call_id"),
            });
        }
        ItemKind::Reasoning => {
            return Err(RequestError::invalid(
                field("type"),
                "reasoning items are not supported: the models served here do not reason in items",
            ))
        }
        ItemKind::ItemReference => {
            return Err(RequestError::invalid(
                field("type"),
                "item references are not supported: send the item itself",
            ))
        }
    }
    Ok(())
}

/// A content's text: a string, or its text parts joined.
fn parts_text(parts: Option<&Parts>, field: &str) -> Result<String, RequestError> {
    match parts {
        None => Err(RequestError::invalid(
            field,
            format!("this item needs `{}`", field.rsplit('.').next().unwrap_or(field)),
        )),
        Some(Parts::Text(text)) => Ok(text.clone()),
        Some(Parts::List(list)) => {
            let mut text = String::new();
            for (k, part) in list.iter().enumerate() {
                match part.kind {
                    PartKind::InputText | PartKind::OutputText => {
                        text.push_str(part.text.as_deref().unwrap_or_default())
                    }
                    PartKind::Refusal => text.push_str(part.refusal.as_deref().unwrap_or_default()),
                    PartKind::InputImage | PartKind::InputFile => {
                        return Err(RequestError::invalid(
                            format!("{field}[{k}].type"),
                            "images and files are not supported: the models served here read text only",
                        ))
                    }
                }
            }
            Ok(text)
        }
    }
}

/// Function tools; other types (`web_search`, `file_search`, `custom`, …) are refused.
fn tool_defs(tools: &[Tool]) -> Result<Vec<ToolDef>, RequestError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            if tool.kind != "function" {
                return Err(RequestError::invalid(
                    format!("tools[{i}].type"),
                    format!("`{}` tools are not supported: only `function` tools are", tool.kind),
                ));
            }
            let name = tool
                .name
                .clone()
                .ok_or_else(|| RequestError::invalid(format!("tools[{i}].name"), "a function tool needs `name`"))?;
            Ok(ToolDef {
                name,
                description: tool.description.clone().unwrap_or_default(),
                parameters: parameters_or_any(tool.parameters.clone()),
            })
        })
        .collect()
}

fn json_format(text: Option<&TextConfig>) -> Result<Option<serde_json::Value>, RequestError> {
    let Some(format) = text.and_then(|text| text.format.as_ref()) else {
        return Ok(None);
    };
    match format.kind {
        FormatKind::Text => Ok(None),
        FormatKind::JsonObject => Ok(Some(json!({"type": "object"}))),
        FormatKind::JsonSchema => format
            .schema
            .clone()
            .map(Some)
            .ok_or_else(|| RequestError::invalid("text.format.schema", "a json_schema format needs `schema`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_calls_join_the_assistant_message_before_them() {
        let mut out = Vec::new();
        let items: Vec<InputItem> = serde_json::from_value(json!([
            {"role": "user", "content": "go"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]},
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{\"p\": 1}"},
            {"type": "function_call", "call_id": "c2", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "one"},
            {"type": "function_call", "call_id": "c3", "name": "write", "arguments": "{}"},
        ]))
        .unwrap();
        for (i, item) in items.iter().enumerate() {
            input_item(i, item, &mut out).unwrap();
        }
        let calls = |message: &core::Message| match message {
            core::Message::Assistant { text, calls } => (text.clone(), calls.len()),
            other => panic!("not an assistant message: {other:?}"),
        };
        assert_eq!(out.len(), 4);
        assert_eq!(calls(&out[1]), ("Reading.".to_string(), 2));
        assert!(matches!(&out[2], core::Message::Tool { text, .. } if text == "one"));
        assert_eq!(calls(&out[3]), (String::new(), 1));
    }

    #[test]
    fn unsupported_items_and_parts_are_refused_by_name() {
        let refused = |item: serde_json::Value| {
            let item: InputItem = serde_json::from_value(item).unwrap();
            match input_item(3, &item, &mut Vec::new()) {
                Err(RequestError::Invalid(invalid)) => invalid.param,
                other => panic!("expected a 400, got {other:?}"),
            }
        };
        assert_eq!(refused(json!({"type": "reasoning", "summary": []})), "input[3].type");
        assert_eq!(
            refused(json!({"role": "user", "content": [{"type": "input_image", "image_url": "x"}]})),
            "input[3].content[0].type"
        );
        assert_eq!(
            refused(json!({"type": "function_call", "name": "f"})),
            "input[3].arguments"
        );
        assert_eq!(refused(json!({"content": "x"})), "input[3].role");
    }
}
