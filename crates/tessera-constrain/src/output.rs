//! Around the automaton: the tool section a prompt gets when the chat
//! template has no tool support of its own, and the parser that turns a
//! response back into free text plus typed calls.

use crate::bare::{head_match, strip_leniently, BareForm, HeadMatch};
use crate::{CallFormat, CallStreamParser, Envelope, ToolDef};
use serde_json::{json, Value};
use std::sync::Arc;

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

/// How calls appear in one response's text: the template's envelope and, in
/// `auto` mode, the family's bare forms (calls to the allowed names only, at
/// the reply's start and after a bare call; see [`crate::bare`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSyntax {
    format: CallFormat,
    /// Names a bare call may use; empty = bare calls are text.
    bare_names: Arc<[String]>,
}

impl CallSyntax {
    /// Calls in `format`'s envelope only.
    pub fn new(format: CallFormat) -> Self {
        Self {
            format,
            bare_names: Arc::from(Vec::new()),
        }
    }

    /// Bare calls to `names` are calls too.
    pub fn with_bare_calls(self, names: impl IntoIterator<Item = String>) -> Self {
        Self {
            bare_names: names.into_iter().collect(),
            ..self
        }
    }

    /// The envelope's family.
    pub fn format(&self) -> CallFormat {
        self.format
    }

    /// The bare forms in effect and the names they may call (none outside `auto`).
    pub(crate) fn bare(&self) -> (Vec<BareForm>, &[String]) {
        match self.bare_names.is_empty() {
            true => (Vec::new(), &[]),
            false => (BareForm::of(self.format), &self.bare_names),
        }
    }

    /// A streaming parser for responses in this syntax that start after `prefill`.
    pub fn stream_parser(&self, prefill: &str) -> CallStreamParser {
        CallStreamParser::with_syntax(self).prefilled(prefill)
    }

    /// Split `text` into free text and calls (see [`parse_response`]).
    pub fn parse(&self, text: &str) -> Result<ParsedResponse, CallParseError> {
        let mut parsed = ParsedResponse::default();
        let rest = self.parse_bare_calls(text, &mut parsed)?;
        parse_enveloped(rest, self.format, parsed)
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

/// The system-prompt section describing `tools` and how to call them in
/// `format`'s envelope. Deterministic: one tool per line, keys sorted, so the
/// same tools give the same tokens.
pub fn tools_prompt(tools: &[ToolDef], format: CallFormat) -> String {
    let lines: Vec<String> = tools
        .iter()
        .map(|tool| {
            json!({"type": "function", "function": {
                "name": tool.name, "description": tool.description, "parameters": tool.parameters,
            }})
            .to_string()
        })
        .collect();
    let how = match format {
        CallFormat::Hermes => {
            "For each function call, return a json object with function name and arguments within \
             <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": \"<function-name>\", \"arguments\": \
             <args-json-object>}\n</tool_call>"
        }
        CallFormat::Mistral => {
            "To call functions, write [TOOL_CALLS] followed by a json list of calls:\n\
             [TOOL_CALLS][{\"name\": \"<function-name>\", \"arguments\": <args-json-object>}]"
        }
        CallFormat::Llama3Json => {
            "To call a function, respond with only a json object of the form:\n\
             {\"name\": \"<function-name>\", \"parameters\": <args-json-object>}"
        }
    };
    format!(
        "You may call one or more functions to assist with the user query. You are provided with function \
         signatures within <tools></tools> XML tags:\n<tools>\n{}\n</tools>\n\n{how}",
        lines.join("\n"),
    )
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

    #[test]
    fn the_prompt_lists_tools_one_per_line_with_sorted_keys() {
        let tool = ToolDef {
            name: "f".into(),
            description: "Does f.".into(),
            parameters: json!({"type": "object", "properties": {"z": {}, "a": {}}}),
        };
        let prompt = tools_prompt(&[tool], CallFormat::Hermes);
        assert!(prompt.contains(
            "<tools>\n{\"function\":{\"description\":\"Does f.\",\"name\":\"f\",\"parameters\":{\"properties\":{\"a\":{},\"z\":{}},\"type\":\"object\"}},\"type\":\"function\"}\n</tools>"
        ), "{prompt}");
        assert!(
            prompt.contains(
                "<tool_call>\n{\"name\": \"<function-name>\", \"arguments\": <args-json-object>}\n</tool_call>"
            ),
            "{prompt}"
        );
    }
}
