//! Objects' keys: which may start, a key byte by byte (through the declared
//! names' trie, or an object's key table), and the colon after it.

use super::machine::{JsonMachine, UNDECLARED};
use super::text::{TextAt, TextPattern, TextRules, TextStep};
use super::{Frame, JsonState, Lex, StackId};
use crate::literal::{LitNode, LiteralTrie};
use crate::pattern::KeyEnd;
use crate::schema::{NodeId, ObjectShape, MAX_DEPTH};

/// Which keys may start next in an object.
#[derive(Clone, Copy)]
pub(super) struct KeyChoices {
    /// Declared properties (bits).
    pub declared: u64,
    /// Whether an undeclared property may come (objects without a key table).
    pub additional: bool,
    /// With a key table: the pattern sets an undeclared key may match (bits).
    pub sets: u64,
}

impl JsonMachine<'_> {
    /// Which keys may start next in an object: declared ones and undeclared
    /// ones. With `maxProperties`, once the properties still required fill
    /// what is left, only they may come. Keys whose values could not close
    /// within [`MAX_DEPTH`] here are left out.
    pub(super) fn key_choices(&self, shape: &ObjectShape, frame: Frame) -> KeyChoices {
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
    pub(super) fn may_close(shape: &ObjectShape, frame: Frame) -> bool {
        shape.required & !frame.seen == 0 && frame.seen.count_ones() + frame.extra >= shape.min_props
    }

    pub(super) fn key_possible(&self, shape: &ObjectShape, frame: Frame) -> bool {
        let choices = self.key_choices(shape, frame);
        match shape.key_table {
            Some(table) => self.arena.key_tables[table as usize].live(0, choices.declared, choices.sets),
            None => choices.additional || self.arena.tries[shape.keys as usize].below(0) & choices.declared != 0,
        }
    }

    pub(super) fn key_start(&mut self, stack: StackId, spaced: bool, first: bool, byte: u8) -> Option<JsonState> {
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

    pub(super) fn key_byte(
        &mut self,
        stack: StackId,
        node: Option<LitNode>,
        text: TextAt,
        byte: u8,
    ) -> Option<JsonState> {
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

    pub(super) fn colon(&mut self, stack: StackId, byte: u8) -> Option<JsonState> {
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
}
