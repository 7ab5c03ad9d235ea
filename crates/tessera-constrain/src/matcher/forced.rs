//! Grammar fast-forward: the bytes the automaton forces from the matcher's
//! state, and the tokens drafted for them (the engine verifies every one).

use super::ToolCallMatcher;
use crate::call::{CallState, Phase};
use crate::vocab::Vocabulary;

impl ToolCallMatcher {
    /// The bytes every continuation must start with from here, at most
    /// `limit`: none where the response may end (free text included) or once
    /// the automaton allows two bytes.
    fn forced_bytes(&mut self, limit: usize) -> Vec<u8> {
        let mut forced = Vec::new();
        if self.finished {
            return forced;
        }
        let envelope_accepts = |matcher: &Self, state: CallState| state.accepting(&matcher.envelope);
        let mut state = self.state;
        while forced.len() < limit && !envelope_accepts(self, state) {
            let mut machine = self.machine();
            let mut only = None;
            for byte in 0..=u8::MAX {
                if let Some(after) = machine.step(state, byte) {
                    if only.is_some() {
                        return forced;
                    }
                    only = Some((byte, after));
                }
            }
            let Some((byte, after)) = only else {
                break;
            };
            forced.push(byte);
            state = after;
        }
        forced
    }

    /// Tokens for what the constraint forces next (grammar fast-forward), at
    /// most `limit`: the forced bytes tokenized longest match first, less the
    /// trailing tokens that a longer token could span past the forced bytes
    /// (there the model's own tokenization is not known, so they are held
    /// back rather than guessed). Drafts only: the engine verifies them.
    pub fn forced_tokens(&mut self, vocab: &Vocabulary, limit: usize) -> Vec<u32> {
        const MAX_FORCED_BYTES: usize = 256;
        let bytes = self.forced_bytes(MAX_FORCED_BYTES);
        if bytes.is_empty() || limit == 0 {
            return Vec::new();
        }
        let Some(mut tokens) = vocab.tokenize_exactly(&bytes) else {
            return Vec::new();
        };
        hold_back_open_tail(vocab, &bytes, &mut tokens);
        tokens.truncate(limit);
        tokens
    }

    /// How many of `tokens`, in order from here, the constraint allows: a
    /// draft is cut at its first forbidden token before its rows run (an
    /// end-of-turn token ends it). The matcher is left as it was.
    pub fn allowed_prefix(&mut self, vocab: &Vocabulary, tokens: &[u32]) -> usize {
        let start = self.state;
        let mut allowed = 0;
        for &token in tokens {
            match self.after_token(vocab, token) {
                Some(Some(next)) => self.state = next,
                Some(None) => {
                    allowed += 1;
                    break;
                }
                None => break,
            }
            allowed += 1;
        }
        self.state = start;
        allowed
    }

    /// Where a draft completes a call from here: its tokens up to the
    /// call's end, the bytes there tokenized again (longest match first), for
    /// the engine to close with end of turn (after a call the model most
    /// often ends its turn, and a lookup draft copied from an earlier call
    /// runs on with what followed that one: `\n</tool_call>`, a merged
    /// `"}}\n`). `None` when the draft completes no call (or one is complete
    /// already), or the cut draft and end of turn would run past `limit`.
    pub fn draft_to_call_end(&mut self, vocab: &Vocabulary, draft: &[u32], limit: usize) -> Option<Vec<u32>> {
        let after_call = |state: CallState| matches!(state.phase, Phase::AfterCall);
        if self.finished || after_call(self.state) {
            return None;
        }
        let (mut state, mut bytes) = (self.state, Vec::new());
        let mut machine = self.machine();
        for &token in draft {
            if vocab.is_stop(token) {
                return None;
            }
            for &byte in vocab.token_bytes(token) {
                state = machine.step(state, byte)?;
                bytes.push(byte);
                if after_call(state) {
                    let cut = vocab.tokenize_exactly(&bytes)?;
                    return (cut.len() < limit).then_some(cut);
                }
            }
        }
        None
    }
}

/// Drop the trailing tokens of `tokens` (which spell `bytes`) that a longer
/// token could span past `bytes`: there the model's own tokenization is not
/// known.
pub(super) fn hold_back_open_tail(vocab: &Vocabulary, bytes: &[u8], tokens: &mut Vec<u32>) {
    let mut tail_start = bytes.len();
    while let Some(&last) = tokens.last() {
        let start = tail_start - vocab.token_bytes(last).len();
        if !vocab.is_strict_prefix(&bytes[start..]) {
            break;
        }
        tokens.pop();
        tail_start = start;
    }
}
