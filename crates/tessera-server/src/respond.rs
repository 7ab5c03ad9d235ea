//! Answering a job over HTTP: one JSON body, or the answer's chunks framed as
//! server-sent events (`data: {…}` each, `[DONE]` last). The chunk stream
//! lives inside the response: when the client goes away the response is
//! dropped, the stream with it, and the engine cancels the request and frees
//! its blocks.

use crate::error::ApiError;
use crate::AppState;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::convert::Infallible;
use tessera_openai::{start, Chunk, Chunks, Job};

/// Submit `job` and answer it.
pub async fn answer(state: &AppState, job: Job) -> Response {
    let answer = match start(&state.openai, job) {
        Ok(answer) => answer,
        Err(error) => return ApiError::from(error).into_response(),
    };
    if answer.streamed() {
        server_sent_events(answer.chunks()).into_response()
    } else {
        match answer.body().await {
            Ok(body) => Json(body).into_response(),
            Err(error) => ApiError::from(error).into_response(),
        }
    }
}

/// The SSE answer: each chunk as it is generated; a failure after the start
/// is sent as an OpenAI error body, then `[DONE]`.
fn server_sent_events(chunks: Chunks) -> impl IntoResponse {
    let events = futures_util::stream::unfold(chunks, |mut chunks| async move {
        let event = match chunks.next().await? {
            Chunk::Data(value) => SseEvent::default().data(value.to_string()),
            Chunk::Failed(error) => SseEvent::default().data(ApiError::from(error).body().to_string()),
            Chunk::Done => SseEvent::default().data("[DONE]"),
        };
        Some((Ok::<_, Infallible>(event), chunks))
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}
