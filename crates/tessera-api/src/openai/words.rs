//! The wire's closed sets of words (roles, tool-choice modes, part and format
//! types) as enums, and the request fields that are a word or an object, or a
//! string or a list. Each is parsed while the body is read, so an unknown
//! word is refused with its path (`messages[2].role`) and nothing past this
//! layer matches strings.

use super::wire::{AllowedToolSpec, AllowedTools, ContentPartText, NamedFunction};
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

wire_words! {
    /// Who wrote a message.
    pub enum Role ("role") {
        /// Instructions.
        System = "system",
        /// Instructions from the developer (read as `system`).
        Developer = "developer",
        /// The user.
        User = "user",
        /// The model, possibly with calls.
        Assistant = "assistant",
        /// A tool's result.
        Tool = "tool",
    }
}

wire_words! {
    /// Whether the model may, must or must not call a tool.
    pub enum ToolChoiceMode ("mode") {
        /// No calls.
        None = "none",
        /// Text or calls, as the model chooses.
        Auto = "auto",
        /// At least one call.
        Required = "required",
    }
}

wire_words! {
    /// The object forms of `tool_choice`.
    pub enum ToolChoiceKind ("tool_choice type") {
        /// One named function (or family).
        Function = "function",
        /// A set of allowed tools with a mode.
        AllowedTools = "allowed_tools",
    }
}

wire_words! {
    /// A tool's type: only functions exist.
    pub enum ToolKind ("tool type") {
        /// A function tool.
        Function = "function",
    }
}

wire_words! {
    /// A content part's type: only text is supported.
    pub enum ContentPartKind ("content part type") {
        /// A text part.
        Text = "text",
    }
}

wire_words! {
    /// `response_format.type`.
    pub enum ResponseFormatKind ("response format") {
        /// Free text.
        Text = "text",
        /// Any JSON object.
        JsonObject = "json_object",
        /// JSON obeying `json_schema.schema`.
        JsonSchema = "json_schema",
    }
}

/// `tool_choice`: a mode word or an object.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ToolChoiceSpec {
    /// `none`, `auto` or `required`.
    Mode(ToolChoiceMode),
    /// `{"type": "function", "function": {"name": …}}` or an allowed set,
    /// nested (`{"type": "allowed_tools", "allowed_tools": {"mode": …, "tools": […]}}`)
    /// or flat (`{"type": "allowed_tools", "mode": …, "tools": […]}`).
    Object(ToolChoiceObject),
}

/// The object forms of `tool_choice`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ToolChoiceObject {
    /// `function` or `allowed_tools`.
    #[serde(rename = "type")]
    pub kind: ToolChoiceKind,
    /// For `function`: the name (a trailing `*` names a family).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<NamedFunction>,
    /// For `function`, flat as the Responses API writes it (`{"type": "function", "name": …}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// For `allowed_tools`, nested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<AllowedTools>,
    /// For `allowed_tools`, flat (`{"type": "allowed_tools", "mode": …, "tools": […]}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ToolChoiceMode>,
    /// For `allowed_tools`, flat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<AllowedToolSpec>>,
}

/// Deserialized by the JSON type it meets (not `untagged`, which would hide
/// an inner error's message and path behind "did not match any variant").
impl<'de> Deserialize<'de> for ToolChoiceSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = ToolChoiceSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mode (`none`, `auto`, `required`) or a tool_choice object")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                let word = de::value::StrDeserializer::<E>::new(text);
                ToolChoiceMode::deserialize(word).map(ToolChoiceSpec::Mode)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                ToolChoiceObject::deserialize(MapAccessDeserializer::new(map)).map(ToolChoiceSpec::Object)
            }
        }
        deserializer.deserialize_any(Either)
    }
}

/// A message's content: plain text, or text parts.
pub type Content = crate::words::TextOr<ContentPartText>;

impl crate::words::Listed for ContentPartText {
    const LIST: &'static str = "content parts";
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The path and message a request body's first bad field gets.
    fn error_of<T: serde::de::DeserializeOwned + fmt::Debug>(value: serde_json::Value) -> (String, String) {
        let text = value.to_string();
        let mut deserializer = serde_json::Deserializer::from_str(&text);
        let error = serde_path_to_error::deserialize::<_, T>(&mut deserializer).unwrap_err();
        (error.path().to_string(), error.into_inner().to_string())
    }

    #[test]
    fn words_parse_into_enums_and_unknown_words_are_listed() {
        let mode: ToolChoiceSpec = serde_json::from_value(json!("required")).unwrap();
        assert!(matches!(mode, ToolChoiceSpec::Mode(ToolChoiceMode::Required)));
        let (path, message) = error_of::<ToolChoiceSpec>(json!("sometimes"));
        assert_eq!(path, ".");
        assert!(
            message.starts_with("unknown mode `sometimes` (expected `none`, `auto`, `required`)"),
            "{message}"
        );
        assert_eq!(Role::Developer.as_str(), "developer");
    }

    #[test]
    fn an_error_inside_an_object_or_list_keeps_its_path() {
        let (path, message) = error_of::<ToolChoiceSpec>(
            json!({"type": "allowed_tools", "allowed_tools": {"mode": "often", "tools": []}}),
        );
        assert_eq!(path, "allowed_tools.mode");
        assert!(message.contains("unknown mode `often`"), "{message}");
        let (path, message) = error_of::<Content>(json!([{"type": "text", "text": "a"}, {"type": "image_url"}]));
        assert_eq!(path, "[1].type");
        assert!(
            message.contains("unknown content part type `image_url` (expected `text`)"),
            "{message}"
        );
        let (path, message) = error_of::<Content>(json!([{"type": "text"}]));
        assert_eq!(path, "[0]");
        assert!(message.contains("missing field `text`"), "{message}");
        let (_, message) = error_of::<Content>(json!(7));
        assert!(message.contains("a string or a list of content parts"), "{message}");
    }
}
