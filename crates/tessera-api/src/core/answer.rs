//! Answering a job: submit it to the engine, then read the engine's events as
//! protocol-neutral [`Step`]s (content and call deltas, then how it ended),
//! either one by one or collected into one [`Collected`] answer. Each protocol
//! renders these into its own bodies and events ([`Frames`]); none has an
//! event pipeline of its own. Dropping an [`Answer`] drops the event stream,
//! which cancels the request in the engine.

use super::endpoint::Endpoint;
use super::memory::{Reply, ReplyMemory};
use super::pipeline::{Delta, Pipeline};
use crate::{Api, Job, RequestError};
use std::collections::VecDeque;
use std::sync::Arc;
use tessera_engine::{EngineError, Event, EventStream, Timings, Usage};

/// Why an answer ended, in the core's words; each protocol names it its way
/// (`stop` / `end_turn`, `tool_calls` / `tool_use`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// The model ended its turn.
    EndTurn,
    /// A stop string ended the free text (the string is not part of the answer).
    StopSequence(String),
    /// The length limit (or the KV pool) was reached.
    Length,
    /// The context window was reached before the length asked for (only
    /// for requests that fit their limit to the context).
    ContextWindow,
    /// The answer ended after one or more tool calls.
    ToolCalls,
}

/// `usage.speculation`, an extension every protocol's usage carries when the
/// engine drafted tokens for the answer: tokens drafted and verified, those
/// kept, and of those the ones the tool-call constraint forced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpeculationUsage {
    /// Drafted tokens run through the model.
    pub drafted: usize,
    /// Of those, tokens sampling kept.
    pub accepted: usize,
    /// Of the kept ones, tokens the constraint forced (fast-forward).
    pub forced: usize,
}

impl SpeculationUsage {
    /// The extension for `usage`: `None` when nothing was drafted.
    pub fn of(usage: &Usage) -> Option<Self> {
        let counts = usage.speculation;
        (counts.drafted > 0).then_some(Self {
            drafted: counts.drafted,
            accepted: counts.accepted,
            forced: counts.forced,
        })
    }
}

/// How an answer ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    /// Why.
    pub reason: FinishReason,
    /// Token counts (`cached_tokens`: prompt tokens served from the prefix cache).
    pub usage: Usage,
    /// Where the time went.
    pub timings: Timings,
}

/// What every body and event of one answer repeats.
#[derive(Debug, Clone)]
pub struct Header {
    /// The protocol it answers.
    pub endpoint: Endpoint,
    /// Unique across restarts (start time, then a counter, in hex); each
    /// protocol puts its own prefix on it.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The model id echoed.
    pub model: String,
    /// Prompt tokens (known before the first token).
    pub prompt_tokens: usize,
    /// The length limit was cut to what was left of the context.
    pub context_bound: bool,
}

/// One step of an answer.
#[derive(Debug, Clone)]
pub enum Step {
    /// What one generated token released (possibly nothing: text held back
    /// for a stop string, a character not yet complete, a call's envelope).
    Deltas(Vec<Delta>),
    /// The answer ended (the last step).
    Finished(Ending),
    /// The request failed after it started (the last step).
    Failed(RequestError),
}

/// A submitted job, not yet read.
#[derive(Debug)]
pub struct Answer {
    header: Header,
    events: Option<EventStream>,
    pipeline: Pipeline,
    memory: Arc<ReplyMemory>,
    /// The reply's whole text so far: the engine's prefill, then every token's.
    raw: String,
    /// What the reply said so far (remembered at the end, when it made calls).
    said: Collected,
    /// The ending, when the last token released deltas that go first.
    pending: Option<Ending>,
}

/// Submit `job` to the engine. Refusals at submission (a full queue, a prompt
/// over the context) name the job's own request field.
pub fn start(api: &Api, job: Job) -> Result<Answer, RequestError> {
    let endpoint = job.endpoint;
    let header = Header {
        endpoint,
        // Ids stay unique across restarts: the start time is part of them.
        id: format!("{:x}{:04x}", api.started(), api.next_id()),
        created: unix_now(),
        model: job.model,
        prompt_tokens: job.request.prompt.len(),
        context_bound: job.context_bound,
    };
    if let Some(session) = &job.request.session {
        tracing::info!(%session, id = %header.id, "request");
    }
    let events = api
        .engine()
        .submit(job.request)
        .map_err(|error| RequestError::engine(error, endpoint))?;
    // The engine says how calls appear (none in `none` mode): bare calls in `auto` too.
    let calls = events
        .call_syntax()
        .map(|syntax| syntax.stream_parser(events.prefill()));
    let raw = events.prefill().to_string();
    Ok(Answer {
        pipeline: Pipeline::new(calls, job.stops, &header.id),
        header,
        events: Some(events),
        memory: api.replies.clone(),
        raw,
        said: Collected::default(),
        pending: None,
    })
}

impl Answer {
    /// What every body and event of this answer repeats.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The next step; `None` after the last.
    pub async fn next(&mut self) -> Option<Step> {
        if let Some(ending) = self.pending.take() {
            return Some(Step::Finished(ending));
        }
        let event = self.events.as_mut()?.next().await;
        Some(self.on_event(event))
    }

    /// The next step, blocking this thread (not from inside an async runtime).
    pub fn blocking_next(&mut self) -> Option<Step> {
        if let Some(ending) = self.pending.take() {
            return Some(Step::Finished(ending));
        }
        let event = self.events.as_mut()?.blocking_next();
        Some(self.on_event(event))
    }

    /// Wait for the whole answer.
    pub async fn collect(mut self) -> Result<Collected, RequestError> {
        let mut collected = Collected::default();
        while let Some(step) = self.next().await {
            if let Some(result) = collected.apply(step) {
                return result;
            }
        }
        Err(RequestError::engine(EngineError::Stopped, self.header.endpoint))
    }

    /// Wait for the whole answer, blocking this thread.
    pub fn blocking_collect(mut self) -> Result<Collected, RequestError> {
        let mut collected = Collected::default();
        while let Some(step) = self.blocking_next() {
            if let Some(result) = collected.apply(step) {
                return result;
            }
        }
        Err(RequestError::engine(EngineError::Stopped, self.header.endpoint))
    }

    fn on_event(&mut self, event: Option<Event>) -> Step {
        match event {
            Some(Event::Token { text, .. }) => {
                self.raw.push_str(&text);
                let deltas = self.pipeline.push(&text);
                self.note(&deltas);
                Step::Deltas(deltas)
            }
            Some(Event::Finished(completion)) => {
                let deltas = self.pipeline.finish();
                self.note(&deltas);
                self.events = None;
                self.remember_reply();
                let reason = match completion.reason {
                    tessera_engine::FinishReason::Length if self.header.context_bound => FinishReason::ContextWindow,
                    tessera_engine::FinishReason::Length => FinishReason::Length,
                    tessera_engine::FinishReason::ToolCalls => FinishReason::ToolCalls,
                    _ if !self.said.calls.is_empty() => FinishReason::ToolCalls,
                    tessera_engine::FinishReason::Stop => match self.pipeline.stopped_by() {
                        Some(stop) => FinishReason::StopSequence(stop.to_string()),
                        None => FinishReason::EndTurn,
                    },
                };
                let ending = Ending {
                    reason,
                    usage: completion.usage,
                    timings: completion.timings,
                };
                match deltas.is_empty() {
                    true => Step::Finished(ending),
                    // The held-back deltas come first; the ending follows.
                    false => {
                        self.pending = Some(ending);
                        Step::Deltas(deltas)
                    }
                }
            }
            Some(Event::Failed(error)) => self.fail(error),
            None => self.fail(EngineError::Stopped),
        }
    }

    fn fail(&mut self, error: EngineError) -> Step {
        self.events = None;
        Step::Failed(RequestError::engine(error, self.header.endpoint))
    }

    fn note(&mut self, deltas: &[Delta]) {
        deltas.iter().for_each(|delta| self.said.push(delta.clone()));
    }

    /// An answer with calls is remembered whole, so that the next turn can
    /// spell it as generated (see [`ReplyMemory`]).
    fn remember_reply(&mut self) {
        let said = std::mem::take(&mut self.said);
        if said.calls.is_empty() {
            return;
        }
        tracing::debug!(id = %self.header.id, raw = %self.raw, "a reply with calls");
        let ids = said.calls.iter().map(|call| call.id.clone()).collect();
        let reply = Reply {
            text: std::mem::take(&mut self.raw),
            content: said.content,
            calls: said.calls.into_iter().map(|call| (call.name, call.arguments)).collect(),
        };
        self.memory.remember(ids, reply);
    }
}

/// A finished call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `call_…`, unique per answer.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments exactly as the model generated them.
    pub arguments: String,
}

/// A whole answer.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    /// The free text.
    pub content: String,
    /// The calls, in order.
    pub calls: Vec<Call>,
    ending: Option<Ending>,
}

impl Collected {
    /// How it ended.
    pub fn ending(&self) -> &Ending {
        self.ending.as_ref().unwrap_or(&NO_ENDING)
    }

    /// Apply a step; the result once the answer is over.
    fn apply(&mut self, step: Step) -> Option<Result<Collected, RequestError>> {
        match step {
            Step::Deltas(deltas) => {
                deltas.into_iter().for_each(|delta| self.push(delta));
                None
            }
            Step::Finished(ending) => {
                self.finalize(ending);
                Some(Ok(std::mem::take(self)))
            }
            Step::Failed(error) => Some(Err(error)),
        }
    }

    /// Add one delta.
    pub fn push(&mut self, delta: Delta) {
        match delta {
            Delta::Content(text) => self.content.push_str(&text),
            Delta::CallStart { id, name, .. } => self.calls.push(Call {
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
    /// keeps its partial arguments (the answer ends for its length).
    fn finalize(&mut self, mut ending: Ending) {
        let cut = matches!(ending.reason, FinishReason::Length | FinishReason::ContextWindow);
        self.calls
            .retain(|call| cut || serde_json::from_str::<serde_json::Value>(&call.arguments).is_ok());
        if ending.reason == FinishReason::ToolCalls && self.calls.is_empty() {
            ending.reason = FinishReason::EndTurn;
        }
        self.ending = Some(ending);
    }
}

const NO_ENDING: Ending = Ending {
    reason: FinishReason::EndTurn,
    usage: Usage {
        prompt_tokens: 0,
        completion_tokens: 0,
        cached_tokens: 0,
        speculation: tessera_engine::DraftCounts {
            drafted: 0,
            accepted: 0,
            forced: 0,
        },
    },
    timings: Timings {
        queued: std::time::Duration::ZERO,
        time_to_first_token: std::time::Duration::ZERO,
        total: std::time::Duration::ZERO,
    },
};

/// How one protocol renders an answer's steps as its own stream events.
pub trait Render {
    /// One event of the protocol's stream.
    type Event;
    /// Events before the first token.
    fn opening(&mut self, header: &Header) -> Vec<Self::Event>;
    /// Events for what one token released.
    fn deltas(&mut self, header: &Header, deltas: Vec<Delta>) -> Vec<Self::Event>;
    /// The last events.
    fn ending(&mut self, header: &Header, ending: &Ending) -> Vec<Self::Event>;
    /// The last events of an answer that failed after it started, when the
    /// protocol has its own (`None`: the server sends its error event).
    fn failed(&mut self, _header: &Header, _error: &RequestError) -> Option<Vec<Self::Event>> {
        None
    }
}

/// One piece of a streamed answer.
#[derive(Debug, Clone)]
pub enum Frame<E> {
    /// A protocol event.
    Event(E),
    /// The request failed after it started; [`Frame::Done`] follows.
    Failed(RequestError),
    /// The stream is over.
    Done,
}

/// An answer read as one protocol's stream events.
#[derive(Debug)]
pub struct Frames<R: Render> {
    answer: Answer,
    render: R,
    queue: VecDeque<Frame<R::Event>>,
}

impl<R: Render> Frames<R> {
    /// Render `answer` with `render`; the opening events come first.
    pub fn new(answer: Answer, mut render: R) -> Self {
        let queue = render.opening(&answer.header).into_iter().map(Frame::Event).collect();
        Self { answer, render, queue }
    }

    /// What every event of this answer repeats.
    pub fn header(&self) -> &Header {
        &self.answer.header
    }

    /// The next frame; `None` after [`Frame::Done`].
    pub async fn next(&mut self) -> Option<Frame<R::Event>> {
        loop {
            if let Some(frame) = self.queue.pop_front() {
                return Some(frame);
            }
            let step = self.answer.next().await?;
            self.on_step(step);
        }
    }

    /// The next frame, blocking this thread (not from inside an async runtime).
    pub fn blocking_next(&mut self) -> Option<Frame<R::Event>> {
        loop {
            if let Some(frame) = self.queue.pop_front() {
                return Some(frame);
            }
            let step = self.answer.blocking_next()?;
            self.on_step(step);
        }
    }

    fn on_step(&mut self, step: Step) {
        let header = &self.answer.header;
        match step {
            Step::Deltas(deltas) => {
                let events = self.render.deltas(header, deltas);
                self.queue.extend(events.into_iter().map(Frame::Event));
            }
            Step::Finished(ending) => {
                let events = self.render.ending(header, &ending);
                self.queue.extend(events.into_iter().map(Frame::Event));
                self.queue.push_back(Frame::Done);
            }
            Step::Failed(error) => {
                match self.render.failed(header, &error) {
                    Some(events) => self.queue.extend(events.into_iter().map(Frame::Event)),
                    None => self.queue.push_back(Frame::Failed(error)),
                }
                self.queue.push_back(Frame::Done);
            }
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
