//! Budget-aware closing. Every state has a shortest completion: the bytes
//! that finish the current call (or JSON value) and its envelope, found
//! through the automaton itself ([`crate::json`]'s completions for the
//! arguments, the rest of the envelope's pieces and the cheapest allowed name
//! around them). Written in tokens (greedily, every token checked), it is a
//! plan that fits a budget or not. With `remaining` tokens left, a token is
//! allowed only when the state it leads to can still be completed in
//! `remaining - 1`; the plan's own next token always can, so the mask is never
//! empty and a cut response is always a complete, valid call.

use crate::call::{CallMachine, CallState, Phase, Piece};
use crate::json::CompletionMemo;
use crate::vocab::Vocabulary;
use std::collections::HashMap;

/// Completions and their token counts, by state (per response).
#[derive(Debug, Default)]
pub(crate) struct BudgetMemo {
    json: CompletionMemo,
    bytes: HashMap<CallState, Option<Vec<u8>>>,
    tokens: HashMap<CallState, Option<Vec<u32>>>,
}

impl BudgetMemo {
    /// Memos past this many states are dropped (a long response revisits few).
    const LIMIT: usize = 1 << 16;

    fn trim(&mut self) {
        if self.bytes.len() + self.json.len() + self.tokens.len() > Self::LIMIT {
            *self = Self::default();
        }
    }
}

impl CallMachine<'_> {
    /// The tokens of a shortest completion from `state` (empty where the
    /// response may end), or `None` when none was found.
    pub fn completion_tokens(
        &mut self,
        state: CallState,
        vocab: &Vocabulary,
        memo: &mut BudgetMemo,
    ) -> Option<Vec<u32>> {
        if let Some(found) = memo.tokens.get(&state) {
            return found.clone();
        }
        memo.trim();
        let tokens = self
            .completion(state, memo)
            .and_then(|bytes| vocab.tokenize_exactly(&bytes));
        memo.tokens.insert(state, tokens.clone());
        tokens
    }

    /// The bytes of a shortest completion from `state`.
    fn completion(&mut self, state: CallState, memo: &mut BudgetMemo) -> Option<Vec<u8>> {
        if let Some(found) = memo.bytes.get(&state) {
            return found.clone();
        }
        memo.bytes.insert(state, None);
        let found = self.complete_from(state, memo);
        memo.bytes.insert(state, found.clone());
        found
    }

    fn complete_from(&mut self, state: CallState, memo: &mut BudgetMemo) -> Option<Vec<u8>> {
        if state.accepting(self.envelope) {
            return Some(Vec::new());
        }
        let envelope = self.envelope.form(state.form);
        let written = match state.phase {
            Phase::Args => {
                let tools = self.tools;
                self.json().completion(state.json, &tools.shortest, &mut memo.json)?
            }
            Phase::Fixed { piece, at } => piece.bytes(envelope)[at as usize..].to_vec(),
            Phase::AfterCall => Piece::SectionEnd.bytes(envelope).to_vec(),
            Phase::Name { at } => return self.complete_name(state, at, memo),
            Phase::Text { .. } | Phase::Tentative { .. } | Phase::Done => return Some(Vec::new()),
        };
        self.then_complete(state, written, memo)
    }

    /// `written` from `state`, then a shortest completion from where it leads.
    fn then_complete(&mut self, state: CallState, mut written: Vec<u8>, memo: &mut BudgetMemo) -> Option<Vec<u8>> {
        let after = written.iter().try_fold(state, |s, &byte| self.step(s, byte))?;
        if after == state {
            return None;
        }
        written.extend(self.completion(after, memo)?);
        Some(written)
    }

    /// Inside a tool name: the allowed name (from this trie node on) whose
    /// call completes shortest.
    fn complete_name(&mut self, state: CallState, at: u32, memo: &mut BudgetMemo) -> Option<Vec<u8>> {
        let mut suffixes = Vec::new();
        let mut todo = vec![(at, Vec::new())];
        while let Some((node, path)) = todo.pop() {
            if self.allowed.trie.terminal(node).is_some() {
                let mut closed = path.clone();
                closed.push(b'"');
                suffixes.push(closed);
            }
            for byte in 0..=255u8 {
                if let Some(next) = self.allowed.trie.step(node, byte) {
                    let mut longer = path.clone();
                    longer.push(byte);
                    todo.push((next, longer));
                }
            }
        }
        suffixes
            .into_iter()
            .filter_map(|suffix| self.then_complete(state, suffix, memo))
            .min_by_key(Vec::len)
    }
}
