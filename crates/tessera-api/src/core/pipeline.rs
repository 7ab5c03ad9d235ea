//! From streamed token text to what a client sees: free text with stop
//! strings cut (held back while a stop string may still be forming), and tool
//! calls piece by piece (name, then argument text), with stable call ids.

use tessera_constrain::{CallStreamParser, StreamPiece};

/// One piece of the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// Free text.
    Content(String),
    /// A call starts.
    CallStart {
        /// Position among the response's calls.
        index: usize,
        /// `call_…`, unique per response.
        id: String,
        /// The tool.
        name: String,
    },
    /// More argument text of call `index`.
    Arguments {
        /// Position among the response's calls.
        index: usize,
        /// The next piece.
        text: String,
    },
}

/// Cuts free text at the first stop string.
#[derive(Debug, Clone, Default)]
pub struct StopScanner {
    stops: Vec<String>,
    held: String,
    /// The stop string that ended the text.
    stopped_by: Option<usize>,
}

impl StopScanner {
    /// A scanner for `stops` (none: text passes through).
    pub fn new(stops: Vec<String>) -> Self {
        Self {
            stops,
            held: String::new(),
            stopped_by: None,
        }
    }

    /// Whether a stop string was seen (nothing passes after it).
    pub fn stopped(&self) -> bool {
        self.stopped_by.is_some()
    }

    /// The stop string that ended the text, if one did.
    pub fn stopped_by(&self) -> Option<&str> {
        self.stopped_by.map(|index| self.stops[index].as_str())
    }

    /// The text that can be released after `text` arrives.
    pub fn push(&mut self, text: &str) -> String {
        if self.stopped() {
            return String::new();
        }
        self.held.push_str(text);
        let first = (self.stops.iter().enumerate())
            .filter_map(|(index, stop)| self.held.find(stop.as_str()).map(|at| (at, index)))
            .min();
        if let Some((at, index)) = first {
            self.stopped_by = Some(index);
            self.held.truncate(at);
            return std::mem::take(&mut self.held);
        }
        // Keep the longest suffix that may still grow into a stop string.
        let keep = self
            .stops
            .iter()
            .filter_map(|stop| {
                (1..stop.len().min(self.held.len() + 1)).rev().find(|&len| {
                    let start = self.held.len() - len;
                    self.held.is_char_boundary(start) && stop.starts_with(&self.held[start..])
                })
            })
            .max()
            .unwrap_or(0);
        let release = self.held.len() - keep;
        self.held.drain(..release).collect()
    }

    /// The response ended: release what was held.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

/// One response's text → deltas.
#[derive(Debug, Clone)]
pub struct Pipeline {
    calls: Option<CallStreamParser>,
    stop: StopScanner,
    id_base: String,
}

impl Pipeline {
    /// `calls` parses the response's tool calls when it may hold any; `stops`
    /// cut the free text; call ids are `call_{id_base}_{index}`.
    pub fn new(calls: Option<CallStreamParser>, stops: Vec<String>, id_base: &str) -> Self {
        Self {
            calls,
            stop: StopScanner::new(stops),
            id_base: id_base.to_string(),
        }
    }

    /// Deltas released by the next piece of generated text.
    pub fn push(&mut self, text: &str) -> Vec<Delta> {
        let pieces = match &mut self.calls {
            Some(parser) => parser.push(text),
            None => vec![StreamPiece::Content(text.to_string())],
        };
        self.convert(pieces)
    }

    /// The response ended: the deltas still held back.
    pub fn finish(&mut self) -> Vec<Delta> {
        let pieces = match &mut self.calls {
            Some(parser) => parser.finish(),
            None => Vec::new(),
        };
        let mut deltas = self.convert(pieces);
        let rest = self.stop.finish();
        if !rest.is_empty() {
            deltas.push(Delta::Content(rest));
        }
        deltas
    }

    /// Whether a stop string ended the free text.
    pub fn stopped(&self) -> bool {
        self.stop.stopped()
    }

    /// The stop string that ended the free text, if one did.
    pub fn stopped_by(&self) -> Option<&str> {
        self.stop.stopped_by()
    }

    fn convert(&mut self, pieces: Vec<StreamPiece>) -> Vec<Delta> {
        let mut deltas = Vec::new();
        for piece in pieces {
            match piece {
                StreamPiece::Content(text) => {
                    let released = self.stop.push(&text);
                    if !released.is_empty() {
                        deltas.push(Delta::Content(released));
                    }
                }
                StreamPiece::CallStart { index, name } => {
                    // Free text ended: text held back for a stop string comes first.
                    let held = self.stop.finish();
                    if !held.is_empty() {
                        deltas.push(Delta::Content(held));
                    }
                    deltas.push(Delta::CallStart {
                        index,
                        id: format!("call_{}_{index}", self.id_base),
                        name,
                    })
                }
                StreamPiece::Arguments { index, text } => deltas.push(Delta::Arguments { index, text }),
            }
        }
        deltas
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_constrain::CallFormat;

    fn run(scanner: &mut StopScanner, chunks: &[&str]) -> String {
        let mut out: String = chunks.iter().map(|c| scanner.push(c)).collect();
        out.push_str(&scanner.finish());
        out
    }

    #[test]
    fn stop_strings_cut_across_chunks_and_hold_back_only_possible_starts() {
        let mut scanner = StopScanner::new(vec!["END".into(), "\n\n".into()]);
        assert_eq!(scanner.push("abc E"), "abc ");
        assert_eq!(scanner.push("N"), "");
        assert_eq!(scanner.push("X"), "ENX");
        assert_eq!(run(&mut scanner, &["one\n", "\ntwo"]), "one");
        assert_eq!(scanner.stopped_by(), Some("\n\n"));
        let mut none = StopScanner::new(Vec::new());
        assert_eq!(run(&mut none, &["a", "b"]), "ab");
        let mut unicode = StopScanner::new(vec!["ü!".into()]);
        assert_eq!(run(&mut unicode, &["aü", "b ü", "!c"]), "aüb ");
    }

    #[test]
    fn calls_get_ids_and_content_stops() {
        let mut pipeline = Pipeline::new(
            Some(CallStreamParser::new(CallFormat::Hermes)),
            vec!["STOP".into()],
            "7",
        );
        let mut deltas =
            pipeline.push("Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"STOP\"}}\n</tool_call>");
        deltas.extend(pipeline.finish());
        assert_eq!(
            deltas,
            vec![
                Delta::Content("Hi ".into()),
                Delta::CallStart {
                    index: 0,
                    id: "call_7_0".into(),
                    name: "f".into()
                },
                Delta::Arguments {
                    index: 0,
                    text: "{\"a\": \"STOP\"}".into()
                },
            ]
        );
        assert!(!pipeline.stopped(), "stop strings apply to free text only");
    }
}
