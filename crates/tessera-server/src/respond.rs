//! Running a job and answering: one JSON body, or server-sent event chunks
//! (deltas as they come, the finish reason, usage on request, `[DONE]`).
//! The event stream lives inside the response: when the client goes away the
//! response is dropped, the stream with it, and the engine cancels the
//! request and frees its blocks.

use crate::api::UsageBody;
use crate::error::ApiError;
use crate::AppState;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use tessera_engine::{Completion, Event, EventStream, FinishReason};
use tessera_openai::Job;
use tessera_openai::{Delta, Pipeline};

/// Which endpoint's shapes to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `chat.completion` / `chat.completion.chunk`.
    Chat,
    /// `text_completion`.
    Completion,
}

/// What every body and chunk of one response repeats.
#[derive(Debug, Clone)]
struct Header {
    shape: Shape,
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
}

/// Submit `job` and answer it.
pub async fn answer(state: &AppState, job: Job, shape: Shape) -> Response {
    let number = state.next_id();
    let prefix = match shape {
        Shape::Chat => "chatcmpl",
        Shape::Completion => "cmpl",
    };
    // Ids stay unique across restarts: the start time is part of them.
    let base = format!("{:x}{number:04x}", state.openai.started());
    let header = Header {
        shape,
        id: format!("{prefix}-{base}"),
        created: unix_now(),
        model: job.model.clone(),
        include_usage: job.include_usage,
    };
    if let Some(session) = &job.request.session {
        tracing::info!(%session, id = %header.id, "request");
    }
    let events = match state.engine.submit(job.request) {
        Ok(events) => events,
        Err(error) => return prompt_param(ApiError::from(error), shape).into_response(),
    };
    // The engine says how calls appear (none in `none` mode): bare calls in `auto` too.
    let calls = events
        .call_syntax()
        .map(|syntax| syntax.stream_parser(events.prefill()));
    let pipeline = Pipeline::new(calls, job.stops, &base);
    if job.stream {
        stream(header, events, pipeline).into_response()
    } else {
        match collect(events, pipeline).await {
            Ok(collected) => Json(body(&header, &collected)).into_response(),
            Err(error) => error.into_response(),
        }
    }
}

/// Engine errors about the prompt name `messages`; on `/v1/completions` the field is `prompt`.
fn prompt_param(mut error: ApiError, shape: Shape) -> ApiError {
    if shape == Shape::Completion && error.param.as_deref() == Some("messages") {
        error.param = Some("prompt".into());
    }
    error
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A finished call.
#[derive(Debug, Clone)]
struct CallOut {
    id: String,
    name: String,
    arguments: String,
}

/// A whole response.
#[derive(Debug, Default)]
struct Collected {
    content: String,
    calls: Vec<CallOut>,
    finish: &'static str,
    usage: Option<UsageBody>,
}

impl Collected {
    fn apply(&mut self, delta: Delta) {
        match delta {
            Delta::Content(text) => self.content.push_str(&text),
            Delta::CallStart { id, name, .. } => self.calls.push(CallOut {
                id,
                name,
                arguments: String::new(),
            }),
            Delta::Arguments { index, text } => {
                if let Some(call) = self.calls.get_mut(index) {
                    call.arguments.push_str(&text);
                }
            }
        }
    }

    /// Arguments exactly as the model generated them (valid JSON; sent back
    /// in a later turn, they render to the same text, see
    /// `prompt::replayed_arguments`). A call cut short by the token limit
    /// keeps its partial arguments (finish reason `length`, as OpenAI answers).
    fn finalize(&mut self, completion: &Completion) {
        let cut = completion.reason == FinishReason::Length;
        self.calls
            .retain(|call| cut || serde_json::from_str::<Value>(&call.arguments).is_ok());
        self.finish = finish_reason(completion.reason, !self.calls.is_empty());
        self.usage = Some(completion.usage.into());
    }
}

fn finish_reason(reason: FinishReason, has_calls: bool) -> &'static str {
    match reason {
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Stop if has_calls => "tool_calls",
        FinishReason::Stop => "stop",
    }
}

async fn collect(mut events: EventStream, mut pipeline: Pipeline) -> Result<Collected, ApiError> {
    let mut collected = Collected::default();
    while let Some(event) = events.next().await {
        match event {
            Event::Token { text, .. } => pipeline.push(&text).into_iter().for_each(|d| collected.apply(d)),
            Event::Finished(completion) => {
                pipeline.finish().into_iter().for_each(|d| collected.apply(d));
                collected.finalize(&completion);
                return Ok(collected);
            }
            Event::Failed(error) => return Err(error.into()),
        }
    }
    Err(tessera_engine::EngineError::Stopped.into())
}

fn body(header: &Header, collected: &Collected) -> Value {
    let usage = collected.usage.map(|u| json!(u)).unwrap_or(Value::Null);
    match header.shape {
        Shape::Chat => {
            let mut message = json!({
                "role": "assistant",
                "content": if collected.content.is_empty() && !collected.calls.is_empty() {
                    Value::Null
                } else {
                    Value::String(collected.content.clone())
                },
            });
            if !collected.calls.is_empty() {
                let calls: Vec<Value> = collected
                    .calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                message["tool_calls"] = Value::Array(calls);
            }
            json!({
                "id": header.id, "object": "chat.completion", "created": header.created, "model": header.model,
                "choices": [{"index": 0, "message": message, "finish_reason": collected.finish, "logprobs": null}],
                "usage": usage, "system_fingerprint": null,
            })
        }
        Shape::Completion => json!({
            "id": header.id, "object": "text_completion", "created": header.created, "model": header.model,
            "choices": [{"index": 0, "text": collected.content, "finish_reason": collected.finish, "logprobs": null}],
            "usage": usage,
        }),
    }
}

/// The SSE answer: chunks as the engine's events arrive.
fn stream(header: Header, events: EventStream, pipeline: Pipeline) -> impl IntoResponse {
    let mut queue = VecDeque::new();
    if header.shape == Shape::Chat {
        queue.push_back(chunk(&header, json!({"role": "assistant", "content": ""}), None));
    }
    let state = StreamState {
        header,
        events: Some(events),
        pipeline,
        queue,
        has_calls: false,
    };
    let chunks = futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.queue.pop_front() {
                return Some((Ok::<_, Infallible>(event), state));
            }
            let next = state.events.as_mut()?.next().await;
            state.on_event(next);
        }
    });
    Sse::new(chunks).keep_alive(KeepAlive::default())
}

struct StreamState {
    header: Header,
    /// `None` once the answer is complete (the queue drains, then the stream ends).
    events: Option<EventStream>,
    pipeline: Pipeline,
    queue: VecDeque<SseEvent>,
    has_calls: bool,
}

impl StreamState {
    fn on_event(&mut self, event: Option<Event>) {
        match event {
            Some(Event::Token { text, .. }) => {
                let deltas = self.pipeline.push(&text);
                self.push_deltas(deltas);
            }
            Some(Event::Finished(completion)) => {
                let deltas = self.pipeline.finish();
                self.push_deltas(deltas);
                let finish = finish_reason(completion.reason, self.has_calls);
                let last = match self.header.shape {
                    Shape::Chat => chunk(&self.header, json!({}), Some(finish)),
                    Shape::Completion => text_chunk(&self.header, "", Some(finish)),
                };
                self.queue.push_back(last);
                if self.header.include_usage {
                    let usage: UsageBody = completion.usage.into();
                    self.queue.push_back(usage_chunk(&self.header, usage));
                }
                self.end();
            }
            Some(Event::Failed(error)) => {
                let error = ApiError::from(error);
                self.queue.push_back(data(&error.body()));
                self.end();
            }
            None => {
                let error = ApiError::from(tessera_engine::EngineError::Stopped);
                self.queue.push_back(data(&error.body()));
                self.end();
            }
        }
    }

    fn end(&mut self) {
        self.queue.push_back(SseEvent::default().data("[DONE]"));
        self.events = None;
    }

    fn push_deltas(&mut self, deltas: Vec<Delta>) {
        for delta in deltas {
            let event = match (self.header.shape, delta) {
                (Shape::Completion, Delta::Content(text)) => text_chunk(&self.header, &text, None),
                (Shape::Completion, _) => continue,
                (Shape::Chat, Delta::Content(text)) => chunk(&self.header, json!({"content": text}), None),
                (Shape::Chat, Delta::CallStart { index, id, name }) => {
                    self.has_calls = true;
                    let call = json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
                    chunk(&self.header, json!({"tool_calls": [call]}), None)
                }
                (Shape::Chat, Delta::Arguments { index, text }) => {
                    let call = json!({"index": index, "function": {"arguments": text}});
                    chunk(&self.header, json!({"tool_calls": [call]}), None)
                }
            };
            self.queue.push_back(event);
        }
    }
}

fn data(value: &Value) -> SseEvent {
    SseEvent::default().data(value.to_string())
}

fn with_usage_slot(header: &Header, mut value: Value) -> Value {
    if header.include_usage {
        value["usage"] = Value::Null;
    }
    value
}

fn chunk(header: &Header, delta: Value, finish: Option<&str>) -> SseEvent {
    let value = json!({
        "id": header.id, "object": "chat.completion.chunk", "created": header.created, "model": header.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
    });
    data(&with_usage_slot(header, value))
}

fn text_chunk(header: &Header, text: &str, finish: Option<&str>) -> SseEvent {
    let value = json!({
        "id": header.id, "object": "text_completion", "created": header.created, "model": header.model,
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": null}],
    });
    data(&with_usage_slot(header, value))
}

fn usage_chunk(header: &Header, usage: UsageBody) -> SseEvent {
    let object = match header.shape {
        Shape::Chat => "chat.completion.chunk",
        Shape::Completion => "text_completion",
    };
    data(&json!({
        "id": header.id, "object": object, "created": header.created, "model": header.model,
        "choices": [], "usage": usage,
    }))
}
