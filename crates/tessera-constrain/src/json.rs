//! The byte-level JSON automaton for one schema: a lexer state (`Lex`, small
//! and `Copy`) plus the stack of open containers, interned in an arena so a
//! whole state is two words. Inside strings and numbers only the lexer state
//! changes; containers are interned only on structural bytes.
//!
//! Every state it reaches can still be completed into a value the schema
//! accepts (no dead ends): a key is only begun when some key may follow, `}`
//! only when the required properties are present, `,` only when another item
//! or key is possible. One optional space is accepted after `:` and `,`
//! (never more: a model cannot loop on whitespace).

use crate::literal::LitNode;
use crate::schema::{Node, NodeId, ObjectShape, SchemaArena, MAX_DEPTH};
use std::collections::HashMap;

/// An interned stack of open containers; 0 is the empty stack.
pub(crate) type StackId = u32;

/// `current` when the value being read belongs to an undeclared property.
const ADDITIONAL: u32 = u32::MAX;

/// One open container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    node: NodeId,
    /// Objects: bit set of the properties seen. Arrays: items so far.
    seen: u64,
    /// Objects: the property whose value is being read.
    current: u32,
    depth: u32,
}

/// Interned container stacks.
#[derive(Debug, Clone)]
pub(crate) struct Stacks {
    entries: Vec<(StackId, Frame)>,
    index: HashMap<(StackId, Frame), StackId>,
}

impl Default for Stacks {
    fn default() -> Self {
        let sentinel = Frame {
            node: 0,
            seen: 0,
            current: 0,
            depth: 0,
        };
        Self {
            entries: vec![(0, sentinel)],
            index: HashMap::new(),
        }
    }
}

impl Stacks {
    fn push(&mut self, parent: StackId, frame: Frame) -> StackId {
        if let Some(&id) = self.index.get(&(parent, frame)) {
            return id;
        }
        self.entries.push((parent, frame));
        let id = (self.entries.len() - 1) as StackId;
        self.index.insert((parent, frame), id);
        id
    }

    fn top(&self, id: StackId) -> Frame {
        self.entries[id as usize].1
    }

    fn parent(&self, id: StackId) -> StackId {
        self.entries[id as usize].0
    }

    /// Replace the top frame.
    fn replace(&mut self, id: StackId, frame: Frame) -> StackId {
        let parent = self.parent(id);
        self.push(parent, frame)
    }
}

/// Position inside a string escape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Esc {
    None,
    Backslash,
    /// Hex digits still expected after `\u`.
    Hex(u8),
}

/// Position inside a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum NumAt {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

const WORDS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// What the lexer expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Lex {
    /// A value of `node`; `spaced` once a leading space was read (or is not allowed).
    Value {
        node: NodeId,
        spaced: bool,
    },
    Str {
        esc: Esc,
    },
    Lit {
        trie: u32,
        at: LitNode,
    },
    Word {
        word: u8,
        at: u8,
    },
    Num {
        integer: bool,
        at: NumAt,
    },
    /// In an object: `"` to start a key, or `}` when `first` (right after `{`).
    Key {
        spaced: bool,
        first: bool,
    },
    /// Inside a key; `at` is the position in the declared-key trie (`None` once it left it).
    KeyStr {
        at: Option<LitNode>,
        esc: Esc,
    },
    Colon,
    /// Right after `[`: a value or `]`.
    ArrayFirst,
    /// After a value inside a container: `,` or the closing bracket.
    After,
    /// The top-level value is complete.
    Done,
}

/// A whole automaton state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct JsonState {
    pub stack: StackId,
    pub lex: Lex,
}

impl JsonState {
    /// Expecting a value of `node` at the top level (no leading space).
    pub fn start(node: NodeId) -> Self {
        Self {
            stack: 0,
            lex: Lex::Value { node, spaced: true },
        }
    }

    /// Whether the top-level value is complete.
    pub fn is_done(&self) -> bool {
        self.lex == Lex::Done
    }

    /// Whether it is inside a free string value, or inside a key that already left
    /// the declared keys, past any escape: where every byte but `"`, `\` and control
    /// bytes leaves the state as it is.
    pub fn in_plain_string(&self) -> bool {
        matches!(
            self.lex,
            Lex::Str { esc: Esc::None }
                | Lex::KeyStr {
                    at: None,
                    esc: Esc::None
                }
        )
    }
}

fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

/// The automaton over one schema arena, with the stacks it has interned.
pub(crate) struct JsonMachine<'a> {
    pub arena: &'a SchemaArena,
    pub stacks: &'a mut Stacks,
}

impl JsonMachine<'_> {
    /// Whether every byte but `"`, `\\` and control bytes leaves `state` as it is
    /// or keeps it valid: inside a free string value, past any escape, or inside a
    /// key of an object that takes undeclared keys (a key leaving the declared
    /// names is still a valid key there).
    pub fn in_plain_string(&self, state: JsonState) -> bool {
        match state.lex {
            Lex::KeyStr {
                at: Some(_),
                esc: Esc::None,
            } => self
                .object(self.stacks.top(state.stack))
                .is_some_and(|shape| shape.additional.is_some()),
            _ => state.in_plain_string(),
        }
    }

    fn object(&self, frame: Frame) -> Option<&ObjectShape> {
        match &self.arena.nodes[frame.node as usize] {
            Node::Object(shape) => Some(shape),
            _ => None,
        }
    }

    /// The state after `byte`, or `None` when no valid value continues that way.
    pub fn step(&mut self, state: JsonState, byte: u8) -> Option<JsonState> {
        let JsonState { stack, lex } = state;
        let at = |lex| Some(JsonState { stack, lex });
        match lex {
            Lex::Value { node, spaced } => {
                if byte == b' ' && !spaced {
                    return at(Lex::Value { node, spaced: true });
                }
                self.start_value(stack, node, byte)
            }
            Lex::Str { esc } => match self.string_byte(esc, byte)? {
                None => self.complete(stack),
                Some(esc) => at(Lex::Str { esc }),
            },
            Lex::Lit { trie, at: node } => self.literal_byte(stack, trie, node, byte),
            Lex::Word { word, at: pos } => {
                let spelled = WORDS[word as usize];
                if spelled[pos as usize] != byte {
                    return None;
                }
                if pos as usize + 1 == spelled.len() {
                    self.complete(stack)
                } else {
                    at(Lex::Word { word, at: pos + 1 })
                }
            }
            Lex::Num { integer, at: pos } => self.number_byte(stack, integer, pos, byte),
            Lex::Key { spaced, first } => self.key_start(stack, spaced, first, byte),
            Lex::KeyStr { at: node, esc } => self.key_byte(stack, node, esc, byte),
            Lex::Colon => {
                let frame = self.stacks.top(stack);
                let shape = self.object(frame)?;
                let node = match frame.current {
                    ADDITIONAL => shape.additional?,
                    i => shape.props[i as usize],
                };
                (byte == b':').then_some(JsonState {
                    stack,
                    lex: Lex::Value { node, spaced: false },
                })
            }
            Lex::ArrayFirst => {
                let (items, min, max) = self.array_shape(self.stacks.top(stack));
                match byte {
                    b']' if min == 0 => self.close(stack),
                    _ if max > 0 => self.start_value(stack, items, byte),
                    _ => None,
                }
            }
            Lex::After => self.after_value(stack, byte),
            Lex::Done => None,
        }
    }

    /// `Some(None)` = the string ended; `Some(Some(esc))` = still inside.
    fn string_byte(&self, esc: Esc, byte: u8) -> Option<Option<Esc>> {
        match esc {
            Esc::None => match byte {
                b'"' => Some(None),
                b'\\' => Some(Some(Esc::Backslash)),
                0..=0x1F => None,
                _ => Some(Some(Esc::None)),
            },
            Esc::Backslash => match byte {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(Some(Esc::None)),
                b'u' => Some(Some(Esc::Hex(4))),
                _ => None,
            },
            Esc::Hex(left) => {
                byte.is_ascii_hexdigit()
                    .then_some(Some(if left == 1 { Esc::None } else { Esc::Hex(left - 1) }))
            }
        }
    }

    fn start_value(&mut self, stack: StackId, node: NodeId, byte: u8) -> Option<JsonState> {
        let at = |lex| Some(JsonState { stack, lex });
        match &self.arena.nodes[node as usize] {
            Node::Any => match byte {
                b'{' => self.open(
                    stack,
                    self.arena.any_object,
                    Lex::Key {
                        spaced: true,
                        first: true,
                    },
                ),
                b'[' => self.open_any_array(stack),
                b'"' => at(Lex::Str { esc: Esc::None }),
                b't' => at(Lex::Word { word: 0, at: 1 }),
                b'f' => at(Lex::Word { word: 1, at: 1 }),
                b'n' => at(Lex::Word { word: 2, at: 1 }),
                _ => self.number_start(stack, false, byte),
            },
            Node::Null => (byte == b'n').then_some(JsonState {
                stack,
                lex: Lex::Word { word: 2, at: 1 },
            }),
            Node::Boolean => match byte {
                b't' => at(Lex::Word { word: 0, at: 1 }),
                b'f' => at(Lex::Word { word: 1, at: 1 }),
                _ => None,
            },
            Node::Integer => self.number_start(stack, true, byte),
            Node::Number => self.number_start(stack, false, byte),
            Node::String => (byte == b'"').then_some(JsonState {
                stack,
                lex: Lex::Str { esc: Esc::None },
            }),
            Node::Literals(trie) => self.literal_byte(stack, *trie, 0, byte),
            Node::Array { .. } => (byte == b'[').then(|| self.open(stack, node, Lex::ArrayFirst))?,
            Node::Object(_) => (byte == b'{').then(|| {
                self.open(
                    stack,
                    node,
                    Lex::Key {
                        spaced: true,
                        first: true,
                    },
                )
            })?,
            Node::Union(alternatives) => {
                let alternatives = alternatives.clone();
                alternatives.iter().find_map(|&alt| self.start_value(stack, alt, byte))
            }
        }
    }

    /// `[` under Any: an array of anything, whose frame's node is `Any` itself.
    fn open_any_array(&mut self, stack: StackId) -> Option<JsonState> {
        self.open(stack, self.arena.any, Lex::ArrayFirst)
    }

    /// Items, minItems, maxItems of the array `frame` reads (any items for an array under Any).
    fn array_shape(&self, frame: Frame) -> (NodeId, u64, u64) {
        match self.arena.nodes[frame.node as usize] {
            Node::Array { items, min, max } => (items, min, max),
            _ => (self.arena.any, 0, u64::MAX),
        }
    }

    /// Push a container frame for `node` and continue with `lex`.
    fn open(&mut self, stack: StackId, node: NodeId, lex: Lex) -> Option<JsonState> {
        let depth = if stack == 0 {
            1
        } else {
            self.stacks.top(stack).depth + 1
        };
        if depth > MAX_DEPTH {
            return None;
        }
        let frame = Frame {
            node,
            seen: 0,
            current: 0,
            depth,
        };
        Some(JsonState {
            stack: self.stacks.push(stack, frame),
            lex,
        })
    }

    fn number_start(&mut self, stack: StackId, integer: bool, byte: u8) -> Option<JsonState> {
        let pos = match byte {
            b'-' => NumAt::Minus,
            b'0' => NumAt::Zero,
            b'1'..=b'9' => NumAt::Int,
            _ => return None,
        };
        Some(JsonState {
            stack,
            lex: Lex::Num { integer, at: pos },
        })
    }

    fn number_byte(&mut self, stack: StackId, integer: bool, pos: NumAt, byte: u8) -> Option<JsonState> {
        use NumAt::*;
        let next = match (pos, byte) {
            (Minus, b'0') => Some(Zero),
            (Minus, b'1'..=b'9') => Some(Int),
            (Int, b'0'..=b'9') => Some(Int),
            (Zero | Int, b'.') if !integer => Some(Dot),
            (Zero | Int | Frac, b'e' | b'E') if !integer => Some(E),
            (Dot | Frac, b'0'..=b'9') => Some(Frac),
            (E, b'+' | b'-') => Some(ESign),
            (E | ESign | Exp, b'0'..=b'9') => Some(Exp),
            _ => None,
        };
        if let Some(next) = next {
            return Some(JsonState {
                stack,
                lex: Lex::Num { integer, at: next },
            });
        }
        // The number ended before `byte`, if it is complete; `byte` belongs to what follows.
        if matches!(pos, Zero | Int | Frac | Exp) && !is_digit(byte) {
            let after = self.complete(stack)?;
            return self.step(after, byte);
        }
        None
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

    /// Whether another key may start in this object.
    fn key_possible(shape: &ObjectShape, seen: u64, keys: &crate::literal::LiteralTrie) -> bool {
        shape.additional.is_some() || keys.below(0) & !seen != 0
    }

    fn key_start(&mut self, stack: StackId, spaced: bool, first: bool, byte: u8) -> Option<JsonState> {
        let frame = self.stacks.top(stack);
        let shape = self.object(frame)?;
        let keys = &self.arena.tries[shape.keys as usize];
        match byte {
            b' ' if !spaced => Some(JsonState {
                stack,
                lex: Lex::Key { spaced: true, first },
            }),
            b'"' if Self::key_possible(shape, frame.seen, keys) => Some(JsonState {
                stack,
                lex: Lex::KeyStr {
                    at: Some(0),
                    esc: Esc::None,
                },
            }),
            b'}' if first && shape.required & !frame.seen == 0 => self.close(stack),
            _ => None,
        }
    }

    fn key_byte(&mut self, stack: StackId, node: Option<LitNode>, esc: Esc, byte: u8) -> Option<JsonState> {
        let frame = self.stacks.top(stack);
        let shape = self.object(frame)?;
        let keys = &self.arena.tries[shape.keys as usize];
        let additional = shape.additional.is_some();
        match self.string_byte(esc, byte)? {
            None => {
                // The key ended: a declared, unseen property, or an undeclared one if allowed.
                let declared = node.and_then(|n| keys.terminal(n));
                let current = match declared {
                    Some(i) if frame.seen & (1 << i) != 0 => return None,
                    Some(i) => i,
                    None if additional => ADDITIONAL,
                    None => return None,
                };
                let stack = self.stacks.replace(stack, Frame { current, ..frame });
                Some(JsonState { stack, lex: Lex::Colon })
            }
            Some(esc) => {
                let next = node.and_then(|n| keys.step(n, byte));
                let live = next.is_some_and(|n| keys.below(n) & !frame.seen != 0);
                if !additional && !live {
                    return None;
                }
                Some(JsonState {
                    stack,
                    lex: Lex::KeyStr { at: next, esc },
                })
            }
        }
    }

    fn after_value(&mut self, stack: StackId, byte: u8) -> Option<JsonState> {
        let frame = self.stacks.top(stack);
        match &self.arena.nodes[frame.node as usize] {
            Node::Object(shape) => {
                let keys = &self.arena.tries[shape.keys as usize];
                match byte {
                    b',' if Self::key_possible(shape, frame.seen, keys) => Some(JsonState {
                        stack,
                        lex: Lex::Key {
                            spaced: false,
                            first: false,
                        },
                    }),
                    b'}' if shape.required & !frame.seen == 0 => self.close(stack),
                    _ => None,
                }
            }
            _ => {
                let (items, min, max) = self.array_shape(frame);
                match byte {
                    b',' if frame.seen < max => Some(JsonState {
                        stack,
                        lex: Lex::Value {
                            node: items,
                            spaced: false,
                        },
                    }),
                    b']' if frame.seen >= min => self.close(stack),
                    _ => None,
                }
            }
        }
    }

    /// The container on top of `stack` closed: it is a complete value of its parent.
    fn close(&mut self, stack: StackId) -> Option<JsonState> {
        let parent = self.stacks.parent(stack);
        self.complete(parent)
    }

    /// A value inside the container on top of `stack` (or at the top level) is complete.
    fn complete(&mut self, stack: StackId) -> Option<JsonState> {
        if stack == 0 {
            return Some(JsonState { stack, lex: Lex::Done });
        }
        let frame = self.stacks.top(stack);
        let seen = match self.object(frame) {
            Some(_) if frame.current == ADDITIONAL => frame.seen,
            Some(_) => frame.seen | (1 << frame.current),
            None => frame.seen.saturating_add(1),
        };
        let stack = self.stacks.replace(stack, Frame { seen, ..frame });
        Some(JsonState { stack, lex: Lex::After })
    }
}
