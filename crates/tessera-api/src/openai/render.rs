//! The core's answers as Chat Completions and Completions bodies and chunks.

use super::response::{
    AssistantMessage, ChatChoice, ChatCompletion, ChatCompletionChunk, ChunkChoice, ChunkDelta, FinishReason,
    FunctionCall, FunctionDelta, TextChoice, TextCompletion, ToolCall, ToolCallDelta, Usage,
};
use crate::{Collected, Delta, Ending, Header, Render};

/// The id of a chat answer.
fn chat_id(header: &Header) -> String {
    format!("chatcmpl-{}", header.id)
}

/// The id of a raw completion.
fn completion_id(header: &Header) -> String {
    format!("cmpl-{}", header.id)
}

/// A whole chat answer.
pub fn chat_completion(header: &Header, collected: Collected) -> ChatCompletion {
    let ending = collected.ending().clone();
    // Content is null when the answer is only calls.
    let content = match collected.content.is_empty() && !collected.calls.is_empty() {
        true => None,
        false => Some(collected.content),
    };
    let calls: Vec<ToolCall> = collected
        .calls
        .into_iter()
        .map(|call| ToolCall {
            id: call.id,
            kind: "function".into(),
            function: FunctionCall {
                name: call.name,
                arguments: call.arguments,
            },
        })
        .collect();
    ChatCompletion {
        id: chat_id(header),
        object: "chat.completion".into(),
        created: header.created,
        model: header.model.clone(),
        choices: vec![ChatChoice {
            index: 0,
            message: AssistantMessage {
                role: "assistant".into(),
                content,
                tool_calls: (!calls.is_empty()).then_some(calls),
            },
            finish_reason: Some(FinishReason::from(&ending.reason)),
            logprobs: None,
        }],
        usage: Some(ending.usage.into()),
        system_fingerprint: None,
    }
}

/// A whole raw completion.
pub fn text_completion(header: &Header, collected: Collected) -> TextCompletion {
    let ending = collected.ending().clone();
    TextCompletion {
        id: completion_id(header),
        object: "text_completion".into(),
        created: header.created,
        model: header.model.clone(),
        choices: vec![TextChoice {
            index: 0,
            text: collected.content,
            finish_reason: Some(FinishReason::from(&ending.reason)),
            logprobs: None,
        }],
        usage: Some(Some(ending.usage.into())),
    }
}

/// Chat chunks: the role first, then content and call deltas, the finish
/// reason, and with `include_usage` a last chunk holding only the usage.
#[derive(Debug)]
pub struct ChatRender {
    /// Send the usage chunk (and a null `usage` on every other chunk).
    pub include_usage: bool,
}

impl ChatRender {
    fn chunk(&self, header: &Header, delta: ChunkDelta, finish: Option<FinishReason>) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: chat_id(header),
            object: "chat.completion.chunk".into(),
            created: header.created,
            model: header.model.clone(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason: finish,
                logprobs: None,
            }],
            usage: self.include_usage.then_some(None),
        }
    }
}

impl Render for ChatRender {
    type Event = ChatCompletionChunk;

    fn opening(&mut self, header: &Header) -> Vec<ChatCompletionChunk> {
        let delta = ChunkDelta {
            role: Some("assistant".into()),
            content: Some(String::new()),
            tool_calls: None,
        };
        vec![self.chunk(header, delta, None)]
    }

    fn deltas(&mut self, header: &Header, deltas: Vec<Delta>) -> Vec<ChatCompletionChunk> {
        deltas
            .into_iter()
            .map(|delta| {
                let delta = match delta {
                    Delta::Content(text) => ChunkDelta {
                        content: Some(text),
                        ..ChunkDelta::default()
                    },
                    Delta::CallStart { index, id, name } => call_delta(ToolCallDelta {
                        index: Some(index),
                        id: Some(id),
                        kind: Some("function".into()),
                        function: FunctionDelta {
                            name: Some(name),
                            arguments: Some(String::new()),
                        },
                    }),
                    Delta::Arguments { index, text } => call_delta(ToolCallDelta {
                        index: Some(index),
                        id: None,
                        kind: None,
                        function: FunctionDelta {
                            name: None,
                            arguments: Some(text),
                        },
                    }),
                };
                self.chunk(header, delta, None)
            })
            .collect()
    }

    fn ending(&mut self, header: &Header, ending: &Ending) -> Vec<ChatCompletionChunk> {
        let last = self.chunk(header, ChunkDelta::default(), Some(FinishReason::from(&ending.reason)));
        let mut chunks = vec![last];
        if self.include_usage {
            chunks.push(ChatCompletionChunk {
                choices: Vec::new(),
                usage: Some(Some(Usage::from(ending.usage))),
                ..self.chunk(header, ChunkDelta::default(), None)
            });
        }
        chunks
    }
}

fn call_delta(call: ToolCallDelta) -> ChunkDelta {
    ChunkDelta {
        tool_calls: Some(vec![call]),
        ..ChunkDelta::default()
    }
}

/// Raw completion chunks: text pieces, the finish reason, and with
/// `include_usage` a last chunk holding only the usage.
#[derive(Debug)]
pub struct CompletionRender {
    /// Send the usage chunk.
    pub include_usage: bool,
}

impl CompletionRender {
    fn chunk(&self, header: &Header, text: String, finish: Option<FinishReason>) -> TextCompletion {
        TextCompletion {
            id: completion_id(header),
            object: "text_completion".into(),
            created: header.created,
            model: header.model.clone(),
            choices: vec![TextChoice {
                index: 0,
                text,
                finish_reason: finish,
                logprobs: None,
            }],
            usage: self.include_usage.then_some(None),
        }
    }
}

impl Render for CompletionRender {
    type Event = TextCompletion;

    fn opening(&mut self, _: &Header) -> Vec<TextCompletion> {
        Vec::new()
    }

    fn deltas(&mut self, header: &Header, deltas: Vec<Delta>) -> Vec<TextCompletion> {
        deltas
            .into_iter()
            .filter_map(|delta| match delta {
                Delta::Content(text) => Some(self.chunk(header, text, None)),
                Delta::CallStart { .. } | Delta::Arguments { .. } => None,
            })
            .collect()
    }

    fn ending(&mut self, header: &Header, ending: &Ending) -> Vec<TextCompletion> {
        let mut chunks = vec![self.chunk(header, String::new(), Some(FinishReason::from(&ending.reason)))];
        if self.include_usage {
            chunks.push(TextCompletion {
                choices: Vec::new(),
                usage: Some(Some(Usage::from(ending.usage))),
                ..self.chunk(header, String::new(), None)
            });
        }
        chunks
    }
}
