//! Incremental parsing of a response as it streams: free text as it comes
//! (holding back what may be the start of an opener), then each call's name
//! once it is complete and its arguments' JSON text piece by piece. The
//! envelope text around calls is dropped. Fed a constrained response, the
//! concatenated pieces equal what [`parse_response`](crate::parse_response)
//! finds in the whole text (arguments as written, not yet canonical).

use super::bare::{head_match, BareForm, HeadMatch};

use super::pieces::{CallFormat, Pieces};
use super::syntax::CallSyntax;
use std::sync::Arc;

/// One piece of a streamed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamPiece {
    /// Free text.
    Content(String),
    /// Call number `index` (from 0) to the tool `name` starts.
    CallStart {
        /// Position of the call in the response.
        index: usize,
        /// The tool.
        name: String,
    },
    /// More of call `index`'s arguments JSON text.
    Arguments {
        /// Position of the call in the response.
        index: usize,
        /// The next piece of the arguments' text.
        text: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Free text.
    Text,
    /// Inside the envelope, before a call's name.
    BeforeName,
    /// Inside the name.
    Name,
    /// After the name, before the arguments' `{`.
    BeforeArguments,
    /// Inside the arguments: nesting depth, inside a string, after a backslash.
    Arguments { depth: u32, in_string: bool, escaped: bool },
    /// Between calls or after the last one (envelope text).
    AfterCall,
}

impl At {
    /// At the arguments' opening bracket: nothing open yet.
    const ARGUMENTS_START: At = At::Arguments {
        depth: 0,
        in_string: false,
        escaped: false,
    };
}

/// Streams one response's pieces.
#[derive(Debug, Clone)]
pub struct CallStreamParser {
    opener: String,
    name_key: &'static str,
    arguments_key: &'static str,
    at: At,
    /// Unconsumed text: a possible opener start, or envelope text being matched.
    pending: String,
    name: String,
    calls: usize,
    /// The bare forms in effect and the names they may call.
    bare_forms: Vec<BareForm>,
    bare_names: Arc<[String]>,
    /// Whether a bare call may start here (the reply's start).
    bare_here: bool,
}

impl CallSyntax {
    /// A streaming parser for responses in this syntax that start after `prefill`.
    pub fn stream_parser(&self, prefill: &str) -> CallStreamParser {
        CallStreamParser::with_syntax(self).prefilled(prefill)
    }
}

impl CallStreamParser {
    /// A parser for responses in `format`'s envelope (no bare calls).
    pub fn new(format: CallFormat) -> Self {
        Self::with_syntax(&CallSyntax::new(format))
    }

    /// A parser for responses in `syntax` (bare calls included).
    pub(crate) fn with_syntax(syntax: &CallSyntax) -> Self {
        let format = syntax.format();
        let (bare_forms, names) = syntax.bare();
        // The automaton's opener exactly (`{"name":"x"` without the space is free text).
        let opener = Pieces::strict(format).opener_text;
        Self {
            opener,
            name_key: "\"name\"",
            arguments_key: match format.arguments_key() {
                "parameters" => "\"parameters\"",
                _ => "\"arguments\"",
            },
            at: At::Text,
            pending: String::new(),
            name: String::new(),
            calls: 0,
            bare_here: !bare_forms.is_empty(),
            bare_forms,
            bare_names: names.into(),
        }
    }

    /// A parser that starts inside a call's envelope (the response's start
    /// was prefilled): `prefill` is that text, as the prompt ended with it.
    pub fn after_prefill(format: CallFormat, prefill: &str) -> Self {
        Self::new(format).prefilled(prefill)
    }

    /// This parser, past `prefill` (the start of a required call, or nothing).
    pub fn prefilled(mut self, prefill: &str) -> Self {
        // The prefill holds the opener; its pieces are envelope, never content.
        let _ = self.push(prefill);
        self
    }

    /// Calls started so far.
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Feed the next text; returns the pieces it completes.
    pub fn push(&mut self, text: &str) -> Vec<StreamPiece> {
        let mut pieces = Vec::new();
        self.pending.push_str(text);
        while self.step(&mut pieces) {}
        pieces
    }

    /// The response ended: whatever free text was held back.
    pub fn finish(&mut self) -> Vec<StreamPiece> {
        let rest = std::mem::take(&mut self.pending);
        match self.at {
            At::Text if !rest.is_empty() => vec![StreamPiece::Content(rest)],
            _ => Vec::new(),
        }
    }

    /// Consume what can be consumed of `pending`; false when more text is needed.
    fn step(&mut self, pieces: &mut Vec<StreamPiece>) -> bool {
        match self.at {
            At::Text if self.bare_here => self.bare_head(pieces),
            At::Text => self.text(pieces),
            At::BeforeName | At::AfterCall => self.find_name(),
            At::Name => self.name(pieces),
            At::BeforeArguments => self.find_arguments(),
            At::Arguments { .. } => self.arguments(pieces),
        }
    }

    /// At the reply's start: hold the text while it may be a bare call's head.
    fn bare_head(&mut self, pieces: &mut Vec<StreamPiece>) -> bool {
        match head_match(&self.bare_forms, &self.bare_names, &self.pending) {
            HeadMatch::Partial => false,
            HeadMatch::No => {
                self.bare_here = false;
                true
            }
            HeadMatch::Call { name, args_at, .. } => {
                pieces.push(StreamPiece::CallStart {
                    index: self.calls,
                    name,
                });
                self.calls += 1;
                self.pending.drain(..args_at);
                self.at = At::ARGUMENTS_START;
                true
            }
        }
    }

    fn text(&mut self, pieces: &mut Vec<StreamPiece>) -> bool {
        if let Some(start) = self.pending.find(&self.opener) {
            push_content(pieces, &self.pending[..start]);
            // The Llama form's opener is the start of the call object itself.
            let keep = if self.opener.starts_with('{') {
                start
            } else {
                start + self.opener.len()
            };
            self.pending.drain(..keep);
            self.at = At::BeforeName;
            return true;
        }
        // Hold back a suffix that may be the start of the opener.
        let held = (1..self.opener.len().min(self.pending.len() + 1))
            .rev()
            .find(|&len| {
                self.pending.is_char_boundary(self.pending.len() - len)
                    && self.opener.starts_with(&self.pending[self.pending.len() - len..])
            })
            .unwrap_or(0);
        let cut = self.pending.len() - held;
        push_content(pieces, &self.pending[..cut]);
        self.pending.drain(..cut);
        false
    }

    /// Skip envelope text up to `"name": "`.
    fn find_name(&mut self) -> bool {
        let Some(key) = self.pending.find(self.name_key) else {
            return false;
        };
        let after_key = key + self.name_key.len();
        let Some(quote) = self.pending[after_key..].find('"') else {
            return false;
        };
        self.pending.drain(..after_key + quote + 1);
        self.name.clear();
        self.at = At::Name;
        true
    }

    fn name(&mut self, pieces: &mut Vec<StreamPiece>) -> bool {
        let Some(end) = self.pending.find('"') else {
            self.name.push_str(&self.pending);
            self.pending.clear();
            return false;
        };
        self.name.push_str(&self.pending[..end]);
        self.pending.drain(..=end);
        pieces.push(StreamPiece::CallStart {
            index: self.calls,
            name: std::mem::take(&mut self.name),
        });
        self.calls += 1;
        self.at = At::BeforeArguments;
        true
    }

    /// Skip `, "arguments": ` up to the arguments' first byte.
    fn find_arguments(&mut self) -> bool {
        let Some(key) = self.pending.find(self.arguments_key) else {
            return false;
        };
        let after_key = key + self.arguments_key.len();
        let Some(open) = self.pending[after_key..].find(['{', '[']) else {
            return false;
        };
        self.pending.drain(..after_key + open);
        self.at = At::ARGUMENTS_START;
        true
    }

    /// Stream the arguments' text until their outermost bracket closes.
    fn arguments(&mut self, pieces: &mut Vec<StreamPiece>) -> bool {
        let At::Arguments {
            mut depth,
            mut in_string,
            mut escaped,
        } = self.at
        else {
            return false;
        };
        let mut end = None;
        for (i, byte) in self.pending.bytes().enumerate() {
            match (in_string, escaped, byte) {
                (true, true, _) => escaped = false,
                (true, false, b'\\') => escaped = true,
                (true, false, b'"') => in_string = false,
                (true, false, _) => {}
                (false, _, b'"') => in_string = true,
                (false, _, b'{' | b'[') => depth += 1,
                (false, _, b'}' | b']') => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = Some(i + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        let index = self.calls - 1;
        let taken = end.unwrap_or(self.pending.len());
        if taken > 0 {
            pieces.push(StreamPiece::Arguments {
                index,
                text: self.pending[..taken].to_string(),
            });
        }
        self.pending.drain(..taken);
        match end {
            Some(_) => {
                self.at = At::AfterCall;
                true
            }
            None => {
                self.at = At::Arguments {
                    depth,
                    in_string,
                    escaped,
                };
                false
            }
        }
    }
}

fn push_content(pieces: &mut Vec<StreamPiece>, text: &str) {
    if !text.is_empty() {
        pieces.push(StreamPiece::Content(text.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_response;

    /// Feed `text` in chunks of `size` bytes (on char boundaries) and gather the pieces.
    fn streamed(format: CallFormat, text: &str, size: usize) -> (String, Vec<(String, String)>) {
        let mut parser = CallStreamParser::new(format);
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < text.len() {
            let mut end = (start + size).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            pieces.extend(parser.push(&text[start..end]));
            start = end;
        }
        pieces.extend(parser.finish());
        let mut content = String::new();
        let mut calls: Vec<(String, String)> = Vec::new();
        for piece in pieces {
            match piece {
                StreamPiece::Content(text) => content.push_str(&text),
                StreamPiece::CallStart { index, name } => {
                    assert_eq!(index, calls.len());
                    calls.push((name, String::new()));
                }
                StreamPiece::Arguments { index, text } => calls[index].1.push_str(&text),
            }
        }
        (content, calls)
    }

    fn same_as_whole(format: CallFormat, text: &str) {
        let whole = parse_response(text, format).unwrap();
        for size in [1, 2, 3, 5, 8, 13, 1000] {
            let (content, calls) = streamed(format, text, size);
            assert_eq!(content.trim(), whole.content, "content, chunks of {size}");
            let calls: Vec<(String, String)> = calls
                .into_iter()
                .map(|(name, args)| {
                    let value: serde_json::Value = serde_json::from_str(&args).unwrap();
                    (name, value.to_string())
                })
                .collect();
            let expected: Vec<(String, String)> = whole
                .calls
                .iter()
                .map(|c| (c.name.clone(), c.arguments.clone()))
                .collect();
            assert_eq!(calls, expected, "calls, chunks of {size}");
        }
    }

    #[test]
    fn streamed_pieces_match_the_whole_parse_in_every_format() {
        same_as_whole(
            CallFormat::Hermes,
            "Let me look <tool_ (not a call). ü<tool_call>\n{\"name\": \"file_read\", \"arguments\": {\"path\": \"a \\\"}\\\" b\", \"n\": [1, {\"x\": \"]\"}]}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>",
        );
        same_as_whole(
            CallFormat::Mistral,
            "Ok.[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"k\": \"[\"}}, {\"name\": \"b_c\", \"arguments\": {}}]",
        );
        same_as_whole(
            CallFormat::Llama3Json,
            "{\"name\": \"get\", \"parameters\": {\"id\": 4, \"s\": \"}\"}}",
        );
        same_as_whole(CallFormat::Hermes, "No call at all, just < and <tool.");
        // Compact JSON is not the Llama opener (`{"name": "` with its space): it is free text.
        same_as_whole(CallFormat::Llama3Json, "Data: {\"name\":\"Bob\",\"age\":3}");
    }

    #[test]
    fn a_prefilled_response_streams_only_the_generated_part() {
        let prefill = "<tool_call>\n{\"name\": \"file_";
        let mut parser = CallStreamParser::after_prefill(CallFormat::Hermes, prefill);
        assert_eq!(parser.calls(), 0);
        let mut pieces = parser.push("read\", \"arguments\": {\"p\": 1}}\n</tool_call>");
        pieces.extend(parser.finish());
        assert_eq!(
            pieces,
            vec![
                StreamPiece::CallStart {
                    index: 0,
                    name: "file_read".into()
                },
                StreamPiece::Arguments {
                    index: 0,
                    text: "{\"p\": 1}".into()
                },
            ]
        );
    }
}
