//! The byte-level JSON automaton for a schema arena. A thread is a lexer state
//! (`Lex`, small and `Copy`) plus the stack of open containers, interned so a
//! thread is two words; where alternatives of a union overlap, a state is a
//! set of threads run in parallel (`Lex::Many`, interned too). An overlapping
//! `oneOf` runs each alternative on top of a marker frame; where the value
//! ends, its threads are resolved together ([`exclusive`]). Inside strings
//! and numbers only the lexer state changes; containers are interned only on
//! structural bytes.
//!
//! Every state it reaches can still be completed into a value the schema
//! accepts (no dead ends): a key is only begun when some key may follow, `}`
//! only when the required properties are present, `,` only when another item
//! or key is possible. One optional space is accepted after `:` and `,`
//! (never more: a model cannot loop on whitespace).

mod complete;
mod exclusive;
pub(crate) mod finish;
mod keys;
mod machine;
mod number;
mod shortest;
mod text;

pub(crate) use complete::CompletionMemo;
pub(crate) use machine::JsonMachine;
pub(crate) use shortest::Shortest;

use crate::literal::LitNode;
use crate::schema::{NodeId, SchemaArena};
use number::NumLex;
use std::collections::HashMap;
use text::TextAt;

/// An interned stack of open containers; 0 is the empty stack.
pub(crate) type StackId = u32;

/// One open container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    node: NodeId,
    /// Objects: bit set of the declared properties seen. Arrays: items so far.
    seen: u64,
    /// Objects: undeclared properties so far.
    extra: u32,
    /// Objects: the property whose value is being read. A `oneOf` marker: the alternative.
    current: u32,
    /// Containers open (a marker has its parent's).
    depth: u32,
    /// Inside an overlapping `oneOf`: numbers, strings and literals in their
    /// one strict spelling, so every alternative judges the value, not how
    /// it is written.
    strict: bool,
}

/// Interned container stacks and thread sets.
#[derive(Debug, Clone)]
pub(crate) struct Stacks {
    entries: Vec<(StackId, Frame)>,
    index: HashMap<(StackId, Frame), StackId>,
    sets: Vec<Vec<JsonState>>,
    set_index: HashMap<Vec<JsonState>, u32>,
    /// Steps of thread sets already taken (mask walks revisit them).
    set_steps: HashMap<(u32, u8), Option<JsonState>>,
    /// Thread sets with overlapping `oneOf` alternatives alive: whether some
    /// completion is accepted by exactly one (see [`exclusive`]).
    live: HashMap<JsonState, bool>,
}

impl Default for Stacks {
    fn default() -> Self {
        let sentinel = Frame {
            node: 0,
            seen: 0,
            extra: 0,
            current: 0,
            depth: 0,
            strict: false,
        };
        Self {
            entries: vec![(0, sentinel)],
            index: HashMap::new(),
            sets: Vec::new(),
            set_index: HashMap::new(),
            set_steps: HashMap::new(),
            live: HashMap::new(),
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

    /// One state for these threads (deduplicated by the caller).
    fn gather(&mut self, threads: Vec<JsonState>) -> Option<JsonState> {
        match threads.len() {
            0 => None,
            1 => Some(threads[0]),
            _ => {
                let id = match self.set_index.get(&threads) {
                    Some(&id) => id,
                    None => {
                        self.sets.push(threads.clone());
                        let id = (self.sets.len() - 1) as u32;
                        self.set_index.insert(threads, id);
                        id
                    }
                };
                Some(JsonState {
                    stack: 0,
                    lex: Lex::Many(id),
                })
            }
        }
    }
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
    /// Inside a string value of the string shape `node`.
    Str {
        node: NodeId,
        text: TextAt,
    },
    Lit {
        trie: u32,
        at: LitNode,
    },
    Word {
        word: u8,
        at: u8,
    },
    /// Inside a number of the number shape `node` (or of any number).
    Num {
        node: NodeId,
        num: NumLex,
    },
    /// In an object: `"` to start a key, or `}` when `first` (right after `{`).
    Key {
        spaced: bool,
        first: bool,
    },
    /// Inside a key; `at` is the position in the declared-key trie (`None` once it left it).
    KeyStr {
        at: Option<LitNode>,
        text: TextAt,
    },
    Colon,
    /// Right after `[`: a value or `]`.
    ArrayFirst,
    /// After a value inside a container: `,` or the closing bracket.
    After,
    /// The top-level value is complete.
    Done,
    /// A `oneOf` alternative's value is complete (the stack's top is its
    /// marker); whether the value stands is resolved with the other
    /// alternatives' threads at the next byte or the end of the input.
    Ended,
    /// Several threads at once (an interned set; the state's stack is unused).
    Many(u32),
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

    /// Whether the state is inside a string value (not a key).
    pub fn in_string(&self) -> bool {
        matches!(self.lex, Lex::Str { .. })
    }
}

/// Whether the automaton of `node` accepts `text` as one complete value, as
/// generation walks it: with `shortest` (the arena's shortest values), every
/// state is checked live on the way (see [`exclusive`]); without, the text
/// alone decides (what compiling asks: which literals a shape takes).
pub(crate) fn accepts(arena: &SchemaArena, shortest: Option<&Shortest>, node: NodeId, text: &[u8]) -> bool {
    let mut stacks = Stacks::default();
    let mut machine = JsonMachine {
        arena,
        stacks: &mut stacks,
        shortest,
    };
    let end = text
        .iter()
        .try_fold(JsonState::start(node), |state, &byte| match shortest {
            Some(_) => machine.step(state, byte),
            None => machine.step_raw(state, byte),
        });
    end.is_some_and(|state| machine.is_complete(state))
}
