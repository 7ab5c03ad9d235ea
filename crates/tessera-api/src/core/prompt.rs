//! Messages and tools → prompt text, deterministically: the same request
//! renders to the same text (tool schemas as sorted-key JSON, no timestamps,
//! no ids), so an agent's turn n+1 starts with exactly turn n's prompt and
//! hits the prefix cache. An earlier call's arguments are written back as the
//! model generated them when the server knows that call (by its id, see
//! [`replayed_arguments`] and [`ReplyMemory`]): the model's own reply is
//! then a cache hit too, in every protocol. A tool result must answer a call
//! made earlier in the conversation (when ids are given): one that does not
//! is refused with its field, as the protocols' own APIs do.

use super::memory::{canonical, ReplyMemory};
use super::request::{Message, PastArguments, PastCall};
use super::tools_section::tools_prompt;
use crate::InvalidRequest;
use serde_json::Value;
use tessera_constrain::{CallFormat, Envelope, ToolDef};
use tessera_model::{ChatMessage, ChatRole, Protected};

/// What rendering needs besides the messages.
pub struct RenderContext<'a> {
    /// How the model writes calls.
    pub format: CallFormat,
    /// Collects outside text, so only the template's own text becomes control tokens.
    pub protected: &'a mut Protected,
    /// The replies the model generated for recent calls.
    pub memory: &'a ReplyMemory,
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
    check_results_answer_calls(messages)?;
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
            if let Some(reply) = as_generated(text, calls, render.memory)? {
                let reply = protect_reply(&reply, render.format, render.protected);
                return Ok(ChatMessage::new(ChatRole::Assistant, reply));
            }
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
        Message::Tool { text, .. } => {
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

/// Every tool result that names its call answers a call made before it
/// (when every earlier call has an id to match).
fn check_results_answer_calls(messages: &[Message]) -> Result<(), InvalidRequest> {
    let mut ids = Vec::new();
    let mut all_named = true;
    for message in messages {
        match message {
            Message::Assistant { calls, .. } => {
                for call in calls {
                    match &call.id {
                        Some(id) => ids.push(id.as_str()),
                        None => all_named = false,
                    }
                }
            }
            Message::Tool {
                call_id: Some(id),
                field,
                ..
            } if all_named && !ids.contains(&id.as_str()) => {
                return Err(InvalidRequest::new(
                    field.clone(),
                    format!("`{id}` answers no call made earlier in the conversation"),
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// A remembered reply as prompt text: protected as outside text, but for
/// the call envelope's opener, which the model wrote as the template's own
/// token (a special one in some families) and the envelope renders so.
fn protect_reply(reply: &str, format: CallFormat, protected: &mut Protected) -> String {
    let envelope = Envelope::new(format);
    let opener = envelope.opener_text();
    if opener.is_empty() {
        return protected.protect(reply);
    }
    let pieces: Vec<String> = reply.split(opener).map(|piece| protected.protect(piece)).collect();
    pieces.join(opener)
}

/// The reply exactly as the model generated it, when the server remembers
/// the reply these calls were made in and the client sent back what it said.
fn as_generated(text: &str, calls: &[PastCall], memory: &ReplyMemory) -> Result<Option<String>, InvalidRequest> {
    let Some((reply, 0)) = calls
        .first()
        .and_then(|call| call.id.as_deref())
        .and_then(|id| memory.reply(id))
    else {
        return Ok(None);
    };
    let mut said = Vec::with_capacity(calls.len());
    for call in calls {
        let value = match &call.arguments {
            PastArguments::Object(value) => value.clone(),
            PastArguments::Text(text) | PastArguments::Generated(text) => match text.trim() {
                "" => Value::Object(Default::default()),
                text => serde_json::from_str(text)
                    .map_err(|error| InvalidRequest::new(call.field.clone(), format!("not valid JSON: {error}")))?,
            },
        };
        said.push((call.name.as_str(), value));
    }
    Ok(reply.says(text, &said).then(|| reply.text.clone()))
}

fn call_arguments(call: &PastCall, memory: &ReplyMemory) -> Result<String, InvalidRequest> {
    let generated = |value: &Value| call.id.as_deref().and_then(|id| memory.arguments(id, value));
    match &call.arguments {
        PastArguments::Text(text) => replayed_arguments(text, generated)
            .map_err(|error| InvalidRequest::new(call.field.clone(), format!("not valid JSON: {error}"))),
        PastArguments::Object(value) => Ok(generated(value).unwrap_or_else(|| canonical(value))),
        PastArguments::Generated(text) => Ok(text.clone()),
    }
}

/// An earlier call's arguments as the prompt writes them: as the model
/// generated them when `generated` knows the call and it came back as the
/// same value (a client that re-serializes arguments, compact or pretty,
/// loses the model's spacing and key order); else verbatim when they are one
/// line of JSON, else compact JSON with sorted keys. Some frameworks send ""
/// for a call without arguments: `{}`.
pub fn replayed_arguments(
    text: &str,
    generated: impl FnOnce(&Value) -> Option<String>,
) -> Result<String, serde_json::Error> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok("{}".into());
    }
    let value: Value = serde_json::from_str(trimmed)?;
    if let Some(generated) = generated(&value) {
        return Ok(generated);
    }
    let one_line = !trimmed.contains(['\n', '\r']) && trimmed.len() == text.len();
    Ok(match one_line {
        true => trimmed.to_string(),
        false => canonical(&value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_as_generated_replay_verbatim_and_others_are_made_compact() {
        let unknown = |_: &Value| None;
        let generated = r#"{"path": "notes.md", "content": "a\nb"}"#;
        assert_eq!(
            replayed_arguments(generated, unknown).unwrap(),
            generated,
            "key order and spaces kept"
        );
        let pretty = "{\n  \"b\": 1,\n  \"a\": 2\n}";
        assert_eq!(replayed_arguments(pretty, unknown).unwrap(), r#"{"a":2,"b":1}"#);
        assert_eq!(replayed_arguments(" {\"a\": 1} ", unknown).unwrap(), r#"{"a":1}"#);
        assert_eq!(replayed_arguments("", unknown).unwrap(), "{}");
        assert!(replayed_arguments("{\"a\":", unknown).is_err());
        let memory = ReplyMemory::default();
        let reply = crate::Reply {
            text: String::new(),
            content: String::new(),
            calls: vec![("f".into(), r#"{"b": 1, "a": 2}"#.into())],
        };
        memory.remember(vec!["call_7".into()], reply);
        for resent in [pretty, r#"{"a":2,"b":1}"#, r#"{"b":1,"a":2}"#] {
            let known = |value: &Value| memory.arguments("call_7", value);
            assert_eq!(
                replayed_arguments(resent, known).unwrap(),
                r#"{"b": 1, "a": 2}"#,
                "a re-serialized call is spelled as the model wrote it"
            );
        }
    }

    #[test]
    fn a_remembered_reply_is_spelled_as_generated_when_the_client_sends_back_what_it_said() {
        let memory = ReplyMemory::default();
        let raw = "```json\n{\"name\": \"f\", \"arguments\": {\"b\": 1, \"a\": 2}}\n```";
        let reply = crate::Reply {
            text: raw.into(),
            content: String::new(),
            calls: vec![("f".into(), r#"{"b": 1, "a": 2}"#.into())],
        };
        memory.remember(vec!["call_9_0".into()], reply);
        let sent = |arguments: PastArguments, id: &str| PastCall {
            id: Some(id.into()),
            name: "f".into(),
            arguments,
            field: String::new(),
        };
        let compact = sent(PastArguments::Text(r#"{"a":2,"b":1}"#.into()), "call_9_0");
        assert_eq!(
            as_generated("", std::slice::from_ref(&compact), &memory)
                .unwrap()
                .as_deref(),
            Some(raw)
        );
        let object = sent(PastArguments::Object(serde_json::json!({"a": 2, "b": 1})), "call_9_0");
        assert_eq!(
            as_generated("", &[object], &memory).unwrap().as_deref(),
            Some(raw),
            "Anthropic's object"
        );
        assert_eq!(
            as_generated("I called f.", &[compact], &memory).unwrap(),
            None,
            "other text"
        );
        let changed = sent(PastArguments::Text(r#"{"a":3,"b":1}"#.into()), "call_9_0");
        assert_eq!(as_generated("", &[changed], &memory).unwrap(), None, "other arguments");
        let unknown = sent(PastArguments::Text("{}".into()), "call_1_0");
        assert_eq!(as_generated("", &[unknown], &memory).unwrap(), None);
    }

    fn call(id: &str) -> PastCall {
        PastCall {
            id: Some(id.into()),
            name: "f".into(),
            arguments: PastArguments::Text("{}".into()),
            field: String::new(),
        }
    }

    fn result(id: &str) -> Message {
        Message::Tool {
            text: "r".into(),
            call_id: Some(id.into()),
            field: "messages[2].tool_call_id".into(),
        }
    }

    #[test]
    fn a_result_must_answer_an_earlier_call() {
        let assistant = Message::Assistant {
            text: String::new(),
            calls: vec![call("call_1"), call("call_2")],
        };
        let ok = [
            Message::User("u".into()),
            assistant.clone(),
            result("call_2"),
            result("call_1"),
        ];
        assert!(check_results_answer_calls(&ok).is_ok(), "in any order");
        let stray = [Message::User("u".into()), assistant, result("call_9")];
        let error = check_results_answer_calls(&stray).unwrap_err();
        assert_eq!(error.param, "messages[2].tool_call_id");
        assert!(error.message.contains("`call_9`"), "{}", error.message);
        assert!(
            check_results_answer_calls(&[result("call_1")]).is_err(),
            "no call before it"
        );
        assert!(
            check_results_answer_calls(&[Message::tool("r")]).is_ok(),
            "a result naming no call"
        );
    }
}
