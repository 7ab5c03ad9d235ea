//! Overlapping `oneOf`: every alternative runs as its own thread on top of a
//! marker frame (the `oneOf` node, the alternative's index), in the strict
//! spelling (one text per value: see `number` and `text`'s canonical
//! escapes), so each alternative's automaton judges the value exactly.
//!
//! A thread whose alternative's value is complete waits in [`Lex::Ended`];
//! at the next byte (or the end of the input) the ends of one marker's
//! alternatives are counted together, inner `oneOf`s first: exactly one
//! alternative, and the value stands and continues in its parent; two or
//! more, and it is refused. Every alternative reads the same bytes and JSON
//! fixes where a value ends, so the ends counted are those of one value.
//!
//! No dead ends: a set of threads in which two alternatives of one `oneOf`
//! are both alive may have no completion that exactly one accepts (`1` under
//! `oneOf: [{"type": "number"}, {}]`). Such a *contested* state is kept only
//! when a depth-first search finds a way out of the contest (a state with
//! one alternative left per `oneOf`, or the value's end); the search is
//! bounded, and a state it cannot clear is refused, which only ever narrows
//! the mask. Uncontested states need no search: one alternative's thread
//! alone completes as its own automaton does.

use super::machine::{JsonMachine, Next};
use super::text::TextRules;
use super::{CompletionMemo, Frame, JsonState, Lex, Shortest, StackId};
use crate::schema::{Node, NodeId};
use std::collections::HashSet;

/// States a search for a way out of a contest visits at most.
const SEARCH_LIMIT: usize = 256;

/// The bytes a search tries, in order: closing ones first, then one of each
/// kind JSON tells apart, then (per state) the bytes that continue a thread's
/// literal, declared key or pattern (see [`JsonMachine::search_bytes_at`]).
/// A search over these may still miss a way out that needs another byte; the
/// state is then refused, which only narrows.
const SEARCH_BYTES: &[u8] = b"\"}]0,1:a-.e[{tfn 9\\zAE+u5";

/// What a search for a way out stops at.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Goal {
    /// A state known to complete: no `oneOf` contested any more, the value
    /// complete, or a state already shown live.
    Live,
    /// No `oneOf` contested any more (or the value complete).
    Uncontested,
    /// The top-level value complete.
    Complete,
}

impl JsonMachine<'_> {
    /// Whether the top-level value is complete: done, or a `oneOf` value
    /// whose end leaves exactly one alternative (for values that end on their
    /// own last byte, as objects do).
    pub fn finished(&mut self, state: JsonState) -> bool {
        let ended = match state.lex {
            Lex::Done => return true,
            Lex::Ended => true,
            Lex::Many(set) => self.stacks.sets[set as usize].iter().any(|t| t.lex == Lex::Ended),
            _ => false,
        };
        ended && self.is_complete(state)
    }

    /// Whether `frame` is a `oneOf` marker.
    pub(super) fn is_marker(&self, frame: Frame) -> bool {
        matches!(self.arena.nodes[frame.node as usize], Node::OneOf(_))
    }

    /// Whether values on top of `stack` are read in the strict spelling.
    #[inline]
    pub(super) fn strict(&self, stack: StackId) -> bool {
        stack != 0 && self.stacks.top(stack).strict
    }

    /// A string's rules where it is read: canonical escapes when strict.
    #[inline]
    pub(super) fn text_rules_at(&self, stack: StackId, node: NodeId) -> TextRules<'_> {
        let mut rules = self.text_rules(node);
        rules.canonical |= self.strict(stack);
        rules
    }

    /// `byte` starts a value of the `oneOf` `node`: each alternative on its own marker.
    pub(super) fn start_alternatives(
        &mut self,
        stack: StackId,
        node: NodeId,
        alternatives: &[NodeId],
        byte: u8,
    ) -> Next {
        let depth = if stack == 0 { 0 } else { self.stacks.top(stack).depth };
        let mut threads = Vec::new();
        for (i, &alternative) in alternatives.iter().enumerate() {
            let marker = Frame {
                node,
                seen: 0,
                extra: 0,
                current: i as u32,
                depth,
                strict: true,
            };
            let marked = self.stacks.push(stack, marker);
            self.start_value(marked, alternative, byte)
                .into_threads(&mut threads, &mut Vec::new());
        }
        Next::of(threads)
    }

    /// Settle the alternatives whose values ended before `byte` (`None`: the
    /// end of the input); `pending` holds their markers' stacks. Where one
    /// `oneOf`'s value ended in exactly one alternative, the value continues
    /// in its parent (with `byte`); the states reached go to `out`.
    pub(super) fn resolve(&mut self, mut pending: Vec<StackId>, byte: Option<u8>, out: &mut Vec<JsonState>) {
        while !pending.is_empty() {
            pending.sort_unstable();
            pending.dedup();
            // Inner `oneOf`s first: their ends may end an outer alternative's value.
            let heights: Vec<usize> = pending.iter().map(|&s| self.height(s)).collect();
            let deepest = heights.iter().copied().max().unwrap_or(0);
            let mut groups: Vec<((StackId, NodeId), Vec<u32>)> = Vec::new();
            let mut later = Vec::new();
            for (&marker, &height) in pending.iter().zip(&heights) {
                if height < deepest {
                    later.push(marker);
                    continue;
                }
                let frame = self.stacks.top(marker);
                let key = (self.stacks.parent(marker), frame.node);
                match groups.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, alternatives)) => alternatives.push(frame.current),
                    None => groups.push((key, vec![frame.current])),
                }
            }
            pending = later;
            for ((parent, _), mut alternatives) in groups {
                alternatives.sort_unstable();
                alternatives.dedup();
                if alternatives.len() != 1 {
                    continue;
                }
                match (self.complete(parent), byte) {
                    (None, _) => {}
                    (Some(JsonState { lex: Lex::Ended, stack }), _) => pending.push(stack),
                    (Some(after), None) => out.push(after),
                    (Some(after), Some(byte)) => self.step_thread(after, byte).into_threads(out, &mut pending),
                }
            }
        }
    }

    /// Frames on `stack`.
    fn height(&self, mut stack: StackId) -> usize {
        let mut height = 0;
        while stack != 0 {
            stack = self.stacks.parent(stack);
            height += 1;
        }
        height
    }

    /// A single thread whose alternative's value ended: where it continues
    /// (with no other alternative alive, its value stands).
    pub(super) fn resolve_alone(&mut self, mut state: JsonState) -> Option<JsonState> {
        while state.lex == Lex::Ended {
            state = self.complete(self.stacks.parent(state.stack))?;
        }
        Some(state)
    }

    /// Whether two alternatives of one `oneOf` are both alive in `state`.
    pub(super) fn contested(&self, state: JsonState) -> bool {
        let Lex::Many(set) = state.lex else {
            return false;
        };
        let mut markers: Vec<(StackId, NodeId, u32)> = Vec::new();
        for thread in &self.stacks.sets[set as usize] {
            let mut stack = thread.stack;
            while stack != 0 {
                let frame = self.stacks.top(stack);
                let parent = self.stacks.parent(stack);
                if self.is_marker(frame) {
                    markers.push((parent, frame.node, frame.current));
                }
                stack = parent;
            }
        }
        markers.sort_unstable();
        markers.dedup();
        markers.windows(2).any(|w| (w[0].0, w[0].1) == (w[1].0, w[1].1))
    }

    /// Whether some completion of `state` is accepted (always, unless a
    /// `oneOf` is contested: then a way out must be found; memoized).
    pub(super) fn live(&mut self, state: JsonState) -> bool {
        let Lex::Many(set) = state.lex else {
            return true;
        };
        // A thread inside a `oneOf` is strict: a contest needs two of them.
        let strict = self.stacks.sets[set as usize]
            .iter()
            .filter(|thread| self.strict(thread.stack))
            .count();
        if strict < 2 {
            return true;
        }
        if let Some(&known) = self.stacks.live.get(&state) {
            return known;
        }
        if !self.contested(state) {
            self.stacks.live.insert(state, true);
            return true;
        }
        self.cleared_by_completion(state) || self.search(state, Goal::Live).is_some()
    }

    /// Whether one of the threads' own shortest completions is accepted by
    /// the whole state (exactly one alternative); its states are then live.
    fn cleared_by_completion(&mut self, state: JsonState) -> bool {
        let Some(shortest) = self.shortest else {
            return false;
        };
        let own = self.own_completions(state, shortest, &mut CompletionMemo::default());
        self.first_accepted(state, own).is_some()
    }

    /// The shortest completion of each thread of `state` alone, shortest first.
    pub(super) fn own_completions(
        &mut self,
        state: JsonState,
        shortest: &Shortest,
        memo: &mut CompletionMemo,
    ) -> Vec<Vec<u8>> {
        let threads = match state.lex {
            Lex::Many(set) => self.stacks.sets[set as usize].clone(),
            _ => vec![state],
        };
        let mut own: Vec<Vec<u8>> = threads
            .into_iter()
            .filter_map(|thread| self.completion(thread, shortest, memo))
            .collect();
        own.sort_by_key(Vec::len);
        own
    }

    /// The first of `candidates` after which the whole `state` is complete
    /// (exactly one alternative accepting); the states on its way are live.
    pub(super) fn first_accepted(&mut self, state: JsonState, candidates: Vec<Vec<u8>>) -> Option<Vec<u8>> {
        for bytes in candidates {
            let mut path = vec![state];
            for &byte in &bytes {
                match self.step_raw(path[path.len() - 1], byte) {
                    Some(next) => path.push(next),
                    None => break,
                }
            }
            if path.len() == bytes.len() + 1 && self.is_complete(path[bytes.len()]) {
                for on_path in path {
                    self.stacks.live.insert(on_path, true);
                }
                return Some(bytes);
            }
        }
        None
    }

    /// The bytes a search tries from `state`: [`SEARCH_BYTES`], then those that
    /// continue a thread's literal or declared key, or take a pattern string
    /// to another state (ASCII ones), each once.
    fn search_bytes_at(&self, state: JsonState) -> Vec<u8> {
        let threads = match state.lex {
            Lex::Many(set) => self.stacks.sets[set as usize].clone(),
            _ => vec![state],
        };
        let mut bytes = SEARCH_BYTES.to_vec();
        for thread in threads {
            let more: Vec<u8> = match thread.lex {
                Lex::Lit { trie, at } => {
                    let literals = &self.arena.tries[trie as usize];
                    (0..=255u8).filter(|&b| literals.step(at, b).is_some()).collect()
                }
                Lex::KeyStr { .. } => self.declared_key_next_bytes(thread).unwrap_or_default(),
                Lex::Str { node, text } => match self.text_rules(node).pattern {
                    Some(super::text::TextPattern::Value(pattern)) => pattern
                        .dfa
                        .edges(text.dfa)
                        .map(|(byte, _)| byte)
                        .filter(u8::is_ascii)
                        .collect(),
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            for byte in more {
                if !bytes.contains(&byte) {
                    bytes.push(byte);
                }
            }
        }
        bytes
    }

    /// Depth-first from `start` (over [`search_bytes_at`](Self::search_bytes_at), no state twice, at
    /// most [`SEARCH_LIMIT`] states) to a state meeting `goal`: the bytes and
    /// that state. States on the way found are recorded live; when the
    /// search runs out of states, every one it saw is recorded dead, and
    /// when it runs past its limit, `start` is; a state once recorded live
    /// stays live (a way out was found from it).
    pub(super) fn search(&mut self, start: JsonState, goal: Goal) -> Option<(Vec<u8>, JsonState)> {
        let mut seen = HashSet::from([start]);
        // (state, index of the next byte to try, the byte that led here)
        let mut path: Vec<(JsonState, usize, u8)> = vec![(start, 0, 0)];
        let mut exhausted = true;
        while let Some(&(state, from, _)) = path.last() {
            let reached = match goal {
                Goal::Live => {
                    self.stacks.live.get(&state) == Some(&true) || !self.contested(state) || self.is_complete(state)
                }
                Goal::Uncontested => !self.contested(state) || self.is_complete(state),
                Goal::Complete => self.is_complete(state),
            };
            if reached {
                for &(on_path, _, _) in &path {
                    self.stacks.live.insert(on_path, true);
                }
                return Some((path[1..].iter().map(|&(_, _, byte)| byte).collect(), state));
            }
            let mut taken = None;
            for (i, byte) in self.search_bytes_at(state).into_iter().enumerate().skip(from) {
                let Some(next) = self.step_raw(state, byte) else {
                    continue;
                };
                if self.stacks.live.get(&next) == Some(&false) || !seen.insert(next) {
                    continue;
                }
                taken = Some((i, byte, next));
                break;
            }
            match taken {
                Some((i, byte, next)) if seen.len() <= SEARCH_LIMIT => {
                    if let Some(last) = path.last_mut() {
                        last.1 = i + 1;
                    }
                    path.push((next, 0, byte));
                }
                Some(_) => {
                    exhausted = false;
                    break;
                }
                None => {
                    path.pop();
                }
            }
        }
        let dead: Vec<JsonState> = if exhausted {
            seen.into_iter().collect()
        } else {
            vec![start]
        };
        for state in dead {
            self.stacks.live.entry(state).or_insert(false);
        }
        None
    }
}
