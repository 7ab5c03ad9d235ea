//! The tool section a prompt gets when the chat template has no tool
//! support of its own: what the model reads about the tools and how to call
//! them in its family's envelope.

use serde_json::json;
use tessera_constrain::{CallFormat, ToolDef};

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
