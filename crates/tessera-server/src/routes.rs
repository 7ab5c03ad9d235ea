//! The routes, the API-key check and the handlers' thin glue: read the body
//! within its limit, parse it into the core on a blocking thread, answer in
//! the protocol it came through.

use crate::body::parse;
use crate::error::{ApiError, Dialect};
use crate::metrics::prometheus;
use crate::respond;
use crate::AppState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use tessera_api::anthropic::{messages_request, MessagesRequest, TokenCount};
use tessera_api::openai::{chat_request, completion_job, ChatCompletionRequest, CompletionRequest};
use tessera_api::responses::{responses_request, ResponsesRender, ResponsesRequest};
use tessera_api::{chat_job, Api, Endpoint, Job, RequestError};

/// Header naming the client's session (preferred over the body's `user`).
pub const SESSION_HEADER: &str = "x-session-id";
/// SMG's routing key, which SMG forwards (it drops `X-Session-Id`): the
/// session when no `X-Session-Id` is sent.
pub const ROUTING_KEY_HEADER: &str = "x-smg-routing-key";
/// Anthropic's API-key header (accepted beside `Authorization: Bearer`).
pub const API_KEY_HEADER: &str = "x-api-key";

/// Every route, with the body limit and (when configured) the API-key check.
pub fn router(state: AppState) -> Router {
    let limit = state.config.max_body_bytes;
    let api = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/responses", post(responses))
        .route("/v1/chat/completions/render", post(crate::cluster::render_chat))
        .route("/v1/completions/render", post(crate::cluster::render_completion))
        .route("/v1/models", get(models))
        .route("/v1/loads", get(crate::cluster::loads))
        .route("/kv/blocks", get(crate::cluster::kv_blocks))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_api_key));
    Router::new()
        .route("/health", get(health))
        .merge(api)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

async fn require_api_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(expected) = state.config.api_key.as_deref() else {
        return next.run(request).await;
    };
    if has_key(request.headers(), expected) {
        next.run(request).await
    } else {
        ApiError::unauthorized().response_in(Dialect::of_path(request.uri().path()))
    }
}

/// Whether `headers` carry `expected` as `Authorization: Bearer` or `x-api-key`.
fn has_key(headers: &HeaderMap, expected: &str) -> bool {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let bearer = text(header::AUTHORIZATION.as_str()).and_then(|value| value.strip_prefix("Bearer "));
    [bearer, text(API_KEY_HEADER)]
        .iter()
        .flatten()
        .any(|key| constant_time_eq(key.as_bytes(), expected.as_bytes()))
}

/// Compare without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The client's session: `X-Session-Id`, else `X-SMG-Routing-Key`.
fn session(headers: &HeaderMap) -> Option<String> {
    [SESSION_HEADER, ROUTING_KEY_HEADER].iter().find_map(|name| {
        headers
            .get(*name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_string)
    })
}

async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let job = match parse::<ChatCompletionRequest>(body, state.config.max_body_bytes) {
        Ok(request) => {
            let session = session(&headers);
            off_the_runtime(&state, move |api| {
                let (request, streaming) = chat_request(request, session)?;
                Ok((chat_job(api, Endpoint::Chat, request)?, streaming))
            })
            .await
        }
        Err(error) => Err(error),
    };
    match job {
        Ok((job, streaming)) => {
            let warnings = job.schema_warnings.clone();
            let response = respond::chat(&state.api, job, streaming).await;
            with_schema_warnings(response, &warnings)
        }
        Err(error) => error.into_response(),
    }
}

async fn completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let job = match parse::<CompletionRequest>(body, state.config.max_body_bytes) {
        Ok(request) => {
            let session = session(&headers);
            off_the_runtime(&state, move |api| completion_job(api, request, session)).await
        }
        Err(error) => Err(error),
    };
    match job {
        Ok((job, streaming)) => respond::completion(&state.api, job, streaming).await,
        Err(error) => error.into_response(),
    }
}

async fn messages(State(state): State<AppState>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    let job = match parse::<MessagesRequest>(body, state.config.max_body_bytes) {
        Ok(request) => {
            let session = session(&headers);
            off_the_runtime(&state, move |api| {
                let (request, stream) = messages_request(request, session, false)?;
                Ok((chat_job(api, Endpoint::Messages, request)?, stream))
            })
            .await
        }
        Err(error) => Err(error),
    };
    match job {
        Ok((job, stream)) => {
            let warnings = job.schema_warnings.clone();
            let response = respond::messages(&state.api, job, stream).await;
            with_schema_warnings(response, &warnings)
        }
        Err(error) => error.response_in(Dialect::Anthropic),
    }
}

async fn count_tokens(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let counted = match parse::<MessagesRequest>(body, state.config.max_body_bytes) {
        Ok(request) => {
            off_the_runtime(&state, move |api| {
                let (request, _) = messages_request(request, None, true)?;
                tessera_api::count_tokens(api, Endpoint::Messages, request)
            })
            .await
        }
        Err(error) => Err(error),
    };
    match counted {
        Ok(input_tokens) => Json(TokenCount { input_tokens }).into_response(),
        Err(error) => error.response_in(Dialect::Anthropic),
    }
}

async fn responses(State(state): State<AppState>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    let job = match parse::<ResponsesRequest>(body, state.config.max_body_bytes) {
        Ok(request) => {
            let session = session(&headers);
            off_the_runtime(&state, move |api| {
                let (request, continuation) = responses_request(api, request, session)?;
                let job: Job = chat_job(api, Endpoint::Responses, request)?;
                Ok((job, ResponsesRender::new(continuation, api.response_store())))
            })
            .await
        }
        Err(error) => Err(error),
    };
    match job {
        Ok((job, render)) => {
            let warnings = job.schema_warnings.clone();
            let response = respond::responses(&state.api, job, render).await;
            with_schema_warnings(response, &warnings)
        }
        Err(error) => error.into_response(),
    }
}

/// `response` with the schema keywords a lenient server ignored named in a header.
fn with_schema_warnings(mut response: Response, warnings: &[String]) -> Response {
    if !warnings.is_empty() {
        tracing::warn!("lenient schemas: {}", warnings.join("; "));
        response
            .headers_mut()
            .insert(SCHEMA_WARNINGS_HEADER, header_text(&warnings.join("; ")));
    }
    response
}

/// Validate a request on a blocking thread: rendering the template,
/// tokenizing and compiling a tool set are CPU work of up to seconds, which
/// on the async workers would stall every other connection (`/health`,
/// streams). The tool-set cache is shared without a lock across a compile.
pub(crate) async fn off_the_runtime<T: Send + 'static>(
    state: &AppState,
    validate: impl FnOnce(&Api) -> Result<T, RequestError> + Send + 'static,
) -> Result<T, ApiError> {
    let api = state.api.clone();
    match tokio::task::spawn_blocking(move || validate(&api)).await {
        Ok(job) => job.map_err(ApiError::from),
        Err(error) => Err(ApiError::internal("validating a request", &error)),
    }
}

/// Names the schema keywords a `--lenient-schemas` server ignored for this response.
pub const SCHEMA_WARNINGS_HEADER: &str = "x-tessera-schema-warnings";

/// `text` as a header value (characters a header cannot carry become `?`).
fn header_text(text: &str) -> HeaderValue {
    let visible: String = text
        .chars()
        .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' })
        .collect();
    HeaderValue::from_str(&visible).unwrap_or_else(|_| HeaderValue::from_static("?"))
}

async fn models(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"object": "list", "data": [{
        "id": state.config.model_name, "object": "model", "created": state.api.started(), "owned_by": "tessera",
    }]}))
}

async fn metrics(State(state): State<AppState>) -> Response {
    match state.engine.metrics().recv().await {
        Ok(metrics) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            prometheus(&metrics) + &crate::cluster::vllm_metrics(&metrics, &state.config.model_name),
        )
            .into_response(),
        Err(error) => ApiError::engine(&error, None).into_response(),
    }
}

/// 200 while the engine answers, 503 once it has stopped.
async fn health(State(state): State<AppState>) -> Response {
    match state.engine.metrics().recv().await {
        Ok(metrics) => Json(json!({
            "status": "ok",
            "requests_running": metrics.requests_running,
            "requests_waiting": metrics.requests_waiting,
        }))
        .into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "stopped"}))).into_response(),
    }
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    ApiError::method_not_allowed(method.as_str(), uri.path()).response_in(Dialect::of_path(uri.path()))
}

async fn not_found(uri: Uri) -> Response {
    ApiError::not_found(uri.path()).response_in(Dialect::of_path(uri.path()))
}
