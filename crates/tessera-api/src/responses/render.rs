//! The core's answers as Responses API objects and event streams. One
//! renderer serves both: a plain request reads the response the last event
//! carries ([`respond`]). At the end a stored response keeps its whole
//! conversation, its output spelled as generated, for `previous_response_id`.

use super::convert::Continuation;
use super::response::{
    EventBody, IncompleteDetails, ItemStatus, OutputItem, OutputText, ResponseError, ResponseObject, Status,
    StreamEvent,
};
use super::store::{unguessable, ResponseStore, Stored};
use crate::core::request::{Message, PastArguments, PastCall};
use crate::{Answer, Delta, Ending, FinishReason, Header, Render, RequestError, Step};
use std::sync::Arc;

/// Renders one response; stores it at the end when asked.
#[derive(Debug)]
pub struct ResponsesRender {
    continuation: Continuation,
    store: Arc<ResponseStore>,
    sequence: usize,
    output: Vec<OutputItem>,
    /// The output index of the item being generated.
    open: Option<usize>,
    /// `resp_…`: the answer's id and a random part (a stored response is
    /// read back by it, so it must not be guessable).
    id: String,
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
            id: String::new(),
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
            id: self.id.clone(),
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
            metadata: echo.metadata.clone(),
        }
    }

    /// Close the item being generated, if any.
    fn close(&mut self, status: ItemStatus, events: &mut Vec<StreamEvent>) {
        let Some(index) = self.open.take() else {
            return;
        };
        let Some(item) = self.output.get_mut(index) else {
            return;
        };
        match item {
            OutputItem::Message {
                id,
                status: item_status,
                content,
                ..
            } => {
                *item_status = status;
                let part = content
                    .first()
                    .cloned()
                    .unwrap_or_else(|| OutputText::new(String::new()));
                let item_id = id.clone();
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
        let Some(item) = self.output.get(index).cloned() else {
            return;
        };
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
            .filter(|&index| matches!(self.output.get(index), Some(OutputItem::Message { .. })));
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
                if let Some(OutputItem::Message { content, .. }) = self.output.get_mut(index) {
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
        if let Some(OutputItem::Message { id, content, .. }) = self.output.get_mut(index) {
            if let Some(part) = content.first_mut() {
                part.text.push_str(&text);
            }
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
        if let Some(OutputItem::FunctionCall { id, arguments, .. }) = self.output.get_mut(index) {
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
                OutputItem::FunctionCall {
                    call_id,
                    name,
                    arguments,
                    ..
                } => calls.push(PastCall {
                    id: Some(call_id.clone()),
                    name: name.clone(),
                    arguments: PastArguments::Generated(arguments.clone()),
                    field: "previous_response_id".into(),
                }),
            }
        }
        let mut turn = self.continuation.input.clone();
        turn.push(Message::Assistant { text, calls });
        self.store
            .put(id, Stored::new(self.continuation.previous.clone(), turn));
    }
}

impl Render for ResponsesRender {
    type Event = StreamEvent;

    fn opening(&mut self, header: &Header) -> Vec<StreamEvent> {
        self.id = format!("resp_{}{:016x}", header.id, unguessable());
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

    fn failed(&mut self, header: &Header, error: &RequestError) -> Option<Vec<StreamEvent>> {
        let mut events = Vec::new();
        self.close(ItemStatus::Incomplete, &mut events);
        let mut response = self.response(header, Status::Failed);
        response.error = Some(ResponseError {
            code: "server_error".into(),
            message: error.to_string(),
        });
        let response = Box::new(response);
        events.push(self.event(EventBody::Failed { response }));
        Some(events)
    }
}

/// Wait for the whole answer and return the response (stored when asked),
/// through the same renderer as a stream; a failure is the request's error.
pub async fn respond(mut answer: Answer, mut render: ResponsesRender) -> Result<ResponseObject, RequestError> {
    let header = answer.header().clone();
    render.opening(&header);
    while let Some(step) = answer.next().await {
        match step {
            Step::Deltas(deltas) => drop(render.deltas(&header, deltas)),
            Step::Finished(ending) => {
                let last = render.ending(&header, &ending).pop();
                if let Some(StreamEvent {
                    body: EventBody::Completed { response } | EventBody::Incomplete { response },
                    ..
                }) = last
                {
                    return Ok(*response);
                }
            }
            Step::Failed(error) => return Err(error),
        }
    }
    Err(RequestError::engine(
        tessera_engine::EngineError::Stopped,
        crate::Endpoint::Responses,
    ))
}
