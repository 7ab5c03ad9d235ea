//! Stepping the automaton: values, containers and keys (strings' insides are
//! in [`super::text`]).

use super::number::{NumLex, NumStep};
use super::text::{Bounds, TextAt, TextPattern, TextRules, TextStep};
use super::{Frame, JsonState, Lex, StackId, Stacks, WORDS};
use crate::literal::{LitNode, LiteralTrie};
use crate::pattern::KeyEnd;
use crate::schema::{ArrayShape, Node, NodeId, NumberShape, ObjectShape, SchemaArena, StringShape, MAX_DEPTH};

/// `current` when the value being read belongs to an undeclared property:
/// this bit, with the set of key patterns the key matched (0 without a key table).
const UNDECLARED: u32 = 1 << 31;

/// Which keys may start next in an object.
#[derive(Clone, Copy)]
struct KeyChoices {
    /// Declared properties (bits).
    declared: u64,
    /// Whether an undeclared property may come (objects without a key table).
    additional: bool,
    /// With a key table: the pattern sets an undeclared key may match (bits).
    sets: u64,
}

/// Where a byte leads from one thread: nowhere, one thread, or several (a union's alternatives).
enum Next {
    None,
    One(JsonState),
    Many(Vec<JsonState>),
}

impl Next {
    fn from(state: Option<JsonState>) -> Self {
        state.map_or(Next::None, Next::One)
    }

    fn into_threads(self, out: &mut Vec<JsonState>) {
        match self {
            Next::None => {}
            Next::One(state) => out.push(state),
            Next::Many(states) => out.extend(states),
        }
    }
}

/// The automaton over one schema arena, with the stacks it has interned.
pub(crate) struct JsonMachine<'a> {
    pub arena: &'a SchemaArena,
    pub stacks: &'a mut Stacks,
}

impl<'a> JsonMachine<'a> {
    /// The state after `byte`, or `None` when no valid value continues that way.
    pub fn step(&mut self, state: JsonState, byte: u8) -> Option<JsonState> {
        let Lex::Many(set) = state.lex else {
            return match self.step_thread(state, byte) {
                Next::None => None,
                Next::One(next) => Some(next),
                Next::Many(threads) => self.stacks.gather(dedup(threads)),
            };
        };
        if let Some(&next) = self.stacks.set_steps.get(&(set, byte)) {
            return next;
        }
        let mut threads = Vec::new();
        for thread in self.stacks.sets[set as usize].clone() {
            self.step_thread(thread, byte).into_threads(&mut threads);
        }
        let next = self.stacks.gather(dedup(threads));
        self.stacks.set_steps.insert((set, byte), next);
        next
    }

    /// Whether the input may end after `state`: the top-level value is complete
    /// (a top-level number or literal that could still go on counts as complete).
    pub fn is_complete(&mut self, state: JsonState) -> bool {
        if let Lex::Many(set) = state.lex {
            return self.stacks.sets[set as usize]
                .clone()
                .into_iter()
                .any(|t| self.is_complete(t));
        }
        if state.stack != 0 {
            return false;
        }
        match state.lex {
            Lex::Done => true,
            Lex::Num { node, num } => num.complete(self.number_shape(node)),
            Lex::Lit { trie, at } => self.arena.tries[trie as usize].terminal(at).is_some(),
            _ => false,
        }
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

    fn step_thread(&mut self, state: JsonState, byte: u8) -> Next {
        let JsonState { stack, lex } = state;
        let at = |lex| Next::One(JsonState { stack, lex });
        match lex {
            Lex::Value { node, spaced } => {
                if byte == b' ' && !spaced {
                    return at(Lex::Value { node, spaced: true });
                }
                self.start_value(stack, node, byte)
            }
            Lex::Str { node, text } => match text.step(byte, &self.text_rules(node)) {
                None => Next::None,
                Some(TextStep::End) => Next::from(self.complete(stack)),
                Some(TextStep::Inside(text)) => at(Lex::Str { node, text }),
            },
            Lex::Lit { trie, at: node } => Next::from(self.literal_byte(stack, trie, node, byte)),
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
            Lex::Num { node, num } => Next::from(self.number_byte(stack, node, num, byte)),
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
            Lex::Done | Lex::Many(_) => Next::None,
        }
    }

    fn start_value(&mut self, stack: StackId, node: NodeId, byte: u8) -> Next {
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
            Node::Literals(trie) => Next::from(self.literal_byte(stack, *trie, 0, byte)),
            Node::Array(_) | Node::Object(_) => Next::from(self.open(stack, node, byte)),
            Node::Union(alternatives) => {
                let mut threads = Vec::new();
                for alt in alternatives.clone() {
                    self.start_value(stack, alt, byte).into_threads(&mut threads);
                }
                match threads.len() {
                    0 => Next::None,
                    1 => Next::One(threads[0]),
                    _ => Next::Many(threads),
                }
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
        let depth = if stack == 0 {
            1
        } else {
            self.stacks.top(stack).depth + 1
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
        let num = NumLex::start(self.number_shape(node), byte)?;
        Some(JsonState {
            stack,
            lex: Lex::Num { node, num },
        })
    }

    fn number_byte(&mut self, stack: StackId, node: NodeId, num: NumLex, byte: u8) -> Option<JsonState> {
        match num.step(self.number_shape(node), byte)? {
            NumStep::Inside(num) => Some(JsonState {
                stack,
                lex: Lex::Num { node, num },
            }),
            // The number ended before `byte`; `byte` belongs to what follows.
            NumStep::Ended => {
                let after = self.complete(stack)?;
                self.step(after, byte)
            }
        }
    }

    fn literal_byte(&mut self, stack: StackId, trie: u32, node: LitNode, byte: u8) -> Option<JsonState> {
        let literals = &self.arena.tries[trie as usize];
        if let Some(next) = literals.step(node, byte) {
            if literals.terminal(next).is_some() && !literals.has_children(next) {
                return self.complete(stack);
            }
            return Some(JsonState {
                stack,
                lex: Lex::Lit { trie, at: next },
            });
        }
        // A literal that is a prefix of another (`1` and `10`) ends here; `byte` follows it.
        if node != 0 && literals.terminal(node).is_some() {
            let after = self.complete(stack)?;
            return self.step(after, byte);
        }
        None
    }

    /// Which keys may start next in an object: declared ones and undeclared
    /// ones. With `maxProperties`, once the properties still required fill
    /// what is left, only they may come. Keys whose values could not close
    /// within [`MAX_DEPTH`] here are left out.
    fn key_choices(&self, shape: &ObjectShape, frame: Frame) -> KeyChoices {
        let none = KeyChoices {
            declared: 0,
            additional: false,
            sets: 0,
        };
        let count = frame.seen.count_ones() + frame.extra;
        let missing = shape.required & !frame.seen;
        if count >= shape.max_props {
            return none;
        }
        if count + missing.count_ones() >= shape.max_props {
            return KeyChoices {
                declared: missing,
                ..none
            };
        }
        let fits = |node: NodeId| frame.depth + self.arena.need(node) <= MAX_DEPTH;
        let too_deep = (0..shape.props.len())
            .filter(|&i| !fits(shape.props[i]))
            .fold(0u64, |bits, i| bits | 1 << i);
        let sets = shape
            .by_pattern
            .iter()
            .enumerate()
            .filter(|&(_, &node)| !self.arena.is_never(node) && fits(node))
            .fold(0u64, |bits, (i, _)| bits | 1 << i);
        KeyChoices {
            declared: !frame.seen & !shape.forbidden & !(too_deep & !missing),
            additional: shape.key_table.is_none() && shape.additional.is_some_and(fits),
            sets,
        }
    }

    /// Whether the object may close: required properties present, enough of them.
    fn may_close(shape: &ObjectShape, frame: Frame) -> bool {
        shape.required & !frame.seen == 0 && frame.seen.count_ones() + frame.extra >= shape.min_props
    }

    fn key_possible(&self, shape: &ObjectShape, frame: Frame) -> bool {
        let choices = self.key_choices(shape, frame);
        match shape.key_table {
            Some(table) => self.arena.key_tables[table as usize].live(0, choices.declared, choices.sets),
            None => choices.additional || self.arena.tries[shape.keys as usize].below(0) & choices.declared != 0,
        }
    }

    fn key_start(&mut self, stack: StackId, spaced: bool, first: bool, byte: u8) -> Option<JsonState> {
        let frame = self.stacks.top(stack);
        let shape = self.object(frame)?;
        match byte {
            b' ' if !spaced => Some(JsonState {
                stack,
                lex: Lex::Key { spaced: true, first },
            }),
            b'"' if self.key_possible(shape, frame) => Some(JsonState {
                stack,
                lex: Lex::KeyStr {
                    at: shape.key_table.is_none().then_some(0),
                    text: TextAt::START,
                },
            }),
            b'}' if first && Self::may_close(shape, frame) => self.close(stack),
            _ => None,
        }
    }

    fn key_byte(&mut self, stack: StackId, node: Option<LitNode>, text: TextAt, byte: u8) -> Option<JsonState> {
        let frame = self.stacks.top(stack);
        let shape = self.object(frame)?;
        let choices = self.key_choices(shape, frame);
        if let Some(table) = shape.key_table {
            return self.table_key_byte(stack, frame, table, choices, text, byte);
        }
        let keys: &LiteralTrie = &self.arena.tries[shape.keys as usize];
        let rules = TextRules {
            canonical: true,
            ..TextRules::ANY
        };
        match text.step(byte, &rules)? {
            TextStep::End => {
                // The key ended: an allowed declared property, or an undeclared one if allowed.
                let current = match node.and_then(|n| keys.terminal(n)) {
                    Some(i) if choices.declared & (1 << i) != 0 => i,
                    Some(_) => return None,
                    None if choices.additional => UNDECLARED,
                    None => return None,
                };
                let stack = self.stacks.replace(stack, Frame { current, ..frame });
                Some(JsonState { stack, lex: Lex::Colon })
            }
            TextStep::Inside(text) => {
                let next = node.and_then(|n| keys.step(n, byte));
                let live = next.is_some_and(|n| keys.below(n) & choices.declared != 0);
                if !choices.additional && !live {
                    return None;
                }
                Some(JsonState {
                    stack,
                    lex: Lex::KeyStr { at: next, text },
                })
            }
        }
    }

    /// A key byte in an object with a key table (`patternProperties`, `propertyNames`).
    fn table_key_byte(
        &mut self,
        stack: StackId,
        frame: Frame,
        table: u32,
        choices: KeyChoices,
        text: TextAt,
        byte: u8,
    ) -> Option<JsonState> {
        let keys = &self.arena.key_tables[table as usize];
        let rules = TextRules {
            canonical: true,
            pattern: Some(TextPattern::Key {
                keys,
                declared: choices.declared,
                sets: choices.sets,
            }),
            ..TextRules::ANY
        };
        match text.step(byte, &rules)? {
            TextStep::End => {
                let current = match keys.end(text.dfa)? {
                    KeyEnd::Declared(i) => i,
                    KeyEnd::Undeclared(set) => UNDECLARED | set as u32,
                };
                let stack = self.stacks.replace(stack, Frame { current, ..frame });
                Some(JsonState { stack, lex: Lex::Colon })
            }
            TextStep::Inside(text) => Some(JsonState {
                stack,
                lex: Lex::KeyStr { at: None, text },
            }),
        }
    }

    fn colon(&mut self, stack: StackId, byte: u8) -> Option<JsonState> {
        let frame = self.stacks.top(stack);
        let shape = self.object(frame)?;
        let node = match frame.current {
            c if c & UNDECLARED == 0 => shape.props[c as usize],
            c if shape.key_table.is_some() => shape.by_pattern[(c & !UNDECLARED) as usize],
            _ => shape.additional?,
        };
        (byte == b':').then_some(JsonState {
            stack,
            lex: Lex::Value { node, spaced: false },
        })
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
    fn close(&mut self, stack: StackId) -> Option<JsonState> {
        let parent = self.stacks.parent(stack);
        self.complete(parent)
    }

    /// A value inside the container on top of `stack` (or at the top level) is complete.
    pub(super) fn complete(&mut self, stack: StackId) -> Option<JsonState> {
        if stack == 0 {
            return Some(JsonState { stack, lex: Lex::Done });
        }
        let frame = self.stacks.top(stack);
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
