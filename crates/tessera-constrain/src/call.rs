//! The tool-call automaton: free text (modes `none`/`auto`), the model's call
//! envelope ([`Envelope`]: Hermes `<tool_call>\n{"name": "…", "arguments": {…}}\n</tool_call>`
//! unless the template has its own form), the name restricted to the allowed
//! set by a trie, the arguments by the tool's schema, then end of turn or
//! (parallel calls) another call. Byte-level, so a token may straddle the
//! opener, the name, the literal and the arguments. In `auto` mode the reply
//! may also open with a bare call ([`crate::envelope::bare`]): its head is read as free
//! text (`Tentative`) and becomes a call only at the arguments' `{`.

use crate::choice::CallMode;
use crate::envelope::bare::{is_json_space, BareForm, HeadItem};
use crate::envelope::format::Envelope;
use crate::envelope::pieces::Pieces;
use crate::json::{JsonMachine, JsonState, Stacks};
use crate::literal::LitNode;
use crate::tools::{AllowedNames, CompiledTools};

/// A fixed byte string of the envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Piece {
    NameIntro,
    ArgsIntro,
    CallEnd,
    Separator,
    SectionEnd,
}

impl Piece {
    pub(crate) fn bytes(self, envelope: &Pieces) -> &[u8] {
        match self {
            Piece::NameIntro => &envelope.name_intro,
            Piece::ArgsIntro => &envelope.args_intro,
            Piece::CallEnd => &envelope.call_end,
            Piece::Separator => envelope.separator.as_deref().unwrap_or_default(),
            Piece::SectionEnd => &envelope.section_end,
        }
    }
}

/// Where in the response the automaton is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Phase {
    /// Free text; `matched` bytes of the opener end it.
    Text {
        matched: u8,
    },
    /// Free text that may still be a bare call's head: `item` of the form's
    /// head, `at` bytes into a literal or the name trie's node.
    Tentative {
        item: u8,
        at: u32,
    },
    Fixed {
        piece: Piece,
        at: u8,
    },
    Name {
        at: LitNode,
    },
    Args,
    /// A call is complete: another may follow, or the section ends.
    AfterCall,
    /// The call section is closed.
    Done,
}

/// A whole state: the phase, the tool being called and its arguments' state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct CallState {
    pub phase: Phase,
    /// The envelope's form ([`Envelope::form`]): 0 the template's, `k` bare form `k - 1`.
    pub form: u8,
    pub tool: u32,
    pub json: JsonState,
}

/// The automaton for one tool set and choice, with its interned stacks.
pub(crate) struct CallMachine<'a> {
    pub envelope: &'a Envelope,
    pub tools: &'a CompiledTools,
    pub allowed: &'a AllowedNames,
    pub mode: CallMode,
    pub parallel: bool,
    pub stacks: &'a mut Stacks,
}

impl CallState {
    /// Whether the response may end here (an end-of-turn token may follow).
    pub fn accepting(&self, envelope: &Envelope) -> bool {
        match self.phase {
            Phase::Text { .. } | Phase::Tentative { .. } | Phase::Done => true,
            Phase::AfterCall => envelope.form(self.form).section_end.is_empty(),
            _ => false,
        }
    }
}

impl CallMachine<'_> {
    /// The arguments' automaton.
    pub fn json(&mut self) -> JsonMachine<'_> {
        JsonMachine {
            arena: &self.tools.arena,
            stacks: self.stacks,
            shortest: Some(&self.tools.shortest),
        }
    }

    /// The state after `byte`, or `None` when no valid response continues that way.
    pub fn step(&mut self, state: CallState, byte: u8) -> Option<CallState> {
        let with = |phase| Some(CallState { phase, ..state });
        match state.phase {
            Phase::Text { matched } => self.text_byte(matched, byte).map(|phase| CallState { phase, ..state }),
            Phase::Tentative { item, at } => self.tentative_byte(state, item, at, byte),
            Phase::Fixed { piece, at } => {
                let bytes = piece.bytes(self.envelope.form(state.form));
                if bytes[at as usize] != byte {
                    return None;
                }
                if at as usize + 1 < bytes.len() {
                    return with(Phase::Fixed { piece, at: at + 1 });
                }
                with(self.after_piece(piece))
            }
            Phase::Name { at } => self.name_byte(state, at, byte),
            Phase::Args => {
                let json = self.json().step(state.json, byte)?;
                let phase = if self.json().finished(json) {
                    self.enter(state.form, Piece::CallEnd)
                } else {
                    Phase::Args
                };
                Some(CallState { phase, json, ..state })
            }
            Phase::AfterCall => {
                let envelope = self.envelope.form(state.form);
                let separator = envelope.separator.as_deref().filter(|_| self.parallel);
                let piece = if separator.is_some_and(|s| s[0] == byte) {
                    Piece::Separator
                } else if envelope.section_end.first() == Some(&byte) {
                    Piece::SectionEnd
                } else {
                    return None;
                };
                with(match piece.bytes(envelope).len() {
                    1 => self.after_piece(piece),
                    _ => Phase::Fixed { piece, at: 1 },
                })
            }
            Phase::Done => None,
        }
    }

    /// Free text: special tokens never appear (unless the opener is one), the opener starts a call.
    fn text_byte(&self, matched: u8, byte: u8) -> Option<Phase> {
        let next = self.envelope.pieces.opener_progress(matched as usize, byte);
        if byte == crate::vocab::SPECIAL_TOKEN_MARKER && next == 0 {
            return None;
        }
        if next < self.envelope.pieces.opener.len() {
            return Some(Phase::Text { matched: next as u8 });
        }
        match self.mode {
            CallMode::Auto => Some(self.enter(0, Piece::NameIntro)),
            CallMode::None | CallMode::Required => None,
        }
    }

    /// A bare call's head, read as free text: `byte` either continues it (and
    /// at the arguments' `{`, commits to the call) or turns the reply into text.
    fn tentative_byte(&mut self, state: CallState, item: u8, at: u32, byte: u8) -> Option<CallState> {
        let forms = &self.envelope.bare;
        let form = match (item, at) {
            // Every form starts with whitespace; its first literal's first byte picks the form.
            (1, 0) => BareForm::starting_with(forms, byte),
            _ => Some(state.form),
        };
        let Some(form) = form else {
            return self.diverge(state, byte);
        };
        let state = CallState { form, ..state };
        let tentative = |item, at| {
            Some(CallState {
                phase: Phase::Tentative { item, at },
                ..state
            })
        };
        let head_item = match item {
            0 => Some(HeadItem::Ws),
            _ => forms[form as usize - 1].head.get(item as usize).copied(),
        };
        match head_item {
            Some(HeadItem::Ws) if is_json_space(byte) => tentative(item, at),
            Some(HeadItem::Ws) => self.tentative_byte(state, item + 1, 0, byte),
            Some(HeadItem::Lit(literal)) if literal[at as usize] == byte => match at as usize + 1 == literal.len() {
                true => tentative(item + 1, 0),
                false => tentative(item, at + 1),
            },
            Some(HeadItem::Name) if byte == b'"' => match self.allowed.trie.terminal(at) {
                Some(index) => {
                    let tool = self.allowed.tools[index as usize];
                    Some(CallState {
                        phase: Phase::Tentative { item: item + 1, at: 0 },
                        tool: tool as u32,
                        json: JsonState::start(self.tools.roots[tool]),
                        form,
                    })
                }
                None => self.diverge(state, byte),
            },
            Some(HeadItem::Name) => match self.allowed.trie.step(at, byte) {
                Some(next) => tentative(item, next),
                None => self.diverge(state, byte),
            },
            Some(HeadItem::Lit(_)) => self.diverge(state, byte),
            // The head is complete: the arguments' `{` makes it a call.
            None if byte == b'{' => {
                let args = CallState {
                    phase: Phase::Args,
                    ..state
                };
                self.step(args, byte).or_else(|| self.diverge(state, byte))
            }
            None => self.diverge(state, byte),
        }
    }

    /// The reply is free text from `byte` on (a bare call's head was not completed).
    fn diverge(&self, state: CallState, byte: u8) -> Option<CallState> {
        let phase = self.text_byte(0, byte)?;
        Some(CallState {
            phase,
            form: 0,
            ..state
        })
    }

    /// The phase at the start of `piece` of form `form` (its successor's when it is empty).
    fn enter(&self, form: u8, piece: Piece) -> Phase {
        if piece.bytes(self.envelope.form(form)).is_empty() {
            self.after_piece(piece)
        } else {
            Phase::Fixed { piece, at: 0 }
        }
    }

    /// The phase once `piece` is complete.
    fn after_piece(&self, piece: Piece) -> Phase {
        match piece {
            Piece::NameIntro | Piece::Separator => Phase::Name { at: 0 },
            Piece::ArgsIntro => Phase::Args,
            Piece::CallEnd => Phase::AfterCall,
            Piece::SectionEnd => Phase::Done,
        }
    }

    fn name_byte(&mut self, state: CallState, at: LitNode, byte: u8) -> Option<CallState> {
        let names = &self.allowed.trie;
        if byte == b'"' {
            let index = names.terminal(at)?;
            let tool = self.allowed.tools[index as usize];
            return Some(CallState {
                phase: self.enter(state.form, Piece::ArgsIntro),
                form: state.form,
                tool: tool as u32,
                json: JsonState::start(self.tools.roots[tool]),
            });
        }
        let next = names.step(at, byte)?;
        Some(CallState {
            phase: Phase::Name { at: next },
            ..state
        })
    }
}
