//! Stepping the automaton: values, containers and keys (strings' insides are
//! in [`super::text`]).

use super::number::{NumLex, NumStep};
use super::text::{Bounds, TextAt, TextPattern, TextRules, TextStep};
use super::{Frame, JsonState, Lex, Shortest, StackId, Stacks, WORDS};
use crate::literal::LitNode;
use crate::schema::{ArrayShape, Node, NodeId, NumberShape, ObjectShape, SchemaArena, StringShape, MAX_DEPTH};

/// `current` when the value being read belongs to an undeclared property:
/// this bit, with the set of key patterns the key matched (0 without a key table).
pub(super) const UNDECLARED: u32 = 1 << 31;

/// Where a byte leads from one thread: nowhere, one thread, several (a
/// union's alternatives), or to the end of a `oneOf` alternative's value
/// before this byte (the marker's stack), which [`JsonMachine::resolve`]
/// settles with the other alternatives.
pub(super) enum Next {
    None,
    One(JsonState),
    Many(Vec<JsonState>),
    Pending(StackId),
}

impl Next {
    fn from(state: Option<JsonState>) -> Self {
        state.map_or(Next::None, Next::One)
    }

    /// Nowhere, one thread or several.
    pub(super) fn of(mut threads: Vec<JsonState>) -> Self {
        match threads.len() {
            0 => Next::None,
            1 => Next::One(threads.remove(0)),
            _ => Next::Many(threads),
        }
    }

    pub(super) fn into_threads(self, out: &mut Vec<JsonState>, pending: &mut Vec<StackId>) {
        match self {
            Next::None => {}
            Next::One(state) => out.push(state),
            Next::Many(states) => out.extend(states),
            Next::Pending(marker) => pending.push(marker),
        }
    }
}

/// The automaton over one schema arena, with the stacks it has interned.
pub(crate) struct JsonMachine<'a> {
    pub arena: &'a SchemaArena,
    pub stacks: &'a mut Stacks,
    /// Shortest values, where known: a contested `oneOf` state is cleared by
    /// its threads' own completions before any search.
    pub shortest: Option<&'a Shortest>,
}

impl<'a> JsonMachine<'a> {
    /// The state after `byte`, or `None` when no valid value continues that
    /// way (for an overlapping `oneOf`: when no completion is accepted by
    /// exactly one alternative, see [`live`](Self::live)).
    pub fn step(&mut self, state: JsonState, byte: u8) -> Option<JsonState> {
        let next = self.step_raw(state, byte)?;
        // Only a set of threads can hold a contested `oneOf`.
        match next.lex {
            Lex::Many(_) => self.live(next).then_some(next),
            _ => Some(next),
        }
    }

    /// [`step`](Self::step) without the liveness check of contested `oneOf`s.
    pub(super) fn step_raw(&mut self, state: JsonState, byte: u8) -> Option<JsonState> {
        let Lex::Many(set) = state.lex else {
            return match self.step_thread(state, byte) {
                Next::None => None,
                Next::One(next) => Some(next),
                other => self.settle(vec![other], Some(byte)),
            };
        };
        if let Some(&next) = self.stacks.set_steps.get(&(set, byte)) {
            return next;
        }
        let threads = self.stacks.sets[set as usize].clone();
        let steps = threads
            .into_iter()
            .map(|thread| self.step_thread(thread, byte))
            .collect();
        let next = self.settle(steps, Some(byte));
        self.stacks.set_steps.insert((set, byte), next);
        next
    }

    /// One state from the threads' steps, `oneOf` ends resolved first.
    fn settle(&mut self, steps: Vec<Next>, byte: Option<u8>) -> Option<JsonState> {
        let (mut threads, mut pending) = (Vec::new(), Vec::new());
        for next in steps {
            next.into_threads(&mut threads, &mut pending);
        }
        self.resolve(pending, byte, &mut threads);
        self.stacks.gather(dedup(threads))
    }

    /// Whether the input may end after `state`: the top-level value is complete
    /// (a top-level number or literal that could still go on counts as
    /// complete; a `oneOf` value when exactly one alternative accepts it).
    pub fn is_complete(&mut self, state: JsonState) -> bool {
        let threads = match state.lex {
            Lex::Many(set) => self.stacks.sets[set as usize].clone(),
            _ => vec![state],
        };
        let (mut ends, mut pending) = (Vec::new(), Vec::new());
        for thread in threads {
            let end = match thread.lex {
                Lex::Ended | Lex::Done => Some(thread),
                _ => self.end_value(thread),
            };
            match end {
                Some(JsonState { lex: Lex::Done, .. }) => return true,
                Some(JsonState { lex: Lex::Ended, stack }) => pending.push(stack),
                _ => {}
            }
        }
        self.resolve(pending, None, &mut ends);
        ends.iter().any(JsonState::is_done)
    }

    /// Whether every token of whole UTF-8 characters without `"`, `\\` or
    /// control bytes, `longest` bytes at most, is allowed from `state` and
    /// leads to a state whose completion is no longer: inside a string without
    /// a pattern whose `maxLength` such a token cannot pass (the count only
    /// moves towards `minLength`), or inside a key that can only be an
    /// undeclared one (or may be, in an object that takes undeclared keys).
    pub fn in_plain_string(&self, state: JsonState, longest: u32) -> bool {
        match state.lex {
            Lex::Str { node, text } => {
                let rules = self.text_rules(node);
                let room = rules.bounds.max == u32::MAX || text.count.saturating_add(longest) <= rules.bounds.max;
                rules.pattern.is_none() && text.at_boundary() && room
            }
            Lex::KeyStr { at, text } => {
                let frame = self.stacks.top(state.stack);
                // Undeclared keys only while the object may still take one (maxProperties, depth).
                text.at_boundary()
                    && self.object(frame).is_some_and(|shape| {
                        shape.key_table.is_none() && (at.is_none() || self.key_choices(shape, frame).additional)
                    })
            }
            _ => false,
        }
    }

    /// Inside a string without a pattern, between characters, with a
    /// `maxLength`: the characters still allowed (`None` otherwise).
    pub fn string_room(&self, state: JsonState) -> Option<u32> {
        let Lex::Str { node, text } = state.lex else {
            return None;
        };
        let rules = self.text_rules(node);
        let bounded = rules.pattern.is_none() && text.at_boundary() && rules.bounds.max != u32::MAX;
        bounded.then(|| rules.bounds.max.saturating_sub(text.count))
    }

    pub(super) fn object(&self, frame: Frame) -> Option<&'a ObjectShape> {
        match &self.arena.nodes[frame.node as usize] {
            Node::Object(shape) => Some(shape),
            _ => None,
        }
    }

    pub(super) fn array(&self, frame: Frame) -> Option<&'a ArrayShape> {
        match &self.arena.nodes[frame.node as usize] {
            Node::Array(shape) => Some(shape),
            _ => None,
        }
    }

    pub(super) fn text_rules(&self, node: NodeId) -> TextRules<'_> {
        let shape = match &self.arena.nodes[node as usize] {
            Node::String(shape) => *shape,
            _ => StringShape::ANY,
        };
        TextRules {
            bounds: Bounds {
                min: shape.min_len,
                max: shape.max_len,
            },
            canonical: shape.pattern.is_some(),
            pattern: shape
                .pattern
                .map(|p| TextPattern::Value(&self.arena.patterns[p as usize])),
        }
    }

    pub(super) fn step_thread(&mut self, state: JsonState, byte: u8) -> Next {
        let JsonState { stack, lex } = state;
        let at = |lex| Next::One(JsonState { stack, lex });
        match lex {
            Lex::Value { node, spaced } => {
                if byte == b' ' && !spaced {
                    return at(Lex::Value { node, spaced: true });
                }
                self.start_value(stack, node, byte)
            }
            Lex::Str { node, text } => match text.step(byte, &self.text_rules_at(stack, node)) {
                None => Next::None,
                Some(TextStep::End) => Next::from(self.complete(stack)),
                Some(TextStep::Inside(text)) => at(Lex::Str { node, text }),
            },
            Lex::Lit { trie, at: node } => self.literal_byte(stack, trie, node, byte),
            Lex::Word { word, at: pos } => {
                let spelled = WORDS[word as usize];
                if spelled[pos as usize] != byte {
                    return Next::None;
                }
                if pos as usize + 1 == spelled.len() {
                    Next::from(self.complete(stack))
                } else {
                    at(Lex::Word { word, at: pos + 1 })
                }
            }
            Lex::Num { node, num } => self.number_byte(stack, node, num, byte),
            Lex::Key { spaced, first } => Next::from(self.key_start(stack, spaced, first, byte)),
            Lex::KeyStr { at: node, text } => Next::from(self.key_byte(stack, node, text, byte)),
            Lex::Colon => Next::from(self.colon(stack, byte)),
            Lex::ArrayFirst => {
                let frame = self.stacks.top(stack);
                let Some(shape) = self.array(frame) else {
                    return Next::None;
                };
                match (byte, shape.item(0)) {
                    (b']', _) if shape.min == 0 => Next::from(self.close(stack)),
                    (_, Some(item)) if shape.max > 0 => self.start_value(stack, item, byte),
                    _ => Next::None,
                }
            }
            Lex::After => Next::from(self.after_value(stack, byte)),
            // The alternative's value ended before this byte.
            Lex::Ended => Next::Pending(stack),
            Lex::Done | Lex::Many(_) => Next::None,
        }
    }

    pub(super) fn start_value(&mut self, stack: StackId, node: NodeId, byte: u8) -> Next {
        let at = |lex| Next::One(JsonState { stack, lex });
        match &self.arena.nodes[node as usize] {
            Node::Any => match byte {
                b'{' => Next::from(self.open(stack, self.arena.any_object, byte)),
                b'[' => Next::from(self.open(stack, self.arena.any_array, byte)),
                b'"' => at(Lex::Str {
                    node,
                    text: TextAt::START,
                }),
                b't' => at(Lex::Word { word: 0, at: 1 }),
                b'f' => at(Lex::Word { word: 1, at: 1 }),
                b'n' => at(Lex::Word { word: 2, at: 1 }),
                _ => Next::from(self.number_start(stack, self.arena.any_number, byte)),
            },
            Node::Never | Node::Pending => Next::None,
            Node::Null => match byte {
                b'n' => at(Lex::Word { word: 2, at: 1 }),
                _ => Next::None,
            },
            Node::Boolean => match byte {
                b't' => at(Lex::Word { word: 0, at: 1 }),
                b'f' => at(Lex::Word { word: 1, at: 1 }),
                _ => Next::None,
            },
            Node::Number(_) => Next::from(self.number_start(stack, node, byte)),
            Node::String(_) => match byte {
                b'"' => at(Lex::Str {
                    node,
                    text: TextAt::START,
                }),
                _ => Next::None,
            },
            Node::Literals(trie) => {
                let trie = self.arena.literal_trie(*trie, self.strict(stack));
                self.literal_byte(stack, trie, 0, byte)
            }
            Node::Array(_) | Node::Object(_) => Next::from(self.open(stack, node, byte)),
            Node::Union(alternatives) => {
                let mut threads = Vec::new();
                for alt in alternatives.clone() {
                    self.start_value(stack, alt, byte)
                        .into_threads(&mut threads, &mut Vec::new());
                }
                Next::of(threads)
            }
            Node::OneOf(alternatives) => {
                let alternatives = alternatives.clone();
                self.start_alternatives(stack, node, &alternatives, byte)
            }
        }
    }

    /// `byte` opens a container of `node` (an array or object shape): push its frame.
    fn open(&mut self, stack: StackId, node: NodeId, byte: u8) -> Option<JsonState> {
        let lex = match (&self.arena.nodes[node as usize], byte) {
            (Node::Array(_), b'[') => Lex::ArrayFirst,
            (Node::Object(_), b'{') => Lex::Key {
                spaced: true,
                first: true,
            },
            _ => return None,
        };
        let (depth, strict) = match stack {
            0 => (1, false),
            _ => (self.stacks.top(stack).depth + 1, self.strict(stack)),
        };
        // The container must be able to close within the limit (recursive shapes).
        if depth - 1 + self.arena.need(node).max(1) > MAX_DEPTH {
            return None;
        }
        let frame = Frame {
            node,
            seen: 0,
            extra: 0,
            current: 0,
            depth,
            strict,
        };
        Some(JsonState {
            stack: self.stacks.push(stack, frame),
            lex,
        })
    }

    pub(super) fn number_shape(&self, node: NodeId) -> &NumberShape {
        match &self.arena.nodes[node as usize] {
            Node::Number(shape) => shape,
            _ => &NumberShape::ANY,
        }
    }

    fn number_start(&mut self, stack: StackId, node: NodeId, byte: u8) -> Option<JsonState> {
        let num = NumLex::start(self.number_shape(node), byte, self.strict(stack))?;
        Some(JsonState {
            stack,
            lex: Lex::Num { node, num },
        })
    }

    fn number_byte(&mut self, stack: StackId, node: NodeId, num: NumLex, byte: u8) -> Next {
        match num.step(self.number_shape(node), byte) {
            None => Next::None,
            Some(NumStep::Inside(num)) => Next::One(JsonState {
                stack,
                lex: Lex::Num { node, num },
            }),
            // The number ended before `byte`; `byte` belongs to what follows.
            Some(NumStep::Ended) => self.ended_before(stack, byte),
        }
    }

    /// The value on top of `stack` ended before `byte`: `byte` after it (a
    /// `oneOf` alternative's end is settled with the others first).
    fn ended_before(&mut self, stack: StackId, byte: u8) -> Next {
        match self.complete(stack) {
            None => Next::None,
            Some(JsonState { lex: Lex::Ended, stack }) => Next::Pending(stack),
            Some(after) => self.step_thread(after, byte),
        }
    }

    fn literal_byte(&mut self, stack: StackId, trie: u32, node: LitNode, byte: u8) -> Next {
        let literals = &self.arena.tries[trie as usize];
        if let Some(next) = literals.step(node, byte) {
            if literals.terminal(next).is_some() && !literals.has_children(next) {
                return Next::from(self.complete(stack));
            }
            return Next::One(JsonState {
                stack,
                lex: Lex::Lit { trie, at: next },
            });
        }
        // A literal that is a prefix of another (`1` and `10`) ends here; `byte` follows it.
        if node != 0 && literals.terminal(node).is_some() {
            return self.ended_before(stack, byte);
        }
        Next::None
    }

    fn after_value(&mut self, stack: StackId, byte: u8) -> Option<JsonState> {
        let frame = self.stacks.top(stack);
        if let Some(shape) = self.object(frame) {
            return match byte {
                b',' if self.key_possible(shape, frame) => Some(JsonState {
                    stack,
                    lex: Lex::Key {
                        spaced: false,
                        first: false,
                    },
                }),
                b'}' if Self::may_close(shape, frame) => self.close(stack),
                _ => None,
            };
        }
        let shape = self.array(frame)?;
        match byte {
            b',' if frame.seen < shape.max => {
                let node = shape.item(frame.seen)?;
                if frame.depth + self.arena.need(node) > MAX_DEPTH {
                    return None;
                }
                Some(JsonState {
                    stack,
                    lex: Lex::Value { node, spaced: false },
                })
            }
            b']' if frame.seen >= shape.min => self.close(stack),
            _ => None,
        }
    }

    /// The container on top of `stack` closed: it is a complete value of its parent.
    pub(super) fn close(&mut self, stack: StackId) -> Option<JsonState> {
        let parent = self.stacks.parent(stack);
        self.complete(parent)
    }

    /// A value inside the container on top of `stack` (or at the top level) is complete.
    pub(super) fn complete(&mut self, stack: StackId) -> Option<JsonState> {
        if stack == 0 {
            return Some(JsonState { stack, lex: Lex::Done });
        }
        let frame = self.stacks.top(stack);
        if self.is_marker(frame) {
            return Some(JsonState { stack, lex: Lex::Ended });
        }
        let frame = match self.object(frame) {
            Some(_) if frame.current & UNDECLARED != 0 => Frame {
                extra: frame.extra + 1,
                ..frame
            },
            Some(_) => Frame {
                seen: frame.seen | (1 << frame.current),
                ..frame
            },
            None => Frame {
                seen: frame.seen.saturating_add(1),
                ..frame
            },
        };
        let stack = self.stacks.replace(stack, frame);
        Some(JsonState { stack, lex: Lex::After })
    }
}

/// Threads without repeats, in first-seen order.
fn dedup(threads: Vec<JsonState>) -> Vec<JsonState> {
    let mut kept: Vec<JsonState> = Vec::with_capacity(threads.len());
    for thread in threads {
        if !kept.contains(&thread) {
            kept.push(thread);
        }
    }
    kept
}
