//! Around the automaton: the tool section a prompt gets when the chat
//! template has no tool support of its own, and the parser that turns a
//! response back into free text plus typed calls.

use crate::call::{CLOSER, NAME_INTRO, OPENER};
use crate::ToolDef;
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

/// Split `text` into free text and the calls in its `<tool_call>` blocks. The
/// JSON of a call is read as JSON, so a string argument may contain `</tool_call>`.
pub fn parse_response(text: &str) -> Result<ParsedResponse, CallParseError> {
    let end_tag = &CLOSER[2..]; // "</tool_call>"
    let mut parsed = ParsedResponse::default();
    let mut content = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPENER) {
        content.push_str(&rest[..start]);
        let body = &rest[start + OPENER.len()..];
        let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
        let value = match values.next() {
            Some(Ok(value)) => value,
            Some(Err(error)) => return Err(CallParseError(format!("{error} in {body:?}"))),
            None => return Err(CallParseError("a call has no JSON after <tool_call>".into())),
        };
        let after = body[values.byte_offset()..].trim_start();
        rest = after
            .strip_prefix(end_tag)
            .ok_or_else(|| CallParseError("a call is not closed by </tool_call>".into()))?;
        parsed.calls.push(call_of(value)?);
    }
    content.push_str(rest);
    parsed.content = content.trim().to_string();
    Ok(parsed)
}

fn call_of(value: Value) -> Result<ToolCall, CallParseError> {
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| CallParseError("the call has no string `name`".into()))?;
    let arguments = value
        .get("arguments")
        .filter(|a| a.is_object())
        .ok_or_else(|| CallParseError(format!("the call to `{name}` has no `arguments` object")))?;
    Ok(ToolCall {
        name: name.to_string(),
        // serde_json's map keeps keys sorted: this is the canonical form.
        arguments: arguments.to_string(),
    })
}

/// The system-prompt section describing `tools` and the call format (Hermes
/// style), for templates that do not render tools themselves. Deterministic:
/// one tool per line, keys sorted, so the same tools give the same tokens.
pub fn tools_prompt(tools: &[ToolDef]) -> String {
    let lines: Vec<String> = tools
        .iter()
        .map(|tool| {
            json!({"type": "function", "function": {
                "name": tool.name, "description": tool.description, "parameters": tool.parameters,
            }})
            .to_string()
        })
        .collect();
    let intro = NAME_INTRO.trim_start_matches('\n');
    format!(
        "You may call one or more functions to assist with the user query. You are provided with function \
         signatures within <tools></tools> XML tags:\n<tools>\n{}\n</tools>\n\nFor each function call, return a \
         json object with function name and arguments within {OPENER}{} XML tags:\n{OPENER}\n{intro}<function-name>\", \
         \"arguments\": <args-json-object>}}\n{}",
        lines.join("\n"),
        &CLOSER[2..],
        &CLOSER[2..],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_text_and_calls_with_canonical_arguments() {
        let text = "Looking.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"b\": 1, \"a\": [true]}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
        let parsed = parse_response(text).unwrap();
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
        assert_eq!(parse_response("no calls").unwrap().calls, vec![]);
        assert!(parse_response("<tool_call>\n{\"name\": 1}\n</tool_call>").is_err());
        assert!(parse_response("<tool_call>\n{").is_err());
        // A string argument may contain the closing tag; the JSON decides where the call ends.
        let tricky = "<tool_call>\n{\"name\": \"m\", \"arguments\": {\"e\": \"1}}</tool_call> x\"}}\n</tool_call>";
        let parsed = parse_response(tricky).unwrap();
        assert_eq!(parsed.calls[0].arguments, r#"{"e":"1}}</tool_call> x"}"#);
        assert_eq!(parsed.content, "");
    }

    #[test]
    fn the_prompt_lists_tools_one_per_line_with_sorted_keys() {
        let tool = ToolDef {
            name: "f".into(),
            description: "Does f.".into(),
            parameters: json!({"type": "object", "properties": {"z": {}, "a": {}}}),
        };
        let prompt = tools_prompt(&[tool]);
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
