//! Answering a job over HTTP, in the protocol it came through: one JSON body,
//! or the answer's events framed as server-sent events: `data: {…}` each and
//! `data: [DONE]` last for OpenAI's chat and completions; `event: NAME` and
//! `data: {…}` for Anthropic's Messages and the Responses API, whose streams
//! end after their last event. A failure after the start is sent as the
//! protocol's error event. The event stream lives inside the response: when
//! the client goes away the response is dropped, the stream with it, and the
//! engine cancels the request and frees its blocks.

use crate::error::{ApiError, Dialect};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::convert::Infallible;
use tessera_api::anthropic::{self, MessagesRender};
use tessera_api::openai::{self, ChatRender, CompletionRender, Streaming};
use tessera_api::responses::{self, ResponsesRender};
use tessera_api::{start, Api, Frame, Frames, Job, Render};

/// How a protocol frames its events.
pub trait Framing: Serialize {
    /// The SSE event name (`None`: a bare `data:` line).
    fn event_name(&self) -> Option<&'static str>;
}

impl Framing for openai::ChatCompletionChunk {
    fn event_name(&self) -> Option<&'static str> {
        None
    }
}

impl Framing for openai::TextCompletion {
    fn event_name(&self) -> Option<&'static str> {
        None
    }
}

impl Framing for anthropic::StreamEvent {
    fn event_name(&self) -> Option<&'static str> {
        Some(self.name())
    }
}

impl Framing for responses::StreamEvent {
    fn event_name(&self) -> Option<&'static str> {
        Some(self.body.name())
    }
}

/// Answer a chat job.
pub async fn chat(api: &Api, job: Job, streaming: Streaming) -> Response {
    let answer = match start(api, job) {
        Ok(answer) => answer,
        Err(error) => return ApiError::from(error).into_response(),
    };
    if streaming.stream {
        let render = ChatRender {
            include_usage: streaming.include_usage,
        };
        return server_sent_events(Frames::new(answer, render), Dialect::OpenAi);
    }
    let header = answer.header().clone();
    match answer.collect().await {
        Ok(collected) => Json(openai::chat_completion(&header, collected)).into_response(),
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// Answer a raw completion job.
pub async fn completion(api: &Api, job: Job, streaming: Streaming) -> Response {
    let answer = match start(api, job) {
        Ok(answer) => answer,
        Err(error) => return ApiError::from(error).into_response(),
    };
    if streaming.stream {
        let render = CompletionRender {
            include_usage: streaming.include_usage,
        };
        return server_sent_events(Frames::new(answer, render), Dialect::OpenAi);
    }
    let header = answer.header().clone();
    match answer.collect().await {
        Ok(collected) => Json(openai::text_completion(&header, collected)).into_response(),
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// Answer a Messages job.
pub async fn messages(api: &Api, job: Job, stream: bool) -> Response {
    let dialect = Dialect::Anthropic;
    let answer = match start(api, job) {
        Ok(answer) => answer,
        Err(error) => return ApiError::from(error).response_in(dialect),
    };
    if stream {
        return server_sent_events(Frames::new(answer, MessagesRender::default()), dialect);
    }
    let header = answer.header().clone();
    match answer.collect().await {
        Ok(collected) => Json(anthropic::message(&header, collected)).into_response(),
        Err(error) => ApiError::from(error).response_in(dialect),
    }
}

/// Answer a Responses job.
pub async fn responses(api: &Api, job: Job, render: ResponsesRender) -> Response {
    let answer = match start(api, job) {
        Ok(answer) => answer,
        Err(error) => return ApiError::from(error).into_response(),
    };
    if render.streamed() {
        return server_sent_events(Frames::new(answer, render), Dialect::OpenAi);
    }
    match responses::respond(answer, render).await {
        Ok(response) => Json(response).into_response(),
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// The SSE answer: each event as it is generated.
fn server_sent_events<R>(frames: Frames<R>, dialect: Dialect) -> Response
where
    R: Render + Send + 'static,
    R::Event: Framing + Send,
{
    // Chat Completions and Completions end with `[DONE]`; the others end after their last event.
    let done_marker = frames.header().endpoint.sends_done_marker();
    let events = futures_util::stream::unfold(Some(frames), move |frames| async move {
        let mut frames = frames?;
        let event = match frames.next().await? {
            Frame::Event(event) => {
                let data = serde_json::to_string(&event).unwrap_or_default();
                let named = event.event_name();
                let sse = SseEvent::default().data(data);
                match named {
                    Some(name) => sse.event(name),
                    None => sse,
                }
            }
            Frame::Failed(error) => failure_event(ApiError::from(error), dialect),
            Frame::Done if done_marker => SseEvent::default().data("[DONE]"),
            Frame::Done => return None,
        };
        Some((Ok::<_, Infallible>(event), Some(frames)))
    });
    Sse::new(events).keep_alive(keep_alive(dialect)).into_response()
}

/// What an idle stream sends every 15 s (a long prefill sends nothing else):
/// a comment, or for Messages Anthropic's own `ping` event, as Anthropic's
/// API does, so that proxies and clients watching bytes keep the stream.
/// (Clients watching content events do not count either: Claude Code
/// abandons a stream without one for `CLAUDE_STREAM_IDLE_TIMEOUT_MS`, at
/// least 5 minutes, which the README's configuration raises.)
fn keep_alive(dialect: Dialect) -> KeepAlive {
    match dialect {
        Dialect::OpenAi => KeepAlive::default(),
        Dialect::Anthropic => KeepAlive::new().event(SseEvent::default().event("ping").data(r#"{"type":"ping"}"#)),
    }
}

/// A failure after the stream started, as the protocol's error event (the
/// Responses API's is its renderer's `response.failed`).
fn failure_event(error: ApiError, dialect: Dialect) -> SseEvent {
    match dialect {
        Dialect::OpenAi => SseEvent::default().data(error.body().to_string()),
        Dialect::Anthropic => SseEvent::default()
            .event("error")
            .data(error.anthropic_body().to_string()),
    }
}
