//! Call envelopes: the fixed text around each tool call, per model family.
//! A chat template that writes tool calls in its own form gets that form
//! ([`CallFormat::detect`]); a template with none (plain ChatML, like
//! SmolLM2's) gets the Hermes form, which small instruct models follow best.

use super::bare::BareForm;
use super::pieces::{CallFormat, Pieces};
use crate::vocab::{Vocabulary, SPECIAL_TOKEN_MARKER};

/// The byte strings of one envelope, resolved against a vocabulary (an opener
/// that is a special token there is spelled with the special-token marker),
/// and the bare forms its family also writes calls in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The template's strict form.
    pub(crate) pieces: Pieces,
    /// The forms this family also writes calls in without the opener (auto mode).
    pub(crate) bare: Vec<BareForm>,
}

impl Envelope {
    /// The envelope of `format`, its opener spelled as text.
    pub fn new(format: CallFormat) -> Self {
        Self {
            pieces: Pieces::strict(format),
            bare: BareForm::of(format),
        }
    }

    /// The pieces of form `form`: 0 is this envelope's, `k` its bare form `k - 1`'s.
    pub(crate) fn form(&self, form: u8) -> &Pieces {
        match form {
            0 => &self.pieces,
            k => &self.bare[k as usize - 1].pieces,
        }
    }

    /// No envelope: the response is one bare JSON value (response formats).
    pub(crate) fn bare_value() -> Self {
        Self {
            pieces: Pieces::none(CallFormat::Hermes, "", ""),
            bare: Vec::new(),
        }
    }

    /// The envelope of `format` for `vocab`'s tokenizer: an opener that is a
    /// special token there is read as that token (the marker and its text).
    pub fn for_vocabulary(format: CallFormat, vocab: &Vocabulary) -> Self {
        let envelope = Self::new(format);
        let special = [&[SPECIAL_TOKEN_MARKER], envelope.pieces.opener_text.as_bytes()].concat();
        let is_special = vocab.has_token_bytes(&special);
        envelope.with_special_opener(is_special)
    }

    /// This envelope with its opener read as a special token (when `is_special`):
    /// the marker followed by the opener's text.
    pub fn with_special_opener(self, is_special: bool) -> Self {
        Self {
            pieces: self.pieces.with_special_opener(is_special),
            ..self
        }
    }

    /// The family.
    pub fn format(&self) -> CallFormat {
        self.pieces.format
    }

    /// The opener as text.
    pub fn opener_text(&self) -> &str {
        &self.pieces.opener_text
    }

    /// The text that starts a call up to its name (opener and name intro).
    pub fn call_start_text(&self) -> String {
        format!(
            "{}{}",
            self.pieces.opener_text,
            String::from_utf8_lossy(&self.pieces.name_intro)
        )
    }

    /// `calls` (name, arguments' JSON text) written exactly as this envelope
    /// frames them, as the model would have: for re-rendering an earlier
    /// turn's calls in a prompt (the arguments as given, byte for byte).
    pub fn render_calls(&self, calls: &[(&str, &str)]) -> String {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let pieces = &self.pieces;
        let mut out = String::new();
        for (i, (name, arguments)) in calls.iter().enumerate() {
            let intro = match (&pieces.separator, i) {
                (Some(separator), 1..) => text(separator),
                _ => format!("{}{}", pieces.opener_text, text(&pieces.name_intro)),
            };
            let quoted = serde_json::Value::String(name.to_string()).to_string();
            let name = &quoted[1..quoted.len() - 1];
            out.push_str(&format!(
                "{intro}{name}\"{}{arguments}{}",
                text(&pieces.args_intro),
                text(&pieces.call_end)
            ));
        }
        if !calls.is_empty() {
            out.push_str(&text(&pieces.section_end));
        }
        out
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
        let envelope = Pieces {
            opener: b"abab!".to_vec(),
            ..Pieces::strict(CallFormat::Hermes)
        };
        let run = |text: &[u8]| text.iter().fold(0, |m, &b| envelope.opener_progress(m, b));
        assert_eq!(run(b"abab"), 4);
        assert_eq!(run(b"ababa"), 3, "`aba` is still an opener prefix");
        assert_eq!(run(b"abababab!"), 5);
        assert_eq!(run(b"abx"), 0);
        let hermes = Pieces::strict(CallFormat::Hermes);
        let run = |text: &[u8]| text.iter().fold(0, |m, &b| hermes.opener_progress(m, b));
        assert_eq!(run(b"<tool<tool_call>"), 11);
        assert_eq!(run(b"<<"), 1);
    }
}
