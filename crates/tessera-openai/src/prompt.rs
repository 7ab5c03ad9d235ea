//! Messages and tools → prompt text, deterministically: the same messages and
//! tools always render to the same text (tool schemas as sorted-key JSON, no
//! timestamps, no ids), so an agent's turn n+1 starts with exactly turn n's
//! prompt and hits the prefix cache. An earlier call's arguments are written
//! back as the client sends them, which for arguments this server returned is
//! exactly what the model generated (see [`replayed_arguments`]): the model's
//! own reply is then a cache hit too.

use crate::api::{Content, Message, Role, ToolKind, ToolSpec};
use crate::InvalidRequest;
use serde_json::{json, Value};
use tessera_constrain::{tools_prompt, CallFormat, Envelope, ToolDef};
use tessera_model::{ChatMessage, ChatRole, Protected};

/// The tool definitions of a request, validated for shape (names and schemas
/// are checked when the set compiles).
pub fn tool_defs(tools: &[ToolSpec]) -> Vec<ToolDef> {
    tools
        .iter()
        .map(|tool| {
            let ToolKind::Function = tool.kind;
            let parameters = tool
                .function
                .parameters
                .clone()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            ToolDef {
                name: tool.function.name.clone(),
                description: tool.function.description.clone().unwrap_or_default(),
                parameters,
            }
        })
        .collect()
}

/// The chat messages the template renders: the tool section joined to the
/// first system message (or a system message of its own), earlier calls and
/// tool results written in the model's call format.
///
/// Every piece of outside text (contents, results, earlier calls' names and
/// arguments, tool names, descriptions and schemas) goes through `protected`,
/// so that only the template's own text can become control tokens (tokenize
/// the rendered prompt with `Tokenizer::encode_protected`).
pub fn chat_messages(
    messages: &[Message],
    tools: &[ToolDef],
    format: CallFormat,
    protected: &mut Protected,
) -> Result<Vec<ChatMessage>, InvalidRequest> {
    if messages.is_empty() {
        return Err(InvalidRequest::new("messages", "at least one message is required"));
    }
    let mut rendered = Vec::with_capacity(messages.len() + 1);
    for (i, message) in messages.iter().enumerate() {
        rendered.push(render_message(i, message, format, protected)?);
    }
    if !tools.is_empty() {
        let tools: Vec<ToolDef> = tools
            .iter()
            .map(|tool| tool.map_text(|text| protected.protect(text)))
            .collect();
        let section = tools_prompt(&tools, format);
        match rendered.first_mut().filter(|m| m.role == ChatRole::System) {
            Some(system) => system.content = format!("{}\n\n{section}", system.content),
            None => rendered.insert(0, ChatMessage::new(ChatRole::System, section)),
        }
    }
    Ok(rendered)
}

fn render_message(
    i: usize,
    message: &Message,
    format: CallFormat,
    protected: &mut Protected,
) -> Result<ChatMessage, InvalidRequest> {
    let text = protected.protect(&content_text(message.content.as_ref()));
    match message.role {
        Role::System | Role::Developer => Ok(ChatMessage::new(ChatRole::System, text)),
        Role::User => Ok(ChatMessage::new(ChatRole::User, text)),
        Role::Assistant => {
            let calls = message.tool_calls.as_deref().unwrap_or_default();
            let mut parsed = Vec::with_capacity(calls.len());
            for (j, call) in calls.iter().enumerate() {
                // Some frameworks send "" for a call without arguments.
                let arguments = replayed_arguments(&call.function.arguments).map_err(|error| {
                    InvalidRequest::new(
                        format!("messages[{i}].tool_calls[{j}].function.arguments"),
                        format!("not valid JSON: {error}"),
                    )
                })?;
                parsed.push((protected.protect(&call.function.name), protected.protect(&arguments)));
            }
            let calls: Vec<(&str, &str)> = parsed
                .iter()
                .map(|(name, args)| (name.as_str(), args.as_str()))
                .collect();
            Ok(ChatMessage::new(
                ChatRole::Assistant,
                text + &Envelope::new(format).render_calls(&calls),
            ))
        }
        Role::Tool => Ok(match format {
            // Hermes-style models read results as a user turn in <tool_response> tags.
            CallFormat::Hermes => {
                ChatMessage::new(ChatRole::User, format!("<tool_response>\n{text}\n</tool_response>"))
            }
            CallFormat::Mistral | CallFormat::Llama3Json => ChatMessage::new(ChatRole::Tool, text),
        }),
    }
}

/// An earlier call's arguments as the prompt writes them: verbatim when they
/// are one line of JSON (as this server returns what the model generated:
/// its key order, its spacing), so the history replays the model's own
/// tokens; otherwise (pretty-printed, or from elsewhere) compact JSON with
/// sorted keys. Some frameworks send "" for a call without arguments: `{}`.
pub fn replayed_arguments(text: &str) -> Result<String, serde_json::Error> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok("{}".into());
    }
    let value: Value = serde_json::from_str(trimmed)?;
    let one_line = !trimmed.contains(['\n', '\r']) && trimmed.len() == text.len();
    Ok(match one_line {
        true => trimmed.to_string(),
        false => value.to_string(),
    })
}

/// A message's text: a string, or its text parts joined.
fn content_text(content: Option<&Content>) -> String {
    match content {
        None => String::new(),
        Some(Content::Text(text)) => text.clone(),
        Some(Content::Parts(parts)) => parts.iter().map(|part| part.text.as_str()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_as_generated_replay_verbatim_and_others_are_made_compact() {
        let generated = r#"{"path": "notes.md", "content": "a\nb"}"#;
        assert_eq!(
            replayed_arguments(generated).unwrap(),
            generated,
            "key order and spaces kept"
        );
        let pretty = "{\n  \"b\": 1,\n  \"a\": 2\n}";
        assert_eq!(replayed_arguments(pretty).unwrap(), r#"{"a":2,"b":1}"#);
        assert_eq!(replayed_arguments(" {\"a\": 1} ").unwrap(), r#"{"a":1}"#);
        assert_eq!(replayed_arguments("").unwrap(), "{}");
        assert!(replayed_arguments("{\"a\":").is_err());
    }
}
