//! Messages and tools → prompt text, deterministically: the same messages and
//! tools always render to the same text (tool schemas and call arguments as
//! sorted-key JSON, no timestamps, no ids), so an agent's turn n+1 starts with
//! exactly turn n's prompt and hits the prefix cache.

use crate::api::{Content, Message, ToolSpec};
use crate::error::ApiError;
use serde_json::{json, Value};
use tessera_constrain::{tools_prompt, CallFormat, Envelope, ToolDef};
use tessera_model::ChatMessage;

/// The tool definitions of a request, validated for shape (names and schemas
/// are checked when the set compiles).
pub fn tool_defs(tools: &[ToolSpec]) -> Result<Vec<ToolDef>, ApiError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            if tool.kind != "function" {
                return Err(ApiError::invalid(
                    format!("tools[{i}].type"),
                    format!("tool type `{}` is not supported (only `function`)", tool.kind),
                ));
            }
            let parameters = tool
                .function
                .parameters
                .clone()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            Ok(ToolDef {
                name: tool.function.name.clone(),
                description: tool.function.description.clone().unwrap_or_default(),
                parameters,
            })
        })
        .collect()
}

/// The chat messages the template renders: the tool section joined to the
/// first system message (or a system message of its own), earlier calls and
/// tool results written in the model's call format.
pub fn chat_messages(
    messages: &[Message],
    tools: &[ToolDef],
    format: CallFormat,
) -> Result<Vec<ChatMessage>, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::invalid("messages", "at least one message is required"));
    }
    let mut rendered = Vec::with_capacity(messages.len() + 1);
    for (i, message) in messages.iter().enumerate() {
        rendered.push(render_message(i, message, format)?);
    }
    if !tools.is_empty() {
        let section = tools_prompt(tools, format);
        match rendered.first_mut().filter(|m| m.role == "system") {
            Some(system) => system.content = format!("{}\n\n{section}", system.content),
            None => rendered.insert(0, ChatMessage::new("system", section)),
        }
    }
    Ok(rendered)
}

fn render_message(i: usize, message: &Message, format: CallFormat) -> Result<ChatMessage, ApiError> {
    let text = content_text(i, message.content.as_ref())?;
    match message.role.as_str() {
        "system" | "developer" => Ok(ChatMessage::new("system", text)),
        "user" => Ok(ChatMessage::new("user", text)),
        "assistant" => {
            let calls = message.tool_calls.as_deref().unwrap_or_default();
            let mut parsed = Vec::with_capacity(calls.len());
            for (j, call) in calls.iter().enumerate() {
                // Some frameworks send "" for a call without arguments.
                let text = match call.function.arguments.trim() {
                    "" => "{}",
                    text => text,
                };
                let arguments: Value = serde_json::from_str(text).map_err(|error| {
                    ApiError::invalid(
                        format!("messages[{i}].tool_calls[{j}].function.arguments"),
                        format!("not valid JSON: {error}"),
                    )
                })?;
                parsed.push((call.function.name.as_str(), arguments));
            }
            let calls: Vec<(&str, &Value)> = parsed.iter().map(|(name, args)| (*name, args)).collect();
            // Arguments canonical: serde_json keeps object keys sorted.
            Ok(ChatMessage::new(
                "assistant",
                text + &Envelope::new(format).render_calls(&calls),
            ))
        }
        "tool" => Ok(match format {
            // Hermes-style models read results as a user turn in <tool_response> tags.
            CallFormat::Hermes => ChatMessage::new("user", format!("<tool_response>\n{text}\n</tool_response>")),
            CallFormat::Mistral | CallFormat::Llama3Json => ChatMessage::new("tool", text),
        }),
        other => Err(ApiError::invalid(
            format!("messages[{i}].role"),
            format!("unknown role `{other}` (system, developer, user, assistant or tool)"),
        )),
    }
}

/// A message's text: a string, or its text parts joined.
fn content_text(i: usize, content: Option<&Content>) -> Result<String, ApiError> {
    match content {
        None => Ok(String::new()),
        Some(Content::Text(text)) => Ok(text.clone()),
        Some(Content::Parts(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, part)| match (part.kind.as_str(), &part.text) {
                ("text", Some(text)) => Ok(text.as_str()),
                ("text", None) => Err(ApiError::invalid(
                    format!("messages[{i}].content[{j}].text"),
                    "a text part needs `text`",
                )),
                (other, _) => Err(ApiError::invalid(
                    format!("messages[{i}].content[{j}].type"),
                    format!("content part type `{other}` is not supported (only `text`)"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|texts| texts.join("")),
    }
}
