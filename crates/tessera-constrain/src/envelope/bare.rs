//! Bare calls: the forms a model family writes a call in when it leaves out
//! its template's opener. Qwen2.5, asked for the weather with a `get_weather`
//! tool, answers `{"name": "get_weather", "arguments": {"city": "Paris"}}` or
//! the same object, pretty-printed, in a ```` ```json ```` fence, with no
//! `<tool_call>` around it.
//!
//! Such text is a call only where a call can start (the beginning of the
//! reply; after a bare call, through its form's separator), and only once its
//! head is complete: the name is an allowed tool's and the arguments' `{`
//! follows `"arguments":`. Until then it is free text and nothing is masked,
//! so JSON that belongs to an answer (`{"name": "Bob", …}`, a config sample)
//! stays text. From the `{` on, the call is masked like any other. The same
//! rule is applied to bytes by the automaton ([`crate::call`]) and to text by
//! the parsers ([`head_match`]), so both split a response the same way.

use super::pieces::{CallFormat, Pieces};

/// One element of a bare call's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadItem {
    /// These bytes exactly.
    Lit(&'static [u8]),
    /// Any run of JSON whitespace, possibly empty.
    Ws,
    /// An allowed tool's name and its closing quote.
    Name,
}

use HeadItem::{Lit, Name, Ws};

/// `{"name": "…", "arguments": ` with JSON whitespace anywhere between tokens.
const OBJECT_HEAD: [HeadItem; 15] = [
    Lit(b"{"),
    Ws,
    Lit(b"\"name\""),
    Ws,
    Lit(b":"),
    Ws,
    Lit(b"\""),
    Name,
    Ws,
    Lit(b","),
    Ws,
    Lit(b"\"arguments\""),
    Ws,
    Lit(b":"),
    Ws,
];

/// A bare call: leading whitespace, then the object head.
static BARE_JSON: [HeadItem; 16] = {
    let mut head = [Ws; 16];
    let mut i = 0;
    while i < OBJECT_HEAD.len() {
        head[i + 1] = OBJECT_HEAD[i];
        i += 1;
    }
    head
};

/// A call in a Markdown JSON fence.
static FENCED_JSON: [HeadItem; 18] = {
    let mut head = [Ws; 18];
    head[1] = Lit(b"```json");
    let mut i = 0;
    while i < OBJECT_HEAD.len() {
        head[i + 3] = OBJECT_HEAD[i];
        i += 1;
    }
    head
};

/// One bare form: its head (read leniently, unmasked) and the strict pieces
/// that follow once it is a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BareForm {
    /// Starts with [`HeadItem::Ws`], then a literal whose first byte tells the forms apart.
    pub head: &'static [HeadItem],
    /// Arguments intro (after a separator), call end, separator.
    pub pieces: Pieces,
}

impl BareForm {
    /// The bare forms of `format`'s family. Hermes templates (Qwen2.5, Hermes)
    /// are answered in bare and fenced JSON; the other families write their
    /// opener (Mistral) or have no opener to leave out (Llama 3.1 JSON).
    pub fn of(format: CallFormat) -> Vec<BareForm> {
        const ARGS: &str = ", \"arguments\": ";
        match format {
            CallFormat::Hermes => vec![
                BareForm {
                    head: &BARE_JSON,
                    pieces: Pieces::bare(format, ARGS, "}", "\n{\"name\": \""),
                },
                BareForm {
                    head: &FENCED_JSON,
                    pieces: Pieces::bare(format, ARGS, "}\n```", "\n\n```json\n{\"name\": \""),
                },
            ],
            CallFormat::Mistral | CallFormat::Llama3Json => Vec::new(),
        }
    }

    /// The form (1-based, as [`super::format::Envelope::form`] numbers them) whose first literal starts with `byte`.
    pub fn starting_with(forms: &[BareForm], byte: u8) -> Option<u8> {
        forms
            .iter()
            .position(|form| matches!(form.head[1], Lit(bytes) if bytes[0] == byte))
            .map(|index| index as u8 + 1)
    }
}

/// JSON whitespace.
pub(crate) fn is_json_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\n' | b'\r' | b'\t')
}

/// How a text at a call-start position begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeadMatch {
    /// Not a bare call: free text.
    No,
    /// Could still become one: more text is needed.
    Partial,
    /// A call to `name` in form `form` (1-based), whose arguments start at byte `args_at`.
    Call { form: u8, name: String, args_at: usize },
}

/// Whether `text` (at a position where a call can start) begins with a bare
/// call to one of `names`.
pub(crate) fn head_match(forms: &[BareForm], names: &[String], text: &str) -> HeadMatch {
    let mut partial = false;
    for (index, form) in forms.iter().enumerate() {
        match form_match(form.head, names, text) {
            Some(Some((name, args_at))) => {
                return HeadMatch::Call {
                    form: index as u8 + 1,
                    name,
                    args_at,
                }
            }
            Some(None) => partial = true,
            None => {}
        }
    }
    if partial {
        HeadMatch::Partial
    } else {
        HeadMatch::No
    }
}

/// `None`: no match; `Some(None)`: a prefix of a match; `Some(Some((name, args_at)))`: a match.
fn form_match(head: &[HeadItem], names: &[String], text: &str) -> Option<Option<(String, usize)>> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let mut name = String::new();
    for item in head {
        match *item {
            Ws => {
                while bytes.get(at).copied().is_some_and(is_json_space) {
                    at += 1;
                }
            }
            Lit(literal) => {
                let available = literal.len().min(bytes.len() - at);
                if bytes[at..at + available] != literal[..available] {
                    return None;
                }
                if available < literal.len() {
                    return Some(None);
                }
                at += available;
            }
            Name => {
                let rest = &text[at..];
                let Some(end) = rest.find('"') else {
                    return names.iter().any(|n| n.starts_with(rest)).then_some(None);
                };
                if !names.iter().any(|n| *n == rest[..end]) {
                    return None;
                }
                name = rest[..end].to_string();
                at += end + 1;
            }
        }
    }
    match bytes.get(at) {
        None => Some(None),
        Some(b'{') => Some(Some((name, at))),
        Some(_) => None,
    }
}

/// `text` after `expected`, reading whitespace before each of its bytes
/// leniently (an unconstrained model may indent a closing brace); `None` when it differs.
pub(crate) fn strip_leniently<'t>(text: &'t str, expected: &[u8]) -> Option<&'t str> {
    let mut rest = text;
    for &byte in expected {
        if !is_json_space(byte) {
            rest = rest.trim_start_matches(|c: char| c.is_ascii() && is_json_space(c as u8));
        }
        rest = rest.strip_prefix(byte as char)?;
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["get_weather".into(), "get_time".into()]
    }

    fn hermes() -> Vec<BareForm> {
        BareForm::of(CallFormat::Hermes)
    }

    #[test]
    fn forms_differ_in_their_first_byte() {
        let forms = hermes();
        assert_eq!(BareForm::starting_with(&forms, b'{'), Some(1));
        assert_eq!(BareForm::starting_with(&forms, b'`'), Some(2));
        assert_eq!(BareForm::starting_with(&forms, b'x'), None);
        assert!(forms.iter().all(|f| f.head[0] == Ws && matches!(f.head[1], Lit(_))));
    }

    #[test]
    fn heads_are_calls_only_with_an_allowed_name_and_arguments() {
        let forms = hermes();
        let call = |text: &str| head_match(&forms, &names(), text);
        let bare = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}";
        assert_eq!(
            call(bare),
            HeadMatch::Call {
                form: 1,
                name: "get_weather".into(),
                args_at: 37
            }
        );
        let pretty =
            "```json\n{\n    \"name\": \"get_time\",\n    \"arguments\": {\n        \"tz\": \"UTC\"\n    }\n}\n```";
        assert!(matches!(call(pretty), HeadMatch::Call { form: 2, .. }));
        for partial in [
            "",
            "\n",
            "{",
            "{\"na",
            "{\"name\": \"get_",
            "{\"name\": \"get_time\", ",
            "``",
            "```json\n{",
        ] {
            assert_eq!(call(partial), HeadMatch::Partial, "{partial:?}");
        }
        for text in [
            "Sure: {\"name\": \"get_weather\"",
            "{\"name\": \"Bob\", \"age\": 3}",
            "{\"name\": \"get_weather\", \"version\": \"1\"}",
            "{\"name\": \"get_weather\", \"arguments\": \"Paris\"}",
            "```python\nprint(1)\n```",
            "{\"name\": \"get_weatherman\"",
        ] {
            assert_eq!(call(text), HeadMatch::No, "{text:?}");
        }
    }

    #[test]
    fn closing_text_may_be_indented() {
        assert_eq!(strip_leniently("\n}\n```\nok", b"}\n```"), Some("\nok"));
        assert_eq!(strip_leniently("}", b"}"), Some(""));
        assert_eq!(strip_leniently("]", b"}"), None);
    }
}
