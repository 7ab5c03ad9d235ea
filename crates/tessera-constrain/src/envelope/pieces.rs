//! The lowest floor of the envelope: a family of call envelopes
//! ([`CallFormat`]) and the byte strings one form of it puts around calls
//! ([`Pieces`]), which the strict envelope and each bare form have alike.

use crate::vocab::SPECIAL_TOKEN_MARKER;

/// A family of call envelopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallFormat {
    /// `<tool_call>\n{"name": "…", "arguments": {…}}\n</tool_call>`, one block per call.
    Hermes,
    /// `[TOOL_CALLS][{"name": "…", "arguments": {…}}, …]` (Mistral v3 templates).
    Mistral,
    /// `{"name": "…", "parameters": {…}}`, one call (Llama 3.1 JSON tool calling).
    Llama3Json,
}

impl CallFormat {
    /// The form a chat template writes tool calls in: Mistral when it emits
    /// `[TOOL_CALLS]`, Llama 3.1 JSON when it speaks of `"parameters"` under
    /// `<|python_tag|>`/`ipython` turns, Hermes otherwise (including no tool support).
    pub fn detect(template_source: &str) -> Self {
        if template_source.contains("[TOOL_CALLS]") {
            CallFormat::Mistral
        } else if template_source.contains("<tool_call>") {
            CallFormat::Hermes
        } else if template_source.contains("ipython") && template_source.contains("parameters") {
            CallFormat::Llama3Json
        } else {
            CallFormat::Hermes
        }
    }

    /// A short name for logs and `--help`.
    pub fn name(self) -> &'static str {
        match self {
            CallFormat::Hermes => "hermes",
            CallFormat::Mistral => "mistral",
            CallFormat::Llama3Json => "llama3-json",
        }
    }

    /// The key that holds a call's arguments.
    pub fn arguments_key(self) -> &'static str {
        match self {
            CallFormat::Llama3Json => "parameters",
            CallFormat::Hermes | CallFormat::Mistral => "arguments",
        }
    }
}

/// The byte strings of one form of an envelope (the template's strict form
/// or a bare form); an opener that is a special token in the vocabulary is
/// spelled with the special-token marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pieces {
    pub(crate) format: CallFormat,
    /// The opener as prompt text (what a prefill and the parser use).
    pub(crate) opener_text: String,
    /// The opener as the automaton reads it.
    pub(crate) opener: Vec<u8>,
    /// After the opener, up to the first name.
    pub(crate) name_intro: Vec<u8>,
    /// After the name's closing quote, up to the arguments.
    pub(crate) args_intro: Vec<u8>,
    /// After the arguments' closing brace.
    pub(crate) call_end: Vec<u8>,
    /// Between two calls, up to the next name; `None` when a response holds one call.
    pub(crate) separator: Option<Vec<u8>>,
    /// After the last call (may be empty).
    pub(crate) section_end: Vec<u8>,
}

impl Pieces {
    /// The strict form of `format`'s envelope, its opener spelled as text.
    pub(crate) fn strict(format: CallFormat) -> Self {
        let (opener_text, name_intro, args_intro, call_end, separator, section_end): (
            &str,
            &str,
            &str,
            &str,
            Option<&str>,
            &str,
        ) = match format {
            CallFormat::Hermes => (
                "<tool_call>",
                "\n{\"name\": \"",
                ", \"arguments\": ",
                "}\n</tool_call>",
                Some("\n<tool_call>\n{\"name\": \""),
                "",
            ),
            CallFormat::Mistral => (
                "[TOOL_CALLS]",
                "[{\"name\": \"",
                ", \"arguments\": ",
                "}",
                Some(", {\"name\": \""),
                "]",
            ),
            CallFormat::Llama3Json => ("{\"name\": \"", "", ", \"parameters\": ", "}", None, ""),
        };
        Self {
            format,
            opener_text: opener_text.to_string(),
            opener: opener_text.as_bytes().to_vec(),
            name_intro: name_intro.as_bytes().to_vec(),
            args_intro: args_intro.as_bytes().to_vec(),
            call_end: call_end.as_bytes().to_vec(),
            separator: separator.map(|s| s.as_bytes().to_vec()),
            section_end: section_end.as_bytes().to_vec(),
        }
    }

    /// The strict pieces of a bare form (no opener: its head is read by the bare form).
    pub(crate) fn bare(format: CallFormat, args_intro: &str, call_end: &str, separator: &str) -> Self {
        Self {
            separator: Some(separator.as_bytes().to_vec()),
            ..Self::none(format, args_intro, call_end)
        }
    }

    /// No opener and no separator: only `args_intro` and `call_end`.
    pub(crate) fn none(format: CallFormat, args_intro: &str, call_end: &str) -> Self {
        Self {
            format,
            opener_text: String::new(),
            opener: b"\0".to_vec(),
            name_intro: Vec::new(),
            args_intro: args_intro.as_bytes().to_vec(),
            call_end: call_end.as_bytes().to_vec(),
            separator: None,
            section_end: Vec::new(),
        }
    }

    /// These pieces with the opener read as a special token (when `is_special`):
    /// the marker followed by the opener's text.
    pub(crate) fn with_special_opener(mut self, is_special: bool) -> Self {
        if is_special {
            self.opener = [&[SPECIAL_TOKEN_MARKER], self.opener_text.as_bytes()].concat();
        }
        self
    }

    /// How many opener bytes match after `matched` matched bytes and then `byte`
    /// (a failed match falls back to the longest opener prefix still matching).
    pub(crate) fn opener_progress(&self, matched: usize, byte: u8) -> usize {
        let opener = &self.opener;
        if opener[matched] == byte {
            return matched + 1;
        }
        // Longest proper suffix of `opener[..matched] + byte` that is an opener prefix.
        (1..=matched)
            .rev()
            .find(|&len| {
                let start = matched + 1 - len;
                opener[start..matched] == opener[..len - 1] && opener[len - 1] == byte
            })
            .unwrap_or(0)
    }
}
