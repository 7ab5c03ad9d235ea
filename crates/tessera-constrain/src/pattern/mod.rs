//! String patterns as our own byte DFA tables: `pattern` (ECMA-262, see
//! [`ecma`]) and `format` (see [`formats`]) compile through `regex-automata`
//! into a dense DFA, which is copied into a small table here: one row per
//! state over byte classes, whether the text may end in the state, and
//! whether an accepting state is still reachable from it (live). The automaton
//! feeds it the *decoded* characters of a JSON string (an escape is fed as the
//! character it stands for), so a pattern sees what a JSON parser will see.
//!
//! Two patterns on one string (`allOf`, or `pattern` with `format`) become
//! their product table, so the automaton still holds one state per string.

pub(crate) mod cache;
mod ecma;
mod formats;
mod keys;
mod lengths;

pub(crate) use cache::PatternCache;
pub use formats::FORMATS;
pub(crate) use keys::{KeyDfa, KeyEnd, MAX_KEY_PATTERNS};
pub(crate) use lengths::PatternUse;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::primitives::StateID;
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};
use std::collections::HashMap;
use std::sync::Arc;

/// No state: the text can no longer match.
pub(crate) const DEAD: u32 = u32::MAX;

/// States a pattern table may have (a larger pattern is refused).
const MAX_STATES: usize = 40_000;

/// A byte DFA over the decoded text of a string; state 0 is the start.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Dfa {
    /// Byte → class. A class never mixes UTF-8 lead bytes (a code point starts)
    /// with continuation bytes, so a class counts code points uniformly.
    classes: [u8; 256],
    class_count: usize,
    /// One byte of each class.
    representatives: Vec<u8>,
    /// `next[state * class_count + class]`, [`DEAD`] when no match can follow.
    next: Vec<u32>,
    /// Whether the text may end in the state.
    pub accept: Vec<bool>,
}

/// Why a pattern cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatternError(pub String);

impl Dfa {
    /// The table of an ECMA-262 `pattern` (matched anywhere in the text, as
    /// JSON Schema reads it), compiled anew (a [`PatternCache`](cache::PatternCache) keeps it).
    pub fn ecma(source: &str) -> Result<Arc<Dfa>, PatternError> {
        let translated = ecma::translate(source)?;
        Ok(Arc::new(Self::from_regex(&format!("(?s:.)*(?:{translated})(?s:.)*"))?))
    }

    /// The table of a regex (Rust `regex` syntax) that must match the whole text.
    pub fn from_regex(regex: &str) -> Result<Self, PatternError> {
        let config = dense::Config::new()
            .match_kind(MatchKind::All)
            .start_kind(StartKind::Anchored)
            .minimize(false)
            .dfa_size_limit(Some(16 << 20))
            .determinize_size_limit(Some(16 << 20));
        let dfa = dense::Builder::new()
            .configure(config)
            .syntax(syntax::Config::new().utf8(true).unicode(true))
            .build(regex)
            .map_err(|e| PatternError(format!("cannot be compiled: {}", full_error(&e))))?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| PatternError(format!("cannot be compiled: {e}")))?;
        Self::copy(&dfa, start)
    }

    /// Our table from a `regex-automata` DFA: the states reachable from `start`.
    fn copy(dfa: &dense::DFA<Vec<u32>>, start: StateID) -> Result<Self, PatternError> {
        let byte_classes = dfa.byte_classes();
        let (classes, representatives) = refine(|b| byte_classes.get(b) as u32);
        let step = |&state: &StateID, byte: u8| {
            let to = dfa.next_state(state, byte);
            (!dfa.is_dead_state(to) && !dfa.is_quit_state(to)).then_some(to)
        };
        let accepts = |&state: &StateID| dfa.is_match_state(dfa.next_eoi_state(state));
        let (next, accept) = explore(start, &representatives, step, accepts)?;
        Ok(Self::pruned(classes, representatives, next, accept))
    }

    /// The table, where transitions into states that cannot reach an
    /// accepting one lead to [`DEAD`].
    fn pruned(classes: [u8; 256], representatives: Vec<u8>, next: Vec<u32>, accept: Vec<bool>) -> Self {
        let mut table = Self {
            classes,
            class_count: representatives.len(),
            representatives,
            next,
            accept,
        };
        table.prune();
        table
    }

    fn prune(&mut self) {
        let live = self.live();
        for target in &mut self.next {
            if *target != DEAD && !live[*target as usize] {
                *target = DEAD;
            }
        }
    }

    /// States from which an accepting state is reachable.
    fn live(&self) -> Vec<bool> {
        let n = self.accept.len();
        let mut incoming: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (from, row) in self.next.chunks(self.class_count).enumerate() {
            for &to in row.iter().filter(|&&to| to != DEAD) {
                incoming[to as usize].push(from as u32);
            }
        }
        let mut live = self.accept.clone();
        let mut todo: Vec<u32> = (0..n as u32).filter(|&s| live[s as usize]).collect();
        while let Some(state) = todo.pop() {
            for &from in &incoming[state as usize] {
                if !live[from as usize] {
                    live[from as usize] = true;
                    todo.push(from);
                }
            }
        }
        live
    }

    /// Whether no text matches.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        !self.live()[0]
    }

    pub fn states(&self) -> usize {
        self.accept.len()
    }

    /// The state after `byte` ([`DEAD`] stays dead).
    pub fn step(&self, state: u32, byte: u8) -> u32 {
        if state == DEAD {
            return DEAD;
        }
        self.next[state as usize * self.class_count + self.classes[byte as usize] as usize]
    }

    /// Whether the text may end in `state`.
    pub fn accepts(&self, state: u32) -> bool {
        state != DEAD && self.accept[state as usize]
    }

    /// Rows of `state`: (one byte of each class, the state it leads to).
    pub fn edges(&self, state: u32) -> impl Iterator<Item = (u8, u32)> + '_ {
        let row = &self.next[state as usize * self.class_count..][..self.class_count];
        self.representatives.iter().copied().zip(row.iter().copied())
    }

    /// Per state, the first step of a shortest way to an accepting state
    /// (`None` for accepting and dead-end states): a byte that needs no JSON
    /// escape where its class has one (letters and digits first), and the
    /// state it leads to. A breadth-first search over reversed edges.
    pub fn toward_accept(&self) -> Vec<Option<(u8, u32)>> {
        let n = self.accept.len();
        let pretty = self.plain_byte_per_class();
        let mut incoming: Vec<Vec<(u32, u8)>> = vec![Vec::new(); n];
        for from in 0..n as u32 {
            for (class, &to) in self.next[from as usize * self.class_count..][..self.class_count]
                .iter()
                .enumerate()
            {
                if to != DEAD {
                    incoming[to as usize].push((from, pretty[class]));
                }
            }
        }
        let mut step: Vec<Option<(u8, u32)>> = vec![None; n];
        let mut done: Vec<bool> = self.accept.clone();
        let mut queue: std::collections::VecDeque<u32> = (0..n as u32).filter(|&s| self.accept[s as usize]).collect();
        while let Some(state) = queue.pop_front() {
            for &(from, byte) in &incoming[state as usize] {
                if !done[from as usize] {
                    done[from as usize] = true;
                    step[from as usize] = Some((byte, state));
                    queue.push_back(from);
                }
            }
        }
        step
    }

    /// One byte per class, preferring letters, digits and other printable
    /// ASCII that JSON needs no escape for.
    fn plain_byte_per_class(&self) -> Vec<u8> {
        let order = (b'a'..=b'z')
            .chain(b'0'..=b'9')
            .chain(b'A'..=b'Z')
            .chain((0x20..0x7F).filter(|&b| b != b'"' && b != b'\\'))
            .chain(0..=255u8);
        let mut chosen: Vec<Option<u8>> = vec![None; self.class_count];
        for byte in order {
            let class = &mut chosen[self.classes[byte as usize] as usize];
            class.get_or_insert(byte);
        }
        chosen.into_iter().map(|b| b.unwrap_or(0)).collect()
    }

    /// The table accepting what both accept (`allOf`, `pattern` with `format`).
    pub fn intersect(&self, other: &Dfa) -> Result<Self, PatternError> {
        let (classes, representatives) =
            refine(|b| self.classes[b as usize] as u32 * 256 + other.classes[b as usize] as u32);
        let step = |&(a, b): &(u32, u32), byte: u8| {
            let pair = (self.step(a, byte), other.step(b, byte));
            (pair.0 != DEAD && pair.1 != DEAD).then_some(pair)
        };
        let accepts = |&(a, b): &(u32, u32)| self.accepts(a) && other.accepts(b);
        let (next, accept) = explore((0, 0), &representatives, step, accepts)?;
        Ok(Self::pruned(classes, representatives, next, accept))
    }

    /// Whether the whole `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        self.accepts(text.bytes().fold(0, |state, byte| self.step(state, byte)))
    }
}

/// An error with its causes.
fn full_error(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// The states reachable from `start` (numbered in the order found, `start`
/// first): the transition rows over one byte per class ([`DEAD`] where `step`
/// gives nothing) and each state's label.
fn explore<K: Clone + Eq + std::hash::Hash, L>(
    start: K,
    representatives: &[u8],
    mut step: impl FnMut(&K, u8) -> Option<K>,
    label: impl Fn(&K) -> L,
) -> Result<(Vec<u32>, Vec<L>), PatternError> {
    let mut ids = HashMap::from([(start.clone(), 0u32)]);
    let mut order = vec![start];
    let mut next = Vec::new();
    let mut labels = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let state = order[i].clone();
        i += 1;
        labels.push(label(&state));
        for &byte in representatives {
            let Some(to) = step(&state, byte) else {
                next.push(DEAD);
                continue;
            };
            let id = *ids.entry(to.clone()).or_insert_with(|| {
                order.push(to);
                (order.len() - 1) as u32
            });
            next.push(id);
        }
        if order.len() > MAX_STATES {
            return Err(too_large());
        }
    }
    Ok((next, labels))
}

fn too_large() -> PatternError {
    PatternError(format!("needs more than {MAX_STATES} automaton states"))
}

/// Classes that split `key`'s classes further so that UTF-8 lead bytes (and
/// ASCII) never share a class with continuation bytes: (byte → class, one
/// byte per class).
fn refine(key: impl Fn(u8) -> u32) -> ([u8; 256], Vec<u8>) {
    let mut classes = [0u8; 256];
    let mut index: HashMap<(u32, bool), u8> = HashMap::new();
    let mut representatives = Vec::new();
    for byte in 0..=255u8 {
        let continuation = (0x80..0xC0).contains(&byte);
        let class = *index.entry((key(byte), continuation)).or_insert_with(|| {
            representatives.push(byte);
            (representatives.len() - 1) as u8
        });
        classes[byte as usize] = class;
    }
    (classes, representatives)
}

/// Whether `byte` starts a code point (ASCII or a UTF-8 lead byte).
pub(crate) fn starts_char(byte: u8) -> bool {
    !(0x80..0xC0).contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_anywhere_unless_anchored() {
        let dfa = Dfa::ecma("a+").unwrap();
        assert!(dfa.matches("xaay"));
        assert!(!dfa.matches("xyz"));
        let anchored = Dfa::ecma("^[0-9]{4}-[0-9]{2}$").unwrap();
        assert!(anchored.matches("2024-05"));
        assert!(!anchored.matches("2024-05x"));
        assert!(!anchored.matches("x2024-05"));
    }

    #[test]
    fn dead_ends_are_pruned() {
        let dfa = Dfa::ecma("^ab$").unwrap();
        let after_a = dfa.step(0, b'a');
        assert_ne!(after_a, DEAD);
        assert_eq!(dfa.step(after_a, b'c'), DEAD);
        assert_eq!(dfa.step(0, b'b'), DEAD);
        assert!(Dfa::ecma("^[]$").unwrap().is_empty());
    }

    #[test]
    fn a_pattern_whose_dfa_explodes_is_refused() {
        // The n-th character from the end is an `a`: 2^n DFA states.
        let error = Dfa::ecma("^[ab]*a[ab]{24}$").unwrap_err();
        assert!(
            error.0.contains("cannot be compiled") || error.0.contains("states"),
            "{}",
            error.0
        );
    }

    #[test]
    fn intersections_accept_what_both_accept() {
        let digits = Dfa::ecma("^[0-9]+$").unwrap();
        let short = Dfa::ecma("^.{1,3}$").unwrap();
        let both = digits.intersect(&short).unwrap();
        assert!(both.matches("123"));
        assert!(!both.matches("1234"));
        assert!(!both.matches("ab"));
    }
}
