//! The likely continuation of a call, for drafts: the bytes the constraint
//! forces, and past them, where the automaton allows JSON whitespace and
//! exactly one other byte that keeps the call going, that byte after the
//! whitespace this response wrote after the same separator before. A call's
//! punctuation is predictable though JSON lets whitespace vary (`", "arguments":
//! {"` once a name is complete; `":"` after a key of a string property; a
//! bare call's head), and the model keeps one style within a response.
//! Nothing here constrains: the engine verifies every drafted token, so a
//! wrong guess costs the draft's rows, never the output.

use super::ToolCallMatcher;
use crate::call::{CallState, Phase};
use crate::envelope::bare::is_json_space;
use crate::json::Lex;
use crate::vocab::Vocabulary;

/// Separators whose following whitespace is a matter of style.
const SEPARATORS: [u8; 2] = [b':', b','];
/// Whitespace after a separator before anything was learned: one space, as
/// the Hermes envelope and Python's `json.dumps` write it. (A wrong guess
/// costs the draft's rows in a step that runs anyway; a right one saves a
/// step. Qwen2.5-Coder wrote `": "` and `", "` in its envelope, `":"` and
/// `", "` in its arguments.)
const DEFAULT_SPACE: &[u8] = b" ";
/// Most whitespace bytes remembered after a separator.
const MAX_SPACE: usize = 4;
/// Most bytes a likely continuation runs.
const MAX_LIKELY_BYTES: usize = 256;

/// The whitespace a response writes after `:` and `,`, apart in a call's
/// envelope (or bare head) and in its arguments, learned from what it wrote.
#[derive(Debug, Clone, Default)]
pub(crate) struct SpaceStyle {
    /// `[separator][level]`: the whitespace read after it last time.
    learned: [[Option<Vec<u8>>; 2]; 2],
    /// The last separator read outside strings (index, level) and the
    /// whitespace read after it so far.
    open: Option<(usize, usize, Vec<u8>)>,
}

impl SpaceStyle {
    /// Take note of `byte`, read from `state`.
    pub(crate) fn observe(&mut self, state: &CallState, byte: u8) {
        if !structural(state) {
            return;
        }
        if is_json_space(byte) {
            if let Some((_, _, run)) = self.open.as_mut().filter(|(_, _, run)| run.len() < MAX_SPACE) {
                run.push(byte);
            }
            return;
        }
        if let Some((separator, level, run)) = self.open.take() {
            self.learned[separator][level] = Some(run);
        }
        if let Some(separator) = SEPARATORS.iter().position(|&s| s == byte) {
            self.open = Some((separator, level(state), Vec::new()));
        }
    }

    /// The whitespace to write here, before the next non-space byte: the
    /// learned style right after a separator, nothing elsewhere (nor once some
    /// was written after it).
    fn space_here(&self) -> &[u8] {
        match &self.open {
            Some((separator, level, run)) if run.is_empty() => {
                self.learned[*separator][*level].as_deref().unwrap_or(DEFAULT_SPACE)
            }
            _ => &[],
        }
    }
}

/// Whether a byte read from `state` is a call's punctuation (its envelope,
/// a bare head, its arguments outside strings and keys).
fn structural(state: &CallState) -> bool {
    match state.phase {
        Phase::Tentative { .. } | Phase::Fixed { .. } => true,
        Phase::Args => !matches!(state.json.lex, Lex::Str { .. } | Lex::KeyStr { .. }),
        _ => false,
    }
}

/// 0 for a call's envelope or bare head, 1 for its arguments.
fn level(state: &CallState) -> usize {
    usize::from(matches!(state.phase, Phase::Args))
}

/// A draft from the constraint: the likely continuation's tokens, and which
/// of them spell only bytes the constraint forces where they stand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrammarDraft {
    /// Tokens to verify, in order.
    pub tokens: Vec<u32>,
    /// Per token of `tokens`: whether each of its bytes was the only one the
    /// constraint allowed there (given the tokens before it).
    pub forced: Vec<bool>,
}

impl GrammarDraft {
    /// A draft of forced tokens only (grammar fast-forward).
    pub fn forced_run(tokens: Vec<u32>) -> Self {
        Self {
            forced: vec![true; tokens.len()],
            tokens,
        }
    }

    /// How many of the tokens are forced.
    pub fn forced_count(&self) -> usize {
        self.forced.iter().filter(|&&forced| forced).count()
    }
}

/// What the automaton allows at one state, for the walk.
enum Next {
    /// One byte keeps the call going (with JSON whitespace allowed before it,
    /// `spaced`); `only` when no other byte at all is allowed.
    One {
        byte: u8,
        after: CallState,
        spaced: bool,
        only: bool,
    },
    /// Several bytes, or none that keeps the call going.
    Open,
}

impl ToolCallMatcher {
    /// Record the bytes of an accepted token for the response's style.
    pub(super) fn observe_style(&mut self, from: CallState, bytes: &[u8]) {
        if !bytes.iter().any(|&b| is_json_space(b) || SEPARATORS.contains(&b)) && self.style.open.is_none() {
            return;
        }
        let mut style = std::mem::take(&mut self.style);
        let mut machine = self.machine();
        let mut state = from;
        for &byte in bytes {
            style.observe(&state, byte);
            match machine.step(state, byte) {
                Some(next) => state = next,
                None => break,
            }
        }
        self.style = style;
    }

    fn next_at(&mut self, state: CallState) -> Next {
        let mut machine = self.machine();
        let (mut one, mut spaces, mut allowed) = (None, Vec::new(), 0);
        for byte in 0..=u8::MAX {
            let Some(after) = machine.step(state, byte) else {
                continue;
            };
            allowed += 1;
            if matches!(after.phase, Phase::Text { .. }) {
                continue;
            }
            if is_json_space(byte) {
                spaces.push((byte, after));
            } else if one.replace((byte, after)).is_some() {
                return Next::Open;
            }
        }
        match (one, spaces.as_slice()) {
            (Some((byte, after)), _) => Next::One {
                byte,
                after,
                spaced: !spaces.is_empty(),
                only: allowed == 1,
            },
            // A literal's own whitespace (the envelope's `", "`).
            (None, &[(byte, after)]) => Next::One {
                byte,
                after,
                spaced: false,
                only: allowed == 1,
            },
            (None, _) => Next::Open,
        }
    }

    /// The likely continuation's bytes (see the module docs), at most
    /// `limit`; per byte, whether the constraint allowed only it there; how
    /// many lead the bytes before the first choice; and whether they end at
    /// the start of a string value (where the model's next token begins the
    /// value's text).
    fn likely_bytes(&mut self, limit: usize) -> (Vec<u8>, Vec<bool>, usize, bool) {
        let (mut bytes, mut only_here, mut forced) = (Vec::new(), Vec::new(), None);
        // Free text has no likely continuation (and a walk there would try
        // every byte at every step).
        if self.finished || matches!(self.state.phase, Phase::Text { .. }) {
            return (bytes, only_here, 0, false);
        }
        let (mut state, mut style) = (self.state, self.style.clone());
        let ends_here = |matcher: &Self, state: &CallState| {
            state.accepting(&matcher.envelope) && !matches!(state.phase, Phase::Tentative { .. })
        };
        while bytes.len() < limit && !ends_here(self, &state) {
            let Next::One {
                byte,
                after,
                spaced,
                only,
            } = self.next_at(state)
            else {
                break;
            };
            let only = only && !state.accepting(&self.envelope);
            if !only {
                forced.get_or_insert(bytes.len());
            }
            let space = if spaced {
                style.space_here().to_vec()
            } else {
                Vec::new()
            };
            if !space.is_empty() {
                let mut machine = self.machine();
                let Some(spaced_state) = space.iter().try_fold(state, |at, &b| machine.step(at, b)) else {
                    break;
                };
                for &b in &space {
                    style.observe(&state, b);
                }
                bytes.extend_from_slice(&space);
                only_here.resize(bytes.len(), false);
                state = spaced_state;
                continue;
            }
            style.observe(&state, byte);
            bytes.push(byte);
            only_here.push(only);
            state = after;
        }
        let forced = forced.unwrap_or(bytes.len());
        let at_value = bytes.last() == Some(&b'"') && matches!(state.json.lex, Lex::Str { .. });
        (bytes, only_here, forced, at_value && matches!(state.phase, Phase::Args))
    }

    /// A draft from the constraint, at most `limit` tokens: the likely
    /// continuation tokenized longest match first, less the trailing tokens
    /// that a longer token could span past it (as [`Self::forced_tokens`]:
    /// there the model's own tokenization is not known), unless it ends at a
    /// string value's opening quote (`":"`), where the value's text starts a
    /// token of its own. A draft of forced bytes only is
    /// [`Self::forced_tokens`]'s.
    pub fn grammar_draft(&mut self, vocab: &Vocabulary, limit: usize) -> GrammarDraft {
        let (bytes, only_here, forced_bytes, at_value) = self.likely_bytes(MAX_LIKELY_BYTES);
        if bytes.is_empty() || limit == 0 {
            return GrammarDraft::default();
        }
        let Some(mut tokens) = vocab.tokenize_exactly(&bytes) else {
            return GrammarDraft::default();
        };
        if forced_bytes == bytes.len() || !at_value {
            super::forced::hold_back_open_tail(vocab, &bytes, &mut tokens);
        }
        tokens.truncate(limit);
        let mut start = 0;
        let forced = tokens
            .iter()
            .map(|&token| {
                let end = start + vocab.token_bytes(token).len();
                let forced = only_here[start..end].iter().all(|&only| only);
                start = end;
                forced
            })
            .collect();
        GrammarDraft { tokens, forced }
    }
}
