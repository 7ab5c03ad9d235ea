//! The core's answers as Responses API objects and event streams. One
//! renderer serves both: a plain request reads the response the last event
//! carries ([`respond`]). At the end a stored response keeps its whole
//! conversation, its output spelled as generated, for `previous_response_id`.

use super::convert::Continuation;
use super::response::{
    EventBody, IncompleteDetails, ItemStatus, OutputItem, OutputText, ResponseObject, Status, StreamEvent,
};
use super::store::ResponseStore;
use crate::core::request::{Message, PastArguments, PastCall};
use crate::{Answer, Delta, Ending, FinishReason, Frame, Frames, Header, Render, RequestError};
use std::sync::Arc;

/// The response id.
fn response_id(header: &Header) -> String {
    format!("resp_{}", header.id)
}

/// Renders one response; stores it at the end when asked.
#[derive(Debug)]
pub struct ResponsesRender {
    continuation: Continuation,
    store: Arc<ResponseStore>,
    sequence: usize,
    output: Vec<OutputItem>,
    /// The output index of the item being generated.
    open: Option<usize>,
}

impl ResponsesRender {
    /// A renderer for a request read into `continuation`, storing into `store`.
    pub fn new(continuation: Continuation, store: Arc<ResponseStore>) -> Self {
        Self {
            continuation,
            store,
            sequence: 0,
            output: Vec::new(),
            open: None,
        }
    }

    /// Whether the request asked for a stream.
    pub fn streamed(&self) -> bool {
        self.continuation.stream
    }

    fn event(&mut self, body: EventBody) -> StreamEvent {
        let sequence_number = self.sequence;
        self.sequence += 1;
        StreamEvent { sequence_number, body }
    }

    fn response(&self, header: &Header, status: Status) -> ResponseObject {
        let echo = &self.continuation.echo;
        ResponseObject {
            id: response_id(header),
            object: "response".into(),
            created_at: header.created,
            status,
            model: header.model.clone(),
            output: self.output.clone(),
            usage: None,
            incomplete_details: None,
            error: None,
            instructions: echo.instructions.clone(),
            max_output_tokens: echo.max_output_tokens,
            parallel_tool_calls: echo.parallel_tool_calls,
            previous_response_id: echo.previous_response_id.clone(),
            store: self.continuation.store,
            temperature: echo.temperature,
            top_p: echo.top_p,
            tool_choice: echo.tool_choice.clone(),
            tools: echo.tools.clone(),
            text: echo.text.clone(),
            truncation: "disabled".into(),
            metadata: serde_json::Map::new(),
        }
    }

    /// Close the item being generated, if any.
    fn close(&mut self, status: ItemStatus, events: &mut Vec<StreamEvent>) {
        let Some(index) = self.open.take() else {
            return;
        };
        match &mut self.output[index] {
            OutputItem::Message {
                id,
                status: item_status,
                content,
                ..
            } => {
                *item_status = status;
                let (item_id, part) = (id.clone(), content[0].clone());
                let text = part.text.clone();
                events.push(self.event(EventBody::TextDone {
                    item_id: item_id.clone(),
                    output_index: index,
                    content_index: 0,
                    text,
                    logprobs: Vec::new(),
                }));
                events.push(self.event(EventBody::PartDone {
                    item_id,
                    output_index: index,
                    content_index: 0,
                    part,
                }));
            }
            OutputItem::FunctionCall {
                id,
                name,
                arguments,
                status: item_status,
                ..
            } => {
                *item_status = status;
                let body = EventBody::ArgumentsDone {
                    item_id: id.clone(),
                    output_index: index,
                    name: name.clone(),
                    arguments: arguments.clone(),
                };
                events.push(self.event(body));
            }
        }
        let item = self.output[index].clone();
        events.push(self.event(EventBody::ItemDone {
            output_index: index,
            item,
        }));
    }

    /// Open a new item.
    fn add(&mut self, item: OutputItem, events: &mut Vec<StreamEvent>) -> usize {
        self.close(ItemStatus::Completed, events);
        let index = self.output.len();
        self.output.push(item.clone());
        self.open = Some(index);
        events.push(self.event(EventBody::ItemAdded {
            output_index: index,
            item,
        }));
        index
    }

    fn text(&mut self, header: &Header, text: String, events: &mut Vec<StreamEvent>) {
        if text.is_empty() {
            return;
        }
        let open_message = self
            .open
            .filter(|&index| matches!(self.output[index], OutputItem::Message { .. }));
        let index = match open_message {
            Some(index) => index,
            None => {
                let id = format!("msg_{}_{}", header.id, self.output.len());
                let item = OutputItem::Message {
                    id: id.clone(),
                    status: ItemStatus::InProgress,
                    role: "assistant".into(),
                    content: Vec::new(),
                };
                let index = self.add(item, events);
                if let OutputItem::Message { content, .. } = &mut self.output[index] {
                    content.push(OutputText::new(String::new()));
                }
                events.push(self.event(EventBody::PartAdded {
                    item_id: id,
                    output_index: index,
                    content_index: 0,
                    part: OutputText::new(String::new()),
                }));
                index
            }
        };
        if let OutputItem::Message { id, content, .. } = &mut self.output[index] {
            content[0].text.push_str(&text);
            let item_id = id.clone();
            events.push(self.event(EventBody::TextDelta {
                item_id,
                output_index: index,
                content_index: 0,
                delta: text,
                logprobs: Vec::new(),
            }));
        }
    }

    fn call_start(&mut self, header: &Header, id: String, name: String, events: &mut Vec<StreamEvent>) {
        let item = OutputItem::FunctionCall {
            id: format!("fc_{}_{}", header.id, self.output.len()),
            call_id: id,
            name,
            arguments: String::new(),
            status: ItemStatus::InProgress,
        };
        self.add(item, events);
    }

    fn arguments(&mut self, text: String, events: &mut Vec<StreamEvent>) {
        let Some(index) = self.open else {
            return;
        };
        if let OutputItem::FunctionCall { id, arguments, .. } = &mut self.output[index] {
            arguments.push_str(&text);
            let item_id = id.clone();
            events.push(self.event(EventBody::ArgumentsDelta {
                item_id,
                output_index: index,
                delta: text,
            }));
        }
    }

    /// Keep the conversation with this response's output as its last turn.
    fn store(&self, id: &str) {
        let mut text = String::new();
        let mut calls = Vec::new();
        for item in &self.output {
            match item {
                OutputItem::Message { content, .. } => content.iter().for_each(|part| text.push_str(&part.text)),
                OutputItem::FunctionCall { name, arguments, .. } => calls.push(PastCall {
                    name: name.clone(),
                    arguments: PastArguments::Text(arguments.clone()),
                    field: "previous_response_id".into(),
                }),
            }
        }
        let mut conversation = self.continuation.conversation.clone();
        conversation.push(Message::Assistant { text, calls });
        self.store.put(id, conversation);
    }
}

impl Render for ResponsesRender {
    type Event = StreamEvent;

    fn opening(&mut self, header: &Header) -> Vec<StreamEvent> {
        let created = Box::new(self.response(header, Status::InProgress));
        let in_progress = created.clone();
        vec![
            self.event(EventBody::Created { response: created }),
            self.event(EventBody::InProgress { response: in_progress }),
        ]
    }

    fn deltas(&mut self, header: &Header, deltas: Vec<Delta>) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        for delta in deltas {
            match delta {
                Delta::Content(text) => self.text(header, text, &mut events),
                Delta::CallStart { id, name, .. } => self.call_start(header, id, name, &mut events),
                Delta::Arguments { text, .. } => self.arguments(text, &mut events),
            }
        }
        events
    }

    fn ending(&mut self, header: &Header, ending: &Ending) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        let cut = matches!(ending.reason, FinishReason::Length | FinishReason::ContextWindow);
        let item_status = if cut {
            ItemStatus::Incomplete
        } else {
            ItemStatus::Completed
        };
        self.close(item_status, &mut events);
        let status = if cut { Status::Incomplete } else { Status::Completed };
        let mut response = self.response(header, status);
        response.usage = Some(ending.usage.into());
        response.incomplete_details = cut.then(|| IncompleteDetails {
            reason: "max_output_tokens".into(),
        });
        if self.continuation.store {
            self.store(&response.id);
        }
        let response = Box::new(response);
        events.push(self.event(match cut {
            true => EventBody::Incomplete { response },
            false => EventBody::Completed { response },
        }));
        events
    }
}

/// Wait for the whole answer and return the response (stored when asked).
pub async fn respond(answer: Answer, render: ResponsesRender) -> Result<ResponseObject, RequestError> {
    let mut frames = Frames::new(answer, render);
    let mut last = None;
    while let Some(frame) = frames.next().await {
        match frame {
            Frame::Event(StreamEvent {
                body: EventBody::Completed { response } | EventBody::Incomplete { response },
                ..
            }) => last = Some(*response),
            Frame::Event(_) => {}
            Frame::Failed(error) => return Err(error),
            Frame::Done => break,
        }
    }
    last.ok_or_else(|| RequestError::engine(tessera_engine::EngineError::Stopped, crate::Endpoint::Responses))
}
