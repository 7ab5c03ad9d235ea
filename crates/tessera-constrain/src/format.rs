//! Call envelopes: the fixed text around each tool call, per model family.
//! A chat template that writes tool calls in its own form gets that form
//! ([`CallFormat::detect`]); a template with none (plain ChatML, like
//! SmolLM2's) gets the Hermes form, which small instruct models follow best.

use crate::bare::BareForm;
use crate::{Vocabulary, SPECIAL_TOKEN_MARKER};

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

/// The byte strings of one envelope, resolved against a vocabulary (an opener
/// that is a special token there is spelled with the special-token marker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    format: CallFormat,
    /// The opener as prompt text (what a prefill and the parser use).
    opener_text: String,
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
    /// The forms this family also writes calls in without the opener (auto mode).
    pub(crate) bare: Vec<BareForm>,
}

impl Envelope {
    /// The envelope of `format`, its opener spelled as text.
    pub fn new(format: CallFormat) -> Self {
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
            bare: BareForm::of(format),
        }
    }

    /// The strict pieces of a bare form (no opener: its head is read by [`BareForm`]).
    pub(crate) fn pieces(format: CallFormat, args_intro: &str, call_end: &str, separator: &str) -> Self {
        Self {
            format,
            opener_text: String::new(),
            opener: b"\0".to_vec(),
            name_intro: Vec::new(),
            args_intro: args_intro.as_bytes().to_vec(),
            call_end: call_end.as_bytes().to_vec(),
            separator: Some(separator.as_bytes().to_vec()),
            section_end: Vec::new(),
            bare: Vec::new(),
        }
    }

    /// The pieces of form `form`: 0 is this envelope, `k` its bare form `k - 1`.
    pub(crate) fn form(&self, form: u8) -> &Envelope {
        match form {
            0 => self,
            k => &self.bare[k as usize - 1].pieces,
        }
    }

    /// No envelope: the response is one bare JSON value (response formats).
    pub(crate) fn bare_value() -> Self {
        Self {
            format: CallFormat::Hermes,
            opener_text: String::new(),
            opener: b"\0".to_vec(),
            name_intro: Vec::new(),
            args_intro: Vec::new(),
            call_end: Vec::new(),
            separator: None,
            section_end: Vec::new(),
            bare: Vec::new(),
        }
    }

    /// The envelope of `format` for `vocab`'s tokenizer: an opener that is a
    /// special token there is read as that token (the marker and its text).
    pub fn for_vocabulary(format: CallFormat, vocab: &Vocabulary) -> Self {
        let envelope = Self::new(format);
        let special = [&[SPECIAL_TOKEN_MARKER], envelope.opener_text.as_bytes()].concat();
        let is_special = vocab.has_token_bytes(&special);
        envelope.with_special_opener(is_special)
    }

    /// This envelope with its opener read as a special token (when `is_special`):
    /// the marker followed by the opener's text.
    pub fn with_special_opener(mut self, is_special: bool) -> Self {
        if is_special {
            self.opener = [&[SPECIAL_TOKEN_MARKER], self.opener_text.as_bytes()].concat();
        }
        self
    }

    /// The family.
    pub fn format(&self) -> CallFormat {
        self.format
    }

    /// The opener as text.
    pub fn opener_text(&self) -> &str {
        &self.opener_text
    }

    /// The text that starts a call up to its name (opener and name intro).
    pub fn call_start_text(&self) -> String {
        format!("{}{}", self.opener_text, String::from_utf8_lossy(&self.name_intro))
    }

    /// `calls` (name, arguments' JSON text) written exactly as this envelope
    /// frames them, as the model would have: for re-rendering an earlier
    /// turn's calls in a prompt (the arguments as given, byte for byte).
    pub fn render_calls(&self, calls: &[(&str, &str)]) -> String {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let mut out = String::new();
        for (i, (name, arguments)) in calls.iter().enumerate() {
            let intro = match (&self.separator, i) {
                (Some(separator), 1..) => text(separator),
                _ => format!("{}{}", self.opener_text, text(&self.name_intro)),
            };
            let quoted = serde_json::Value::String(name.to_string()).to_string();
            let name = &quoted[1..quoted.len() - 1];
            out.push_str(&format!(
                "{intro}{name}\"{}{arguments}{}",
                text(&self.args_intro),
                text(&self.call_end)
            ));
        }
        if !calls.is_empty() {
            out.push_str(&text(&self.section_end));
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_recognised_by_their_call_syntax() {
        let mistral = "{%- if message.tool_calls %}{{ '[TOOL_CALLS][' }}{% endif %}";
        let llama = "{%- if message.role == 'ipython' %}{{ '\"parameters\": ' }}{% endif %}";
        let hermes = "{{ '<tool_call>\\n' + tool_call | tojson + '\\n</tool_call>' }}";
        assert_eq!(CallFormat::detect(mistral), CallFormat::Mistral);
        assert_eq!(CallFormat::detect(llama), CallFormat::Llama3Json);
        assert_eq!(CallFormat::detect(hermes), CallFormat::Hermes);
        assert_eq!(CallFormat::detect("<|im_start|>{{ m.content }}"), CallFormat::Hermes);
    }

    #[test]
    fn earlier_calls_render_in_each_envelope() {
        let calls = [("f", "{\"x\":1}"), ("g", "{}")];
        assert_eq!(
            Envelope::new(CallFormat::Hermes).render_calls(&calls),
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\":1}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"
        );
        assert_eq!(
            Envelope::new(CallFormat::Mistral).render_calls(&calls),
            "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"x\":1}}, {\"name\": \"g\", \"arguments\": {}}]"
        );
        assert_eq!(
            Envelope::new(CallFormat::Llama3Json).render_calls(&calls[..1]),
            "{\"name\": \"f\", \"parameters\": {\"x\":1}}"
        );
        assert_eq!(Envelope::new(CallFormat::Hermes).render_calls(&[]), "");
    }

    #[test]
    fn a_failed_opener_match_falls_back_to_the_longest_prefix_still_matching() {
        let envelope = Envelope {
            opener: b"abab!".to_vec(),
            ..Envelope::new(CallFormat::Hermes)
        };
        let run = |text: &[u8]| text.iter().fold(0, |m, &b| envelope.opener_progress(m, b));
        assert_eq!(run(b"abab"), 4);
        assert_eq!(run(b"ababa"), 3, "`aba` is still an opener prefix");
        assert_eq!(run(b"abababab!"), 5);
        assert_eq!(run(b"abx"), 0);
        let hermes = Envelope::new(CallFormat::Hermes);
        let run = |text: &[u8]| text.iter().fold(0, |m, &b| hermes.opener_progress(m, b));
        assert_eq!(run(b"<tool<tool_call>"), 11);
        assert_eq!(run(b"<<"), 1);
    }
}
