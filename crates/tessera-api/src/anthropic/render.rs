//! The core's answers as Anthropic messages and message streams.

use super::response::{
    stop_sequence, BlockDelta, MessageDelta, MessageResponse, ResponseBlock, StopReason, StreamEvent, Usage,
};
use crate::{Collected, Delta, Ending, Header, Render};
use serde_json::{Map, Value};

fn message_id(header: &Header) -> String {
    format!("msg_{}", header.id)
}

/// A call's id in Anthropic's style (`toolu_…`).
fn tool_use_id(core_id: &str) -> String {
    match core_id.strip_prefix("call_") {
        Some(rest) => format!("toolu_{rest}"),
        None => core_id.to_string(),
    }
}

/// A call's arguments as the object `input` holds (a call cut short by the
/// length limit, whose text does not parse, has an empty one).
fn input(arguments: &str) -> Value {
    match serde_json::from_str(arguments) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ => Value::Object(Map::new()),
    }
}

/// A whole answer: its text (when there is any), then its calls.
pub fn message(header: &Header, collected: Collected) -> MessageResponse {
    let ending = collected.ending().clone();
    let text = (!collected.content.is_empty()).then_some(ResponseBlock::Text {
        text: collected.content,
    });
    let calls = collected.calls.into_iter().map(|call| ResponseBlock::ToolUse {
        id: tool_use_id(&call.id),
        name: call.name,
        input: input(&call.arguments),
    });
    MessageResponse {
        content: text.into_iter().chain(calls).collect(),
        stop_reason: Some(StopReason::from(&ending.reason)),
        stop_sequence: stop_sequence(&ending.reason),
        usage: ending.usage.into(),
        ..empty_message(header)
    }
}

fn empty_message(header: &Header) -> MessageResponse {
    MessageResponse {
        id: message_id(header),
        kind: "message".into(),
        role: "assistant".into(),
        model: header.model.clone(),
        content: Vec::new(),
        stop_reason: None,
        stop_sequence: None,
        // The cached part is known at the end (`message_delta` carries it).
        usage: Usage {
            input_tokens: header.prompt_tokens,
            output_tokens: 0,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
            speculation: None,
        },
    }
}

/// Which block is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Call,
}

/// The event sequence of a streamed message: `message_start`, `ping`, then
/// per block `content_block_start`, its deltas and `content_block_stop`,
/// then `message_delta` (stop reason, usage) and `message_stop`.
#[derive(Debug, Default)]
pub struct MessagesRender {
    /// The open block and its index.
    open: Option<(Open, usize)>,
    /// Blocks opened so far.
    blocks: usize,
}

impl MessagesRender {
    fn close(&mut self, events: &mut Vec<StreamEvent>) {
        if let Some((_, index)) = self.open.take() {
            events.push(StreamEvent::ContentBlockStop { index });
        }
    }

    fn open(&mut self, kind: Open, block: ResponseBlock, events: &mut Vec<StreamEvent>) -> usize {
        self.close(events);
        let index = self.blocks;
        self.blocks += 1;
        self.open = Some((kind, index));
        events.push(StreamEvent::ContentBlockStart {
            index,
            content_block: block,
        });
        index
    }

    fn text(&mut self, text: String, events: &mut Vec<StreamEvent>) {
        if text.is_empty() {
            return;
        }
        let index = match self.open {
            Some((Open::Text, index)) => index,
            _ => self.open(Open::Text, ResponseBlock::Text { text: String::new() }, events),
        };
        events.push(StreamEvent::ContentBlockDelta {
            index,
            delta: BlockDelta::TextDelta { text },
        });
    }
}

impl Render for MessagesRender {
    type Event = StreamEvent;

    fn opening(&mut self, header: &Header) -> Vec<StreamEvent> {
        vec![
            StreamEvent::MessageStart {
                message: empty_message(header),
            },
            StreamEvent::Ping,
        ]
    }

    fn deltas(&mut self, _: &Header, deltas: Vec<Delta>) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        for delta in deltas {
            match delta {
                Delta::Content(text) => self.text(text, &mut events),
                Delta::CallStart { id, name, .. } => {
                    let block = ResponseBlock::ToolUse {
                        id: tool_use_id(&id),
                        name,
                        input: Value::Object(Map::new()),
                    };
                    self.open(Open::Call, block, &mut events);
                }
                Delta::Arguments { text, .. } => {
                    if let Some((Open::Call, index)) = self.open {
                        events.push(StreamEvent::ContentBlockDelta {
                            index,
                            delta: BlockDelta::InputJsonDelta { partial_json: text },
                        });
                    }
                }
            }
        }
        events
    }

    fn ending(&mut self, _: &Header, ending: &Ending) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        self.close(&mut events);
        events.push(StreamEvent::MessageDelta {
            delta: MessageDelta {
                stop_reason: Some(StopReason::from(&ending.reason)),
                stop_sequence: stop_sequence(&ending.reason),
            },
            usage: ending.usage.into(),
        });
        events.push(StreamEvent::MessageStop);
        events
    }
}
