//! Answering a job: submit it to the engine, then either collect the whole
//! response into one JSON body or turn the engine's events into chunk values
//! (deltas as they come, the finish reason, usage on request, then the end).
//! No HTTP here: `tessera-server` frames the chunks as server-sent events and
//! an in-process caller reads them as they are. Dropping an [`Answer`] or its
//! [`Chunks`] drops the event stream, which cancels the request in the engine.

use crate::api::UsageBody;
use crate::pipeline::{Delta, Pipeline};
use crate::{Job, OpenAi, OpenAiError};
use serde_json::{json, Value};
use std::collections::VecDeque;
use tessera_engine::{Completion, EngineError, Event, EventStream, Field, FinishReason};

/// Which endpoint a job came from: it decides the response shapes and the
/// request field an engine error names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`: `chat.completion` / `chat.completion.chunk`.
    Chat,
    /// `/v1/completions`: `text_completion`.
    Completion,
}

impl Endpoint {
    /// The request field that holds what the engine calls `field`.
    pub fn param(self, field: Field) -> &'static str {
        match field {
            Field::Prompt | Field::PromptTokens | Field::PromptTokenId => match self {
                Endpoint::Chat => "messages",
                Endpoint::Completion => "prompt",
            },
            Field::MaxTokens => "max_tokens",
            Field::Stop | Field::StopStringBytes => "stop",
            Field::ToolChoice => "tool_choice",
            Field::Sampling(name) => name,
        }
    }

    fn id_prefix(self) -> &'static str {
        match self {
            Endpoint::Chat => "chatcmpl",
            Endpoint::Completion => "cmpl",
        }
    }

    fn chunk_object(self) -> &'static str {
        match self {
            Endpoint::Chat => "chat.completion.chunk",
            Endpoint::Completion => "text_completion",
        }
    }
}

/// What every body and chunk of one response repeats.
#[derive(Debug, Clone)]
struct Header {
    endpoint: Endpoint,
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
}

/// A submitted job, not yet read.
#[derive(Debug)]
pub struct Answer {
    header: Header,
    events: EventStream,
    pipeline: Pipeline,
    streamed: bool,
}

/// Submit `job` to the engine. Refusals at submission (a full queue, a prompt
/// over the context) name the job's own request field.
pub fn start(openai: &OpenAi, job: Job) -> Result<Answer, OpenAiError> {
    let endpoint = job.endpoint;
    // Ids stay unique across restarts: the start time is part of them.
    let base = format!("{:x}{:04x}", openai.started(), openai.next_id());
    let header = Header {
        endpoint,
        id: format!("{}-{base}", endpoint.id_prefix()),
        created: unix_now(),
        model: job.model,
        include_usage: job.include_usage,
    };
    if let Some(session) = &job.request.session {
        tracing::info!(%session, id = %header.id, "request");
    }
    let events = openai
        .engine()
        .submit(job.request)
        .map_err(|error| OpenAiError::engine(error, endpoint))?;
    // The engine says how calls appear (none in `none` mode): bare calls in `auto` too.
    let calls = events
        .call_syntax()
        .map(|syntax| syntax.stream_parser(events.prefill()));
    Ok(Answer {
        header,
        events,
        pipeline: Pipeline::new(calls, job.stops, &base),
        streamed: job.stream,
    })
}

impl Answer {
    /// The response id (`chatcmpl-…`).
    pub fn id(&self) -> &str {
        &self.header.id
    }

    /// Whether the request asked for a stream of chunks.
    pub fn streamed(&self) -> bool {
        self.streamed
    }

    /// Wait for the whole response and answer it as one JSON body.
    pub async fn body(mut self) -> Result<Value, OpenAiError> {
        let mut collected = Collected::default();
        while let Some(event) = self.events.next().await {
            match event {
                Event::Token { text, .. } => collected.apply_all(self.pipeline.push(&text)),
                Event::Finished(completion) => {
                    collected.apply_all(self.pipeline.finish());
                    collected.finalize(&completion);
                    return Ok(collected.body(&self.header));
                }
                Event::Failed(error) => return Err(OpenAiError::engine(error, self.header.endpoint)),
            }
        }
        Err(OpenAiError::engine(EngineError::Stopped, self.header.endpoint))
    }

    /// Read the response as chunks, as they are generated.
    pub fn chunks(self) -> Chunks {
        let mut queue = VecDeque::new();
        if self.header.endpoint == Endpoint::Chat {
            let opening = delta_chunk(&self.header, json!({"role": "assistant", "content": ""}), None);
            queue.push_back(Chunk::Data(opening));
        }
        Chunks {
            header: self.header,
            events: Some(self.events),
            pipeline: self.pipeline,
            queue,
            has_calls: false,
        }
    }
}

/// One piece of a streamed answer.
#[derive(Debug, Clone)]
pub enum Chunk {
    /// A chunk object (`chat.completion.chunk` or `text_completion`).
    Data(Value),
    /// The request failed after it started; the answer ends with [`Chunk::Done`].
    Failed(OpenAiError),
    /// The last piece (`[DONE]` on the wire).
    Done,
}

/// A response's chunks; the stream ends after [`Chunk::Done`].
#[derive(Debug)]
pub struct Chunks {
    header: Header,
    /// `None` once the answer is complete (the queue drains, then the stream ends).
    events: Option<EventStream>,
    pipeline: Pipeline,
    queue: VecDeque<Chunk>,
    has_calls: bool,
}

impl Chunks {
    /// The next chunk; `None` after [`Chunk::Done`].
    pub async fn next(&mut self) -> Option<Chunk> {
        loop {
            if let Some(chunk) = self.queue.pop_front() {
                return Some(chunk);
            }
            let event = self.events.as_mut()?.next().await;
            self.on_event(event);
        }
    }

    /// The next chunk, blocking this thread (not from inside an async runtime).
    pub fn blocking_next(&mut self) -> Option<Chunk> {
        loop {
            if let Some(chunk) = self.queue.pop_front() {
                return Some(chunk);
            }
            let event = self.events.as_mut()?.blocking_next();
            self.on_event(event);
        }
    }

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
                let last = match self.header.endpoint {
                    Endpoint::Chat => delta_chunk(&self.header, json!({}), Some(finish)),
                    Endpoint::Completion => text_chunk(&self.header, "", Some(finish)),
                };
                self.queue.push_back(Chunk::Data(last));
                if self.header.include_usage {
                    self.queue
                        .push_back(Chunk::Data(usage_chunk(&self.header, completion.usage.into())));
                }
                self.end();
            }
            Some(Event::Failed(error)) => self.fail(error),
            None => self.fail(EngineError::Stopped),
        }
    }

    fn fail(&mut self, error: EngineError) {
        let error = OpenAiError::engine(error, self.header.endpoint);
        self.queue.push_back(Chunk::Failed(error));
        self.end();
    }

    fn end(&mut self) {
        self.queue.push_back(Chunk::Done);
        self.events = None;
    }

    fn push_deltas(&mut self, deltas: Vec<Delta>) {
        for delta in deltas {
            let header = &self.header;
            let value = match (header.endpoint, delta) {
                (Endpoint::Completion, Delta::Content(text)) => text_chunk(header, &text, None),
                (Endpoint::Completion, _) => continue,
                (Endpoint::Chat, Delta::Content(text)) => delta_chunk(header, json!({"content": text}), None),
                (Endpoint::Chat, Delta::CallStart { index, id, name }) => {
                    self.has_calls = true;
                    let call = json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
                    delta_chunk(header, json!({"tool_calls": [call]}), None)
                }
                (Endpoint::Chat, Delta::Arguments { index, text }) => {
                    let call = json!({"index": index, "function": {"arguments": text}});
                    delta_chunk(header, json!({"tool_calls": [call]}), None)
                }
            };
            self.queue.push_back(Chunk::Data(value));
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn finish_reason(reason: FinishReason, has_calls: bool) -> &'static str {
    match reason {
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Stop if has_calls => "tool_calls",
        FinishReason::Stop => "stop",
    }
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
    fn apply_all(&mut self, deltas: Vec<Delta>) {
        deltas.into_iter().for_each(|delta| self.apply(delta));
    }

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

    fn body(&self, header: &Header) -> Value {
        let usage = self.usage.map(|u| json!(u)).unwrap_or(Value::Null);
        let (id, created, model) = (&header.id, header.created, &header.model);
        match header.endpoint {
            Endpoint::Chat => json!({
                "id": id, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": self.message(), "finish_reason": self.finish, "logprobs": null}],
                "usage": usage, "system_fingerprint": null,
            }),
            Endpoint::Completion => json!({
                "id": id, "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": 0, "text": self.content, "finish_reason": self.finish, "logprobs": null}],
                "usage": usage,
            }),
        }
    }

    /// The assistant message: content is `null` when the answer is only calls.
    fn message(&self) -> Value {
        let content = if self.content.is_empty() && !self.calls.is_empty() {
            Value::Null
        } else {
            Value::String(self.content.clone())
        };
        let mut message = json!({"role": "assistant", "content": content});
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .iter()
                .map(
                    |c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}),
                )
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        message
    }
}

/// `value` with the `usage: null` slot a stream with a usage chunk repeats.
fn with_usage_slot(header: &Header, mut value: Value) -> Value {
    if header.include_usage {
        value["usage"] = Value::Null;
    }
    value
}

fn delta_chunk(header: &Header, delta: Value, finish: Option<&str>) -> Value {
    let value = json!({
        "id": header.id, "object": "chat.completion.chunk", "created": header.created, "model": header.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
    });
    with_usage_slot(header, value)
}

fn text_chunk(header: &Header, text: &str, finish: Option<&str>) -> Value {
    let value = json!({
        "id": header.id, "object": "text_completion", "created": header.created, "model": header.model,
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": null}],
    });
    with_usage_slot(header, value)
}

fn usage_chunk(header: &Header, usage: UsageBody) -> Value {
    json!({
        "id": header.id, "object": header.endpoint.chunk_object(), "created": header.created, "model": header.model,
        "choices": [], "usage": usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_fields_are_named_as_each_endpoint_names_them() {
        assert_eq!(Endpoint::Chat.param(Field::PromptTokens), "messages");
        assert_eq!(Endpoint::Completion.param(Field::PromptTokenId), "prompt");
        assert_eq!(Endpoint::Completion.param(Field::StopStringBytes), "stop");
        assert_eq!(Endpoint::Chat.param(Field::Sampling("top_p")), "top_p");
    }

    #[test]
    fn a_body_with_only_calls_has_null_content_and_drops_unfinished_arguments() {
        let header = Header {
            endpoint: Endpoint::Chat,
            id: "chatcmpl-1".into(),
            created: 0,
            model: "m".into(),
            include_usage: false,
        };
        let mut collected = Collected::default();
        collected.apply_all(vec![
            Delta::CallStart {
                index: 0,
                id: "call_0".into(),
                name: "f".into(),
            },
            Delta::Arguments {
                index: 0,
                text: "{}".into(),
            },
            Delta::CallStart {
                index: 1,
                id: "call_1".into(),
                name: "g".into(),
            },
            Delta::Arguments {
                index: 1,
                text: "{\"a\":".into(),
            },
        ]);
        let completion = Completion {
            reason: FinishReason::Stop,
            usage: tessera_engine::Usage::default(),
            timings: tessera_engine::Timings::default(),
            tool_output: None,
        };
        collected.finalize(&completion);
        let body = collected.body(&header);
        let message = &body["choices"][0]["message"];
        assert_eq!(message["content"], Value::Null);
        assert_eq!(message["tool_calls"].as_array().map(Vec::len), Some(1));
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    }
}
