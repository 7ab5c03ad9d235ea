//! The shortest completion of a state: bytes after which the top-level value
//! is complete. Between values it is written from the schema (the required
//! properties still missing, the items still owed, then the closing brackets,
//! container by container, each with [`Shortest`] values); inside a string,
//! number, literal or key it is searched byte by byte, the exits priced by
//! their own completions. Every byte goes through [`JsonMachine::step`], so a
//! completion is always one the automaton accepts.

use super::exclusive::Goal;
use super::machine::JsonMachine;
use super::number::NumStep;
use super::shortest::{search_bytes, Shortest};
use super::text::TextPattern;
use super::{JsonState, Lex};
use std::collections::{HashMap, HashSet, VecDeque};

/// Bytes a search inside one string, number or key may go.
const LEXEME_LIMIT: usize = 4096;

/// States a breadth-first search inside a lexeme visits at most.
const BREADTH_LIMIT: usize = 256;

/// Bytes past the first exit a breadth-first search still looks at.
const EXIT_SLACK: usize = 2;

/// Completions already found, by state.
pub(crate) type CompletionMemo = HashMap<JsonState, Option<Vec<u8>>>;

impl JsonMachine<'_> {
    /// The shortest completion found from `state` (`None`: none found).
    pub fn completion(&mut self, state: JsonState, shortest: &Shortest, memo: &mut CompletionMemo) -> Option<Vec<u8>> {
        if let Some(found) = memo.get(&state) {
            return found.clone();
        }
        // A state met again while its own completion is being found is a
        // cycle, not a way out: `None` until the search returns.
        memo.insert(state, None);
        let found = self.complete_from(state, shortest, memo);
        memo.insert(state, found.clone());
        found
    }

    fn complete_from(&mut self, state: JsonState, shortest: &Shortest, memo: &mut CompletionMemo) -> Option<Vec<u8>> {
        if self.is_complete(state) {
            return Some(Vec::new());
        }
        let arena = self.arena;
        let mut written = Vec::new();
        match state.lex {
            Lex::Many(_) => return self.complete_threads(state, shortest, memo),
            // A single thread: its alternative's value stands.
            Lex::Ended => {
                let after = self.resolve_alone(state)?;
                return self.completion(after, shortest, memo);
            }
            Lex::Value { node, .. } => {
                if shortest.write_value(arena, node, &mut written).is_none() {
                    // A container whose shortest value needs searched keys: open it.
                    return self.open_and_complete(state, shortest, memo);
                }
            }
            Lex::Colon => written.push(b':'),
            Lex::After | Lex::Key { .. } | Lex::ArrayFirst => {
                self.write_rest_of_container(state, shortest, &mut written)?;
                if written.is_empty() {
                    // The first item is a container whose keys must be searched: open it.
                    return self.open_and_complete(state, shortest, memo);
                }
            }
            Lex::Str { .. } | Lex::Num { .. } | Lex::Lit { .. } | Lex::Word { .. } | Lex::KeyStr { .. } => {
                return self.complete_lexeme(state, shortest, memo);
            }
            Lex::Done => return Some(Vec::new()),
        }
        let after = written.iter().try_fold(state, |s, &byte| self.step(s, byte))?;
        let rest = self.completion(after, shortest, memo)?;
        written.extend(rest);
        Some(written)
    }

    /// Several threads: the shortest of their own completions. Where a
    /// `oneOf` is contested, the first of them (shortest first) that exactly
    /// one alternative accepts, else a way out of the contest searched
    /// byte by byte, then its own completion.
    fn complete_threads(
        &mut self,
        state: JsonState,
        shortest: &Shortest,
        memo: &mut CompletionMemo,
    ) -> Option<Vec<u8>> {
        let own = self.own_completions(state, shortest, memo);
        if !self.contested(state) {
            return own.into_iter().next();
        }
        if let Some(bytes) = self.first_accepted(state, own) {
            return Some(bytes);
        }
        let (mut bytes, out) = self.search(state, Goal::Uncontested)?;
        bytes.extend(self.completion(out, shortest, memo)?);
        Some(bytes)
    }

    /// A container opened here, then completed.
    fn open_and_complete(
        &mut self,
        state: JsonState,
        shortest: &Shortest,
        memo: &mut CompletionMemo,
    ) -> Option<Vec<u8>> {
        [b'{', b'['].into_iter().find_map(|open| {
            let inside = self.step(state, open)?;
            let mut rest = self.completion(inside, shortest, memo)?;
            rest.insert(0, open);
            Some(rest)
        })
    }

    /// The container on top of `state`'s stack, completed from between its entries.
    fn write_rest_of_container(&mut self, state: JsonState, shortest: &Shortest, out: &mut Vec<u8>) -> Option<()> {
        let arena = self.arena;
        let frame = self.stacks.top(state.stack);
        if let Some(shape) = self.array(frame) {
            return match state.lex {
                Lex::ArrayFirst => shortest.write_items(arena, shape, 0, out),
                _ => shortest.write_items(arena, shape, frame.seen, out),
            };
        }
        let shape = self.object(frame)?;
        match state.lex {
            // After a value: entries still owed each take a comma.
            Lex::After => shortest.write_entries(arena, shape, frame.seen, frame.extra, true, out),
            Lex::Key { first: true, .. } => shortest.write_entries(arena, shape, frame.seen, frame.extra, false, out),
            // After a comma a key must come, even where the object could close:
            // its opening quote, then the cheapest key is searched for.
            _ => {
                out.push(b'"');
                Some(())
            }
        }
    }

    /// Inside a string, number, literal or key: the cheapest way out found,
    /// each exit priced with its own completion. Breadth-first up to a few
    /// bytes past the first exit (exits differ in what follows them);
    /// depth-first when the frontier grows too wide to find one (a bounded
    /// number's digits each make a new state).
    fn complete_lexeme(&mut self, start: JsonState, shortest: &Shortest, memo: &mut CompletionMemo) -> Option<Vec<u8>> {
        // Breadth-first where the way out is a choice (which key; a pattern's
        // shortest match); elsewhere (numbers, whose digits each make a new
        // state; literals; a string's rest, an escape's hex digits included)
        // the first way found is as short, and found at once.
        let choice = match start.lex {
            Lex::KeyStr { at, .. } => at.is_some() || self.in_key_table(start),
            Lex::Str { node, .. } => self.text_rules(node).pattern.is_some(),
            _ => false,
        };
        if !choice {
            return self.lexeme_depth_first(start, shortest, memo);
        }
        if let Some(rest) = self.pattern_rest(start) {
            // A pattern string without length bounds at a character boundary:
            // the pattern's own shortest rest, then the closing quote.
            if let Some(after) = rest.iter().try_fold(start, |s, &byte| self.step(s, byte)) {
                if let Some(tail) = self.completion(after, shortest, memo) {
                    return Some(rest.into_iter().chain(tail).collect());
                }
            }
        }
        let mut best: Option<Vec<u8>> = None;
        let mut first_exit: Option<usize> = None;
        let mut seen = HashSet::from([start]);
        let mut queue = VecDeque::from([(start, Vec::new())]);
        while let Some((state, path)) = queue.pop_front() {
            let past_exit = first_exit.is_some_and(|depth| path.len() > depth + EXIT_SLACK);
            if past_exit || seen.len() > BREADTH_LIMIT || path.len() >= LEXEME_LIMIT {
                break;
            }
            if let Some(after) = self.end_value(state) {
                first_exit.get_or_insert(path.len());
                if let Some(rest) = self.completion(after, shortest, memo) {
                    let total: Vec<u8> = path.iter().copied().chain(rest).collect();
                    if best.as_ref().is_none_or(|b| total.len() < b.len()) {
                        best = Some(total);
                    }
                }
            }
            for byte in self.candidate_bytes(state) {
                let Some(next) = self.step(state, byte) else {
                    continue;
                };
                let mut longer = path.clone();
                longer.push(byte);
                if self.inside_lexeme(next) {
                    if seen.insert(next) {
                        queue.push_back((next, longer));
                    }
                    continue;
                }
                // A number or literal that ended before this byte: see `end_value`.
                if self.ends_before(state, byte) {
                    continue;
                }
                first_exit.get_or_insert(path.len());
                if let Some(rest) = self.completion(next, shortest, memo) {
                    longer.extend(rest);
                    if best.as_ref().is_none_or(|b| longer.len() < b.len()) {
                        best = Some(longer);
                    }
                }
            }
        }
        best.or_else(|| self.lexeme_depth_first(start, shortest, memo))
    }

    /// Bytes worth trying from `state`: inside a declared key (no key table),
    /// the declared names' next bytes, `"`, and one byte standing for any
    /// undeclared name; elsewhere every byte.
    fn candidate_bytes(&self, state: JsonState) -> Vec<u8> {
        match self.declared_key_next_bytes(state) {
            Some(mut bytes) => {
                bytes.extend([b'"', b'a']);
                bytes
            }
            None => search_bytes().collect(),
        }
    }

    fn inside_lexeme(&mut self, state: JsonState) -> bool {
        matches!(
            state.lex,
            Lex::Str { .. } | Lex::Num { .. } | Lex::Lit { .. } | Lex::Word { .. } | Lex::KeyStr { .. }
        )
    }

    /// Depth-first out of a lexeme, bytes in search order, no state twice.
    fn lexeme_depth_first(
        &mut self,
        start: JsonState,
        shortest: &Shortest,
        memo: &mut CompletionMemo,
    ) -> Option<Vec<u8>> {
        let mut seen = HashSet::from([start]);
        // (state left, index of the byte taken in search order, the byte)
        let mut path: Vec<(JsonState, usize, u8)> = Vec::new();
        let (mut state, mut from) = (start, 0);
        loop {
            let mut taken = None;
            if from == 0 {
                if let Some(rest) = self
                    .end_value(state)
                    .and_then(|after| self.completion(after, shortest, memo))
                {
                    let bytes: Vec<u8> = path.iter().map(|&(_, _, b)| b).chain(rest).collect();
                    return Some(bytes);
                }
            }
            for (i, byte) in search_bytes().enumerate().skip(from) {
                let Some(next) = self.step(state, byte) else {
                    continue;
                };
                if !self.inside_lexeme(next) {
                    if self.ends_before(state, byte) {
                        continue;
                    }
                    if let Some(rest) = self.completion(next, shortest, memo) {
                        let mut bytes: Vec<u8> = path.iter().map(|&(_, _, b)| b).collect();
                        bytes.push(byte);
                        bytes.extend(rest);
                        return Some(bytes);
                    }
                } else if path.len() < LEXEME_LIMIT && seen.insert(next) {
                    taken = Some((i, byte, next));
                    break;
                }
            }
            match taken {
                Some((i, byte, next)) => {
                    path.push((state, i, byte));
                    (state, from) = (next, 0);
                }
                None => {
                    let (back, i, _) = path.pop()?;
                    (state, from) = (back, i + 1);
                }
            }
        }
    }
}

/// What the completion's searches ask of the automaton.
impl JsonMachine<'_> {
    /// Inside a key still in the declared names' trie: the rest of each
    /// declared name from here (a plain token that is not a prefix of one
    /// leaves the trie for an undeclared key).
    pub fn declared_key_rests(&self, state: JsonState) -> Vec<Vec<u8>> {
        let Lex::KeyStr { at: Some(node), .. } = state.lex else {
            return Vec::new();
        };
        let Some(shape) = self.object(self.stacks.top(state.stack)) else {
            return Vec::new();
        };
        let keys = &self.arena.tries[shape.keys as usize];
        let mut rests = Vec::new();
        let mut todo = vec![(node, Vec::new())];
        while let Some((at, path)) = todo.pop() {
            if !keys.has_children(at) {
                rests.push(path);
                continue;
            }
            for byte in 0..=255u8 {
                if let Some(next) = keys.step(at, byte) {
                    let mut longer = path.clone();
                    longer.push(byte);
                    todo.push((next, longer));
                }
            }
        }
        rests
    }

    /// Inside a string with a pattern and no length bound, between
    /// characters: the pattern's shortest rest and the closing quote, when
    /// they need no escape.
    pub(super) fn pattern_rest(&self, state: JsonState) -> Option<Vec<u8>> {
        let Lex::Str { node, text } = state.lex else {
            return None;
        };
        let rules = self.text_rules(node);
        let Some(TextPattern::Value(pattern)) = rules.pattern else {
            return None;
        };
        if !text.at_boundary() || rules.bounds.max != u32::MAX || text.count < rules.bounds.min {
            return None;
        }
        let mut rest = pattern.plain_rest(text.dfa)?;
        rest.push(b'"');
        Some(rest)
    }

    /// Inside a key of an object read through a key table (`patternProperties`, `propertyNames`).
    pub(super) fn in_key_table(&self, state: JsonState) -> bool {
        self.object(self.stacks.top(state.stack))
            .is_some_and(|shape| shape.key_table.is_some())
    }

    /// Inside a key still in the declared names' trie, at a character
    /// boundary, of an object without a key table: the bytes that continue a
    /// declared name.
    pub(super) fn declared_key_next_bytes(&self, state: JsonState) -> Option<Vec<u8>> {
        let Lex::KeyStr { at: Some(node), text } = state.lex else {
            return None;
        };
        let shape = self.object(self.stacks.top(state.stack))?;
        if shape.key_table.is_some() || !text.at_boundary() {
            return None;
        }
        let keys = &self.arena.tries[shape.keys as usize];
        Some((0..=255u8).filter(|&b| keys.step(node, b).is_some()).collect())
    }

    /// Whether the number or literal of `state` ends before `byte` (which
    /// then belongs to what follows). A completion prices such an end from
    /// [`end_value`](Self::end_value) instead, so its search never starts
    /// another entry where the container's own completion writes the
    /// properties it still owes.
    pub(super) fn ends_before(&self, state: JsonState, byte: u8) -> bool {
        match state.lex {
            Lex::Num { node, num } => matches!(num.step(self.number_shape(node), byte), Some(NumStep::Ended)),
            Lex::Lit { trie, at } => self.arena.tries[trie as usize].step(at, byte).is_none(),
            _ => false,
        }
    }

    /// The state after the number or literal of `state` ends here (as it
    /// would before a following `,` `}` `]`, or at the end of the input).
    pub(super) fn end_value(&mut self, state: JsonState) -> Option<JsonState> {
        match state.lex {
            Lex::Num { node, num } if num.complete(self.number_shape(node)) => self.complete(state.stack),
            Lex::Lit { trie, at } if self.arena.tries[trie as usize].terminal(at).is_some() => {
                self.complete(state.stack)
            }
            _ => None,
        }
    }
}
