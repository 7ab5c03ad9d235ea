//! A Messages request parsed into the core's [`ChatRequest`]:
//! - `system` (a string or text blocks) becomes the system message;
//! - a user turn's `tool_result` blocks become tool messages, in order, and
//!   its text blocks a user message; `is_error` marks a result as an error;
//! - an assistant turn's text blocks become its text and its `tool_use`
//!   blocks its calls, whose `input` objects are spelled as the model
//!   generated them (the core's argument memory), so the next turn replays
//!   the model's own tokens;
//! - `tool_choice` `auto` / `any` / `tool` / `none` becomes a [`Choice`]
//!   (`disable_parallel_tool_use`: one call at most); a `tool` name ending in
//!   `*` is a family, and `x_tessera_tool_choice` (OpenAI's forms) replaces it.
//!
//! What the models here cannot do is refused with the field at fault:
//! images and documents, extended thinking (`adaptive` is accepted: the
//! model decides, and these never think), context edits other than
//! clearing thinking, Anthropic's server tools, a trailing assistant turn
//! (prefill). `output_config.format` is a JSON response format;
//! `output_config.effort` is a hint. A `max_tokens` over what is left of the
//! context is cut to fit, and an answer that reaches the window stops with
//! `model_context_window_exceeded`, as Anthropic's API does.

use super::wire::{
    Blocks, ContentBlock, InputMessage, MessagesRequest, ResultBlock, Role, TextBlock, Tool, ToolChoice,
};
use crate::core::request::{self as core, Choice, PastArguments, PastCall, Sampling};
use crate::openai::convert::{parameters_or_any, parse_choice, EXTENSION_FIELD};
use crate::RequestError;
use tessera_constrain::{CallMode, ToolDef};

/// How blocks of several texts are joined.
const BLOCK_JOIN: &str = "\n\n";

/// `body` as the core's request, and whether to stream; `session` is the
/// `X-Session-Id` header, if sent. `count_only`: for `count_tokens`, which
/// takes no `max_tokens`.
pub fn messages_request(
    body: MessagesRequest,
    session: Option<String>,
    count_only: bool,
) -> Result<(core::ChatRequest, bool), RequestError> {
    if body.max_tokens.is_none() && !count_only {
        return Err(RequestError::invalid("max_tokens", "max_tokens is required"));
    }
    unsupported(&body)?;
    if body.messages.last().is_some_and(|m| m.role == Role::Assistant) {
        return Err(RequestError::invalid(
            format!("messages[{}]", body.messages.len() - 1),
            "a last assistant turn (prefill) is not supported: end with a user turn",
        ));
    }
    let mut messages = Vec::with_capacity(body.messages.len() + 1);
    if let Some(system) = &body.system {
        messages.push(core::Message::System(system_text(system)));
    }
    for (i, message) in body.messages.iter().enumerate() {
        turn(i, message, &mut messages)?;
    }
    // The extension replaces the choice; `disable_parallel_tool_use` still holds.
    let (choice, parallel) = match &body.tool_choice {
        Some(choice) => tool_choice(choice),
        None => (None, None),
    };
    let choice = match &body.x_tessera_tool_choice {
        Some(spec) => Some(parse_choice(spec, EXTENSION_FIELD)?),
        None => choice,
    };
    let stream = body.stream.unwrap_or(false);
    let json_format = body
        .output_config
        .and_then(|config| config.format)
        .map(|format| format.schema);
    let request = core::ChatRequest {
        tools: tool_defs(body.tools.as_deref().unwrap_or_default())?,
        json_format,
        // Anthropic takes a max_tokens over what is left of the context and stops at the window.
        fit_to_context: true,
        tool_choice: choice,
        parallel_tool_calls: parallel,
        sampling: Sampling {
            temperature: body.temperature,
            top_p: body.top_p,
            top_k: body.top_k,
            ..Sampling::default()
        },
        max_tokens: body.max_tokens,
        stop: body.stop_sequences.unwrap_or_default(),
        session: session.or_else(|| body.metadata.and_then(|m| m.user_id)),
        model: body.model,
        ..core::ChatRequest::new(messages)
    };
    Ok((request, stream))
}

/// Extended thinking and server-side context edits other than clearing
/// thinking blocks are refused: the models here never think in blocks, and
/// the prompt is always the conversation as sent.
fn unsupported(body: &MessagesRequest) -> Result<(), RequestError> {
    if let Some(thinking) = body
        .thinking
        .as_ref()
        .filter(|t| !matches!(t.kind.as_str(), "disabled" | "adaptive"))
    {
        return Err(RequestError::invalid(
            "thinking",
            format!(
                "extended thinking (`{}`) is not supported: the models served here do not think in blocks (send `disabled` or `adaptive`)",
                thinking.kind
            ),
        ));
    }
    let edits = body.context_management.iter().flat_map(|c| c.edits.iter());
    if let Some((i, edit)) = edits
        .enumerate()
        .find(|(_, edit)| !edit.kind.starts_with("clear_thinking"))
    {
        return Err(RequestError::invalid(
            format!("context_management.edits[{i}].type"),
            format!(
                "context edit `{}` is not supported: the prompt is the conversation as sent",
                edit.kind
            ),
        ));
    }
    Ok(())
}

fn system_text(system: &Blocks<TextBlock>) -> String {
    match system {
        Blocks::Text(text) => text.clone(),
        Blocks::List(blocks) => join(blocks.iter().map(|block| block.text.as_str())),
    }
}

fn join<'a>(texts: impl Iterator<Item = &'a str>) -> String {
    texts.collect::<Vec<_>>().join(BLOCK_JOIN)
}

/// Turn `i` as core messages, appended to `out`.
fn turn(i: usize, message: &InputMessage, out: &mut Vec<core::Message>) -> Result<(), RequestError> {
    let blocks = match &message.content {
        Blocks::Text(text) => {
            out.push(match message.role {
                Role::User => core::Message::User(text.clone()),
                Role::System => core::Message::System(text.clone()),
                Role::Assistant => core::Message::Assistant {
                    text: text.clone(),
                    calls: Vec::new(),
                },
            });
            return Ok(());
        }
        Blocks::List(blocks) => blocks,
    };
    match message.role {
        Role::User => user_turn(i, blocks, out),
        Role::System => {
            out.push(core::Message::System(system_blocks(i, blocks)?));
            Ok(())
        }
        Role::Assistant => {
            out.push(assistant_turn(i, blocks)?);
            Ok(())
        }
    }
}

/// A call id in the core's form: this server names Anthropic's calls
/// `toolu_…` for the core's `call_…` (the argument memory's key).
fn core_call_id(id: &str) -> String {
    match id.strip_prefix("toolu_") {
        Some(rest) => format!("call_{rest}"),
        None => id.to_string(),
    }
}

/// A system turn's blocks: text only.
fn system_blocks(i: usize, blocks: &[ContentBlock]) -> Result<String, RequestError> {
    let mut texts = Vec::with_capacity(blocks.len());
    for (j, block) in blocks.iter().enumerate() {
        match block {
            ContentBlock::Text { text } => texts.push(text.as_str()),
            _ => {
                return Err(RequestError::invalid(
                    format!("messages[{i}].content[{j}]"),
                    "a system turn holds text blocks only",
                ))
            }
        }
    }
    Ok(join(texts.into_iter()))
}

/// Tool results and text, in order: consecutive texts make one user message.
fn user_turn(i: usize, blocks: &[ContentBlock], out: &mut Vec<core::Message>) -> Result<(), RequestError> {
    let mut texts: Vec<&str> = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let field = || format!("messages[{i}].content[{j}]");
        match block {
            ContentBlock::Text { text } => texts.push(text),
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                flush_user_text(&mut texts, out);
                let text = result_text(content.as_ref(), &field())?;
                let text = match is_error {
                    Some(true) => format!("Error: {text}"),
                    _ => text,
                };
                out.push(core::Message::Tool {
                    text,
                    call_id: Some(core_call_id(tool_use_id)),
                    field: format!("{}.tool_use_id", field()),
                });
            }
            ContentBlock::ToolUse { .. } => {
                return Err(RequestError::invalid(
                    field(),
                    "a tool_use block belongs in an assistant turn",
                ))
            }
            other => return Err(unreadable(other, field())),
        }
    }
    flush_user_text(&mut texts, out);
    Ok(())
}

fn flush_user_text(texts: &mut Vec<&str>, out: &mut Vec<core::Message>) {
    if !texts.is_empty() {
        out.push(core::Message::User(join(texts.drain(..))));
    }
}

/// Text blocks, then calls.
fn assistant_turn(i: usize, blocks: &[ContentBlock]) -> Result<core::Message, RequestError> {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let field = || format!("messages[{i}].content[{j}]");
        match block {
            ContentBlock::Text { text } => texts.push(text.as_str()),
            ContentBlock::ToolUse { id, name, input } => calls.push(PastCall {
                id: Some(core_call_id(id)),
                name: name.clone(),
                arguments: PastArguments::Object(input.clone()),
                field: format!("{}.input", field()),
            }),
            ContentBlock::ToolResult { .. } => {
                return Err(RequestError::invalid(
                    field(),
                    "a tool_result block belongs in a user turn",
                ))
            }
            other => return Err(unreadable(other, field())),
        }
    }
    Ok(core::Message::Assistant {
        text: join(texts.into_iter()),
        calls,
    })
}

fn result_text(content: Option<&Blocks<ResultBlock>>, field: &str) -> Result<String, RequestError> {
    Ok(match content {
        None => String::new(),
        Some(Blocks::Text(text)) => text.clone(),
        Some(Blocks::List(blocks)) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (k, block) in blocks.iter().enumerate() {
                match block {
                    ResultBlock::Text { text } => texts.push(text.as_str()),
                    ResultBlock::Image {} | ResultBlock::Document {} => {
                        return Err(RequestError::invalid(
                            format!("{field}.content[{k}]"),
                            "images and documents are not supported: the models served here read text only",
                        ))
                    }
                }
            }
            join(texts.into_iter())
        }
    })
}

/// The refusal of a block the model cannot read.
fn unreadable(block: &ContentBlock, field: String) -> RequestError {
    let what = match block {
        ContentBlock::Thinking {} | ContentBlock::RedactedThinking {} => {
            "thinking blocks are not supported: the models served here do not think in blocks"
        }
        _ => "images and documents are not supported: the models served here read text only",
    };
    RequestError::invalid(field, what)
}

/// Client tools; Anthropic's server tools (`bash_20250124`, `web_search_…`) are refused.
fn tool_defs(tools: &[Tool]) -> Result<Vec<ToolDef>, RequestError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| match tool.kind.as_deref() {
            None | Some("custom") => Ok(ToolDef {
                name: tool.name.clone(),
                description: tool.description.clone().unwrap_or_default(),
                parameters: parameters_or_any(tool.input_schema.clone()),
            }),
            Some(kind) => Err(RequestError::invalid(
                format!("tools[{i}].type"),
                format!("server tool `{kind}` is not supported: define it as a client tool with `input_schema`"),
            )),
        })
        .collect()
}

/// The choice, and whether parallel calls are allowed (when it says).
fn tool_choice(choice: &ToolChoice) -> (Option<Choice>, Option<bool>) {
    let field = "tool_choice";
    let single = |disable: &Option<bool>| disable.map(|disable| !disable);
    match choice {
        ToolChoice::Auto {
            disable_parallel_tool_use,
        } => (
            Some(Choice::mode(CallMode::Auto, field)),
            single(disable_parallel_tool_use),
        ),
        ToolChoice::Any {
            disable_parallel_tool_use,
        } => (
            Some(Choice::mode(CallMode::Required, field)),
            single(disable_parallel_tool_use),
        ),
        ToolChoice::Tool {
            name,
            disable_parallel_tool_use,
        } => (Some(Choice::named(name, field)), single(disable_parallel_tool_use)),
        ToolChoice::None {} => (Some(Choice::mode(CallMode::None, field)), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(body: serde_json::Value) -> Result<core::ChatRequest, RequestError> {
        messages_request(serde_json::from_value(body).unwrap(), None, false).map(|(request, _)| request)
    }

    fn invalid_param(body: serde_json::Value) -> String {
        match request(body) {
            Err(RequestError::Invalid(invalid)) => invalid.param,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn turns_become_core_messages_in_order() {
        let request = request(json!({"max_tokens": 8, "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": "read it"},
                {"role": "assistant", "content": [{"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x", "is_error": true},
                    {"type": "text", "text": "go on"}]}]}))
        .unwrap();
        assert_eq!(
            request.messages,
            vec![
                core::Message::System("a\n\nb".into()),
                core::Message::User("read it".into()),
                core::Message::Assistant {
                    text: "Reading.".into(),
                    calls: vec![PastCall {
                        id: Some("call_1".into()),
                        name: "read".into(),
                        arguments: PastArguments::Object(json!({"path": "a"})),
                        field: "messages[1].content[1].input".into(),
                    }],
                },
                core::Message::Tool {
                    text: "Error: x".into(),
                    call_id: Some("call_1".into()),
                    field: "messages[2].content[0].tool_use_id".into(),
                },
                core::Message::User("go on".into()),
            ]
        );
    }

    #[test]
    fn what_the_models_cannot_do_is_refused_with_its_field() {
        let user =
            |content: serde_json::Value| json!({"max_tokens": 8, "messages": [{"role": "user", "content": content}]});
        assert_eq!(
            invalid_param(json!({"messages": [{"role": "user", "content": "x"}]})),
            "max_tokens"
        );
        assert_eq!(
            invalid_param(user(
                json!([{"type": "text", "text": "x"}, {"type": "image", "source": {}}])
            )),
            "messages[0].content[1]"
        );
        let mut thinking = user(json!("x"));
        thinking["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
        assert_eq!(invalid_param(thinking), "thinking");
        let mut server_tool = user(json!("x"));
        server_tool["tools"] = json!([{"type": "bash_20250124", "name": "bash"}]);
        assert_eq!(invalid_param(server_tool), "tools[0].type");
        let prefill = json!({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "{"}]});
        assert_eq!(invalid_param(prefill), "messages[1]");
    }

    #[test]
    fn tool_choices_map_to_modes_and_parallelism() {
        let with = |choice: serde_json::Value| {
            request(json!({"max_tokens": 8, "tool_choice": choice, "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                "messages": [{"role": "user", "content": "x"}]}))
            .unwrap()
        };
        let any = with(json!({"type": "any", "disable_parallel_tool_use": true}));
        assert_eq!(any.tool_choice.unwrap().choice.mode, CallMode::Required);
        assert_eq!(any.parallel_tool_calls, Some(false));
        let named = with(json!({"type": "tool", "name": "browser_*"}));
        assert_eq!(
            named.tool_choice.unwrap().choice.allowed,
            Some(vec![tessera_constrain::AllowedTool::Family("browser_".into())])
        );
        assert_eq!(
            with(json!({"type": "none"})).tool_choice.unwrap().choice.mode,
            CallMode::None
        );
    }

    #[test]
    fn what_claude_code_sends_beside_the_conversation_is_read() {
        let schema = json!({"type": "object", "properties": {"title": {"type": "string"}}});
        let request = request(json!({"max_tokens": 32000, "thinking": {"type": "adaptive"},
            "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": schema}},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "messages": [{"role": "user", "content": "a"}, {"role": "system", "content": [{"type": "text", "text": "b"}]},
                {"role": "user", "content": "c"}]}))
        .unwrap();
        assert_eq!(request.json_format, Some(schema));
        assert!(request.fit_to_context, "a max_tokens over the room is cut to fit");
        assert_eq!(request.messages[1], core::Message::System("b".into()));
    }
}
