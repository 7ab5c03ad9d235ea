//! Messages and tools → prompt text, deterministically: the same messages and
//! tools always render to the same text (tool schemas as sorted-key JSON, no
//! timestamps, no ids), so an agent's turn n+1 starts with exactly turn n's
//! prompt and hits the prefix cache. An earlier call's arguments are written
//! back as the model generated them (see [`replayed_arguments`] and
//! [`ArgumentMemory`]): the model's own reply is then a cache hit too, in
//! every protocol.

use super::memory::ArgumentMemory;
use super::request::{Message, PastArguments, PastCall};
use crate::InvalidRequest;
use serde_json::Value;
use tessera_constrain::{tools_prompt, CallFormat, Envelope, ToolDef};
use tessera_model::{ChatMessage, ChatRole, Protected};

/// What rendering needs besides the messages.
pub struct RenderContext<'a> {
    /// How the model writes calls.
    pub format: CallFormat,
    /// Collects outside text, so only the template's own text becomes control tokens.
    pub protected: &'a mut Protected,
    /// The arguments the model generated for recent calls.
    pub memory: &'a ArgumentMemory,
    /// Where the conversation is in the request (named in errors).
    pub prompt_field: &'static str,
}

/// The chat messages the template renders: the tool section joined to the
/// first system message (or a system message of its own), earlier calls and
/// tool results written in the model's call format.
///
/// Every piece of outside text (contents, results, earlier calls' names and
/// arguments, tool names, descriptions and schemas) goes through
/// `render.protected` (tokenize the rendered prompt with `Tokenizer::encode_protected`).
pub fn chat_messages(
    messages: &[Message],
    tools: &[ToolDef],
    render: &mut RenderContext,
) -> Result<Vec<ChatMessage>, InvalidRequest> {
    if messages.is_empty() {
        return Err(InvalidRequest::new(
            render.prompt_field,
            "at least one message is required",
        ));
    }
    let mut rendered = Vec::with_capacity(messages.len() + 1);
    for message in messages {
        rendered.push(render_message(message, render)?);
    }
    if !tools.is_empty() {
        let tools: Vec<ToolDef> = tools
            .iter()
            .map(|tool| tool.map_text(|text| render.protected.protect(text)))
            .collect();
        let section = tools_prompt(&tools, render.format);
        match rendered.first_mut().filter(|m| m.role == ChatRole::System) {
            Some(system) => system.content = format!("{}\n\n{section}", system.content),
            None => rendered.insert(0, ChatMessage::new(ChatRole::System, section)),
        }
    }
    Ok(rendered)
}

fn render_message(message: &Message, render: &mut RenderContext) -> Result<ChatMessage, InvalidRequest> {
    let protected = &mut *render.protected;
    Ok(match message {
        Message::System(text) => ChatMessage::new(ChatRole::System, protected.protect(text)),
        Message::User(text) => ChatMessage::new(ChatRole::User, protected.protect(text)),
        Message::Assistant { text, calls } => {
            let text = protected.protect(text);
            let mut parsed = Vec::with_capacity(calls.len());
            for call in calls {
                let arguments = call_arguments(call, render.memory)?;
                parsed.push((
                    render.protected.protect(&call.name),
                    render.protected.protect(&arguments),
                ));
            }
            let calls: Vec<(&str, &str)> = parsed
                .iter()
                .map(|(name, args)| (name.as_str(), args.as_str()))
                .collect();
            ChatMessage::new(
                ChatRole::Assistant,
                text + &Envelope::new(render.format).render_calls(&calls),
            )
        }
        Message::Tool { text } => {
            let text = protected.protect(text);
            match render.format {
                // Hermes-style models read results as a user turn in <tool_response> tags.
                CallFormat::Hermes => {
                    ChatMessage::new(ChatRole::User, format!("<tool_response>\n{text}\n</tool_response>"))
                }
                CallFormat::Mistral | CallFormat::Llama3Json => ChatMessage::new(ChatRole::Tool, text),
            }
        }
    })
}

fn call_arguments(call: &PastCall, memory: &ArgumentMemory) -> Result<String, InvalidRequest> {
    match &call.arguments {
        PastArguments::Text(text) => replayed_arguments(text, memory)
            .map_err(|error| InvalidRequest::new(call.field.clone(), format!("not valid JSON: {error}"))),
        PastArguments::Object(value) => Ok(memory.spell(value)),
    }
}

/// An earlier call's arguments as the prompt writes them: verbatim when they
/// are one line of JSON (as this server returns what the model generated:
/// its key order, its spacing), so the history replays the model's own
/// tokens; otherwise (pretty-printed, or from elsewhere) as the model wrote
/// the same value when `memory` has it, else compact JSON with sorted keys.
/// Some frameworks send "" for a call without arguments: `{}`.
pub fn replayed_arguments(text: &str, memory: &ArgumentMemory) -> Result<String, serde_json::Error> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok("{}".into());
    }
    let value: Value = serde_json::from_str(trimmed)?;
    let one_line = !trimmed.contains(['\n', '\r']) && trimmed.len() == text.len();
    Ok(match one_line {
        true => trimmed.to_string(),
        false => memory.spell(&value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_as_generated_replay_verbatim_and_others_are_made_compact() {
        let memory = ArgumentMemory::default();
        let generated = r#"{"path": "notes.md", "content": "a\nb"}"#;
        assert_eq!(
            replayed_arguments(generated, &memory).unwrap(),
            generated,
            "key order and spaces kept"
        );
        let pretty = "{\n  \"b\": 1,\n  \"a\": 2\n}";
        assert_eq!(replayed_arguments(pretty, &memory).unwrap(), r#"{"a":2,"b":1}"#);
        assert_eq!(replayed_arguments(" {\"a\": 1} ", &memory).unwrap(), r#"{"a":1}"#);
        assert_eq!(replayed_arguments("", &memory).unwrap(), "{}");
        assert!(replayed_arguments("{\"a\":", &memory).is_err());
        memory.remember(r#"{"b": 1, "a": 2}"#);
        assert_eq!(
            replayed_arguments(pretty, &memory).unwrap(),
            r#"{"b": 1, "a": 2}"#,
            "a re-serialized call is spelled as the model wrote it"
        );
    }
}
