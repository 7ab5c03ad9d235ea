//! `tool_choice` in every form a client or a gateway sends, read into the
//! constraint's [`ToolChoice`]:
//! - a mode: `none`, `auto`, `required`;
//! - one function: `{"type": "function", "function": {"name": N}}`;
//! - an allowed set, nested as Chat Completions writes it
//!   (`{"type": "allowed_tools", "allowed_tools": {"mode": M, "tools": [...]}}`) or flat as the
//!   Responses API and SMG write it (`{"type": "allowed_tools", "mode": M, "tools": [...]}`),
//!   each tool a bare name, `{"type": "function", "function": {"name": N}}` or
//!   `{"type": "function", "name": N}`; a name ending in `*` is a family (`browser_*`).
//!
//! `x_tessera_tool_choice`, when sent, replaces `tool_choice`: a gateway that
//! refuses families or unknown forms in `tool_choice` (SMG checks every name
//! against `tools`) forwards an unknown top-level field unchanged.

use crate::api::{AllowedToolSpec, ToolChoiceKind, ToolChoiceMode, ToolChoiceObject, ToolChoiceSpec};
use crate::OpenAiError;
use tessera_constrain::{AllowedTool, CallMode, ToolChoice};

/// The extension field that carries a choice past a gateway.
pub const EXTENSION_FIELD: &str = "x_tessera_tool_choice";

/// A choice with every tool allowed.
pub(crate) fn tool_choice(mode: CallMode, allowed: Option<Vec<AllowedTool>>) -> ToolChoice {
    ToolChoice {
        mode,
        allowed,
        parallel: true,
    }
}

/// `spec`, sent in the request field `field` (named in errors).
pub(crate) fn parse_choice(spec: &ToolChoiceSpec, field: &str) -> Result<ToolChoice, OpenAiError> {
    match spec {
        ToolChoiceSpec::Mode(mode) => Ok(tool_choice(call_mode(*mode), None)),
        ToolChoiceSpec::Object(object) => parse_object(object, field),
    }
}

fn call_mode(mode: ToolChoiceMode) -> CallMode {
    match mode {
        ToolChoiceMode::None => CallMode::None,
        ToolChoiceMode::Auto => CallMode::Auto,
        ToolChoiceMode::Required => CallMode::Required,
    }
}

fn parse_object(object: &ToolChoiceObject, field: &str) -> Result<ToolChoice, OpenAiError> {
    match object.kind {
        ToolChoiceKind::Function => {
            let function = object.function.as_ref().ok_or_else(|| {
                OpenAiError::invalid(format!("{field}.function"), "a named choice needs `function.name`")
            })?;
            Ok(tool_choice(
                CallMode::Required,
                Some(vec![AllowedTool::parse(&function.name)]),
            ))
        }
        ToolChoiceKind::AllowedTools => match (&object.allowed_tools, object.mode, &object.tools) {
            (Some(nested), _, _) => allowed_set(nested.mode, &nested.tools, &format!("{field}.allowed_tools")),
            (None, Some(mode), Some(tools)) => allowed_set(mode, tools, field),
            (None, _, _) => Err(OpenAiError::invalid(
                field,
                "an allowed_tools choice needs `allowed_tools` (or, flat, `mode` and `tools`)",
            )),
        },
    }
}

/// An allowed set: `mode` and `tools` sit under `path`.
fn allowed_set(mode: ToolChoiceMode, tools: &[AllowedToolSpec], path: &str) -> Result<ToolChoice, OpenAiError> {
    if mode == ToolChoiceMode::None {
        return Err(OpenAiError::invalid(format!("{path}.mode"), "must be auto or required"));
    }
    let names = tools
        .iter()
        .map(|tool| match tool {
            AllowedToolSpec::Name(name) | AllowedToolSpec::Flat { name } => AllowedTool::parse(name),
            AllowedToolSpec::Function { function } => AllowedTool::parse(&function.name),
        })
        .collect();
    Ok(tool_choice(call_mode(mode), Some(names)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn choice(value: serde_json::Value) -> Result<ToolChoice, OpenAiError> {
        parse_choice(&serde_json::from_value(value).unwrap(), "tool_choice")
    }

    fn names(choice: &ToolChoice) -> Vec<String> {
        choice
            .allowed
            .iter()
            .flatten()
            .map(|tool| format!("{tool:?}"))
            .collect()
    }

    #[test]
    fn nested_and_flat_allowed_sets_are_the_same_choice() {
        let nested = choice(json!({"type": "allowed_tools", "allowed_tools": {"mode": "required",
            "tools": ["fs_read", {"type": "function", "function": {"name": "browser_*"}}]}}))
        .unwrap();
        let flat = choice(json!({"type": "allowed_tools", "mode": "required",
            "tools": [{"type": "function", "name": "fs_read"}, {"type": "function", "name": "browser_*"}]}))
        .unwrap();
        assert_eq!(nested.mode, CallMode::Required);
        assert_eq!(flat.mode, CallMode::Required);
        assert_eq!(names(&nested), names(&flat));
        assert_eq!(names(&flat).len(), 2);
    }

    #[test]
    fn a_flat_set_without_its_fields_names_them() {
        let Err(OpenAiError::Invalid(invalid)) = choice(json!({"type": "allowed_tools", "mode": "auto"})) else {
            panic!("a flat set needs tools");
        };
        assert_eq!(invalid.param, "tool_choice");
        assert!(invalid.message.contains("`mode` and `tools`"), "{}", invalid.message);
        let Err(OpenAiError::Invalid(invalid)) =
            choice(json!({"type": "allowed_tools", "mode": "none", "tools": ["a"]}))
        else {
            panic!("mode none is refused");
        };
        assert_eq!(invalid.param, "tool_choice.mode");
    }
}
