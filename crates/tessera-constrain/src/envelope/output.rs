//! Around the automaton: the parser that turns a whole response back into
//! free text plus typed calls.

use super::bare::{head_match, strip_leniently, HeadMatch};
use super::format::Envelope;
use super::pieces::CallFormat;
use super::syntax::CallSyntax;
use serde_json::{json, Value};

/// One parsed call: the tool's name and its arguments as canonical JSON
/// (compact, keys sorted), so equal calls are equal strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The tool.
    pub name: String,
    /// Canonical JSON of the arguments object.
    pub arguments: String,
}

impl ToolCall {
    /// `{"name": …, "arguments": {…}}` as a JSON value.
    pub fn to_json(&self) -> Value {
        let arguments: Value = serde_json::from_str(&self.arguments).unwrap_or(Value::Null);
        json!({"name": self.name, "arguments": arguments})
    }
}

/// A response split into its free text and its calls.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParsedResponse {
    /// Text outside the calls, trimmed.
    pub content: String,
    /// The calls, in order.
    pub calls: Vec<ToolCall>,
}

/// A call block that is not a valid call (only unconstrained text can contain one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed tool call: {0}")]
pub struct CallParseError(pub String);

/// Split `text` into free text and the calls written in `format`'s envelope.
/// Each call's JSON is read as JSON, so a string argument may contain the
/// envelope's closing text. Bare calls are not read: see [`CallSyntax`].
pub fn parse_response(text: &str, format: CallFormat) -> Result<ParsedResponse, CallParseError> {
    CallSyntax::new(format).parse(text)
}

impl CallSyntax {
    /// Split `text` into free text and calls (see [`parse_response`]).
    pub fn parse(&self, text: &str) -> Result<ParsedResponse, CallParseError> {
        let mut parsed = ParsedResponse::default();
        let rest = self.parse_bare_calls(text, &mut parsed)?;
        parse_enveloped(rest, self.format(), parsed)
    }

    /// The bare calls `text` starts with, into `parsed`; the text after them.
    fn parse_bare_calls<'t>(&self, text: &'t str, parsed: &mut ParsedResponse) -> Result<&'t str, CallParseError> {
        let (forms, names) = self.bare();
        let mut rest = text;
        while let HeadMatch::Call { form, name, args_at } = head_match(&forms, names, rest) {
            let body = &rest[args_at..];
            let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
            let arguments = match values.next() {
                Some(Ok(value)) => value,
                Some(Err(error)) => return Err(CallParseError(format!("{error} in {body:?}"))),
                None => return Err(CallParseError(format!("the call to `{name}` has no arguments"))),
            };
            let call_end = &forms[form as usize - 1].pieces.call_end;
            rest = strip_leniently(&body[values.byte_offset()..], call_end)
                .ok_or_else(|| CallParseError(format!("the bare call to `{name}` is not closed")))?;
            parsed.calls.push(ToolCall {
                name,
                arguments: arguments.to_string(),
            });
        }
        Ok(rest)
    }
}

/// `text`'s calls in `format`'s envelope, after those already in `parsed`.
fn parse_enveloped(
    text: &str,
    format: CallFormat,
    mut parsed: ParsedResponse,
) -> Result<ParsedResponse, CallParseError> {
    let envelope = Envelope::new(format);
    let opener = envelope.opener_text();
    let mut content = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(opener) {
        content.push_str(&rest[..start]);
        // The Llama form has no opener outside the JSON: the call object starts at the match.
        let body = match format {
            CallFormat::Llama3Json => &rest[start..],
            CallFormat::Hermes | CallFormat::Mistral => &rest[start + opener.len()..],
        };
        let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
        let value = match values.next() {
            Some(Ok(value)) => value,
            Some(Err(error)) => return Err(CallParseError(format!("{error} in {body:?}"))),
            None => return Err(CallParseError(format!("a call has no JSON after {opener}"))),
        };
        let after = &body[values.byte_offset()..];
        let key = format.arguments_key();
        rest = match format {
            CallFormat::Hermes => {
                parsed.calls.push(call_of(value, key)?);
                after
                    .trim_start()
                    .strip_prefix("</tool_call>")
                    .ok_or_else(|| CallParseError("a call is not closed by </tool_call>".into()))?
            }
            CallFormat::Mistral => {
                let Value::Array(calls) = value else {
                    return Err(CallParseError("[TOOL_CALLS] is not followed by a JSON array".into()));
                };
                for call in calls {
                    parsed.calls.push(call_of(call, key)?);
                }
                after
            }
            CallFormat::Llama3Json => {
                parsed.calls.push(call_of(value, key)?);
                after
            }
        };
    }
    content.push_str(rest);
    parsed.content = content.trim().to_string();
    Ok(parsed)
}

fn call_of(value: Value, arguments_key: &str) -> Result<ToolCall, CallParseError> {
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| CallParseError("the call has no string `name`".into()))?;
    let arguments = value
        .get(arguments_key)
        .filter(|a| a.is_object())
        .ok_or_else(|| CallParseError(format!("the call to `{name}` has no `{arguments_key}` object")))?;
    Ok(ToolCall {
        name: name.to_string(),
        // serde_json's map keeps keys sorted: this is the canonical form.
        arguments: arguments.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_text_and_calls_with_canonical_arguments() {
        let text = "Looking.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"b\": 1, \"a\": [true]}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
        let parsed = parse_response(text, CallFormat::Hermes).unwrap();
        assert_eq!(parsed.content, "Looking.");
        assert_eq!(
            parsed.calls,
            vec![
                ToolCall {
                    name: "f".into(),
                    arguments: r#"{"a":[true],"b":1}"#.into()
                },
                ToolCall {
                    name: "g".into(),
                    arguments: "{}".into()
                },
            ]
        );
        assert_eq!(parse_response("no calls", CallFormat::Hermes).unwrap().calls, vec![]);
        assert!(parse_response("<tool_call>\n{\"name\": 1}\n</tool_call>", CallFormat::Hermes).is_err());
        assert!(parse_response("<tool_call>\n{", CallFormat::Hermes).is_err());
        // A string argument may contain the closing tag; the JSON decides where the call ends.
        let tricky = "<tool_call>\n{\"name\": \"m\", \"arguments\": {\"e\": \"1}}</tool_call> x\"}}\n</tool_call>";
        let parsed = parse_response(tricky, CallFormat::Hermes).unwrap();
        assert_eq!(parsed.calls[0].arguments, r#"{"e":"1}}</tool_call> x"}"#);
        assert_eq!(parsed.content, "");
    }

    #[test]
    fn mistral_and_llama_forms_parse_with_their_keys() {
        let mistral =
            "Sure.[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"b\": 1}}, {\"name\": \"g\", \"arguments\": {}}]";
        let parsed = parse_response(mistral, CallFormat::Mistral).unwrap();
        assert_eq!(parsed.content, "Sure.");
        assert_eq!(parsed.calls.len(), 2);
        assert_eq!(parsed.calls[1].name, "g");
        assert!(parse_response("[TOOL_CALLS]{\"name\": \"f\"}", CallFormat::Mistral).is_err());
        let llama = "{\"name\": \"f\", \"parameters\": {\"z\": [], \"a\": null}}";
        let parsed = parse_response(llama, CallFormat::Llama3Json).unwrap();
        assert_eq!(parsed.calls[0].arguments, r#"{"a":null,"z":[]}"#);
        assert!(parse_response("{\"name\": \"f\", \"arguments\": {}}", CallFormat::Llama3Json).is_err());
    }
}
