//! The tool-call automaton: free text (modes `none`/`auto`), the Hermes
//! envelope `<tool_call>\n{"name": "…", "arguments": {…}}\n</tool_call>`, the
//! name restricted to the allowed set by a trie, the arguments by the tool's
//! schema, then end of turn or (parallel calls) another call. Byte-level, so a
//! token may straddle the opener, the name, the literal and the arguments.

use crate::json::{JsonMachine, JsonState, Stacks};
use crate::literal::LitNode;
use crate::tools::{AllowedNames, CompiledTools};

/// Opens a call.
pub const OPENER: &str = "<tool_call>";
/// Between the opener and the name.
pub const NAME_INTRO: &str = "\n{\"name\": \"";
/// After the name's closing quote, before the arguments.
const ARGS_INTRO: &[u8] = b", \"arguments\": ";
/// After the arguments.
pub const CLOSER: &str = "}\n</tool_call>";
/// Between parallel calls.
const NEXT: &[u8] = b"\n<tool_call>";

/// Whether and how a response may call tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallMode {
    /// Free text; a call can never be completed.
    None,
    /// Free text, or a call once the model writes the opener.
    Auto,
    /// The response is a call (its start is prefilled).
    Required,
}

/// A resolved tool choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolChoice {
    /// None, auto or required.
    pub mode: CallMode,
    /// Names or `prefix*` families a call may use; `None` = every tool.
    pub allowed: Option<Vec<String>>,
    /// Whether another call may follow a call.
    pub parallel: bool,
}

/// A fixed byte string of the envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Piece {
    NameIntro,
    ArgsIntro,
    Closer,
    Next,
}

impl Piece {
    fn bytes(self) -> &'static [u8] {
        match self {
            Piece::NameIntro => NAME_INTRO.as_bytes(),
            Piece::ArgsIntro => ARGS_INTRO,
            Piece::Closer => CLOSER.as_bytes(),
            Piece::Next => NEXT,
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
    Fixed {
        piece: Piece,
        at: u8,
    },
    Name {
        at: LitNode,
    },
    Args,
    AfterCall,
}

/// A whole state: the phase, the tool being called and its arguments' state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct CallState {
    pub phase: Phase,
    pub tool: u32,
    pub json: JsonState,
}

/// The automaton for one tool set and choice, with its interned stacks.
pub(crate) struct CallMachine<'a> {
    pub tools: &'a CompiledTools,
    pub allowed: &'a AllowedNames,
    pub mode: CallMode,
    pub parallel: bool,
    pub stacks: &'a mut Stacks,
}

impl CallState {
    /// Whether the response may end here (an end-of-turn token may follow).
    pub fn accepting(&self) -> bool {
        matches!(self.phase, Phase::Text { .. } | Phase::AfterCall)
    }
}

impl CallMachine<'_> {
    /// The state after `byte`, or `None` when no valid response continues that way.
    pub fn step(&mut self, state: CallState, byte: u8) -> Option<CallState> {
        let with = |phase| Some(CallState { phase, ..state });
        match state.phase {
            Phase::Text { matched } => {
                let opener = OPENER.as_bytes();
                let next = if byte == opener[matched as usize] {
                    matched + 1
                } else {
                    u8::from(byte == opener[0])
                };
                if byte == crate::SPECIAL_TOKEN_MARKER {
                    return None;
                }
                if next as usize == opener.len() {
                    return match self.mode {
                        CallMode::Auto => with(Phase::Fixed {
                            piece: Piece::NameIntro,
                            at: 0,
                        }),
                        CallMode::None | CallMode::Required => None,
                    };
                }
                with(Phase::Text { matched: next })
            }
            Phase::Fixed { piece, at } => {
                let bytes = piece.bytes();
                if bytes[at as usize] != byte {
                    return None;
                }
                if at as usize + 1 < bytes.len() {
                    return with(Phase::Fixed { piece, at: at + 1 });
                }
                with(match piece {
                    Piece::NameIntro => Phase::Name { at: 0 },
                    Piece::ArgsIntro => Phase::Args,
                    Piece::Closer => Phase::AfterCall,
                    Piece::Next => Phase::Fixed {
                        piece: Piece::NameIntro,
                        at: 0,
                    },
                })
            }
            Phase::Name { at } => self.name_byte(state, at, byte),
            Phase::Args => {
                let mut machine = JsonMachine {
                    arena: &self.tools.arena,
                    stacks: self.stacks,
                };
                let json = machine.step(state.json, byte)?;
                let phase = if json.is_done() {
                    Phase::Fixed {
                        piece: Piece::Closer,
                        at: 0,
                    }
                } else {
                    Phase::Args
                };
                Some(CallState { phase, json, ..state })
            }
            Phase::AfterCall if self.parallel && byte == NEXT[0] => with(Phase::Fixed {
                piece: Piece::Next,
                at: 1,
            }),
            Phase::AfterCall => None,
        }
    }

    fn name_byte(&mut self, state: CallState, at: LitNode, byte: u8) -> Option<CallState> {
        let names = &self.allowed.trie;
        if byte == b'"' {
            let index = names.terminal(at)?;
            let tool = self.allowed.tools[index as usize];
            return Some(CallState {
                phase: Phase::Fixed {
                    piece: Piece::ArgsIntro,
                    at: 0,
                },
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
