//! The routes, the API-key check and the handlers' thin glue.

use crate::api::{ChatRequest, CompletionRequest};
use crate::body::parse;
use crate::error::ApiError;
use crate::metrics::prometheus;
use crate::respond::answer;
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
use tessera_openai::{chat_job, completion_job, OpenAi, OpenAiError};

/// Header naming the client's session (preferred over the body's `user`).
pub const SESSION_HEADER: &str = "x-session-id";
/// SMG's routing key, which SMG forwards (it drops `X-Session-Id`): the
/// session when no `X-Session-Id` is sent.
pub const ROUTING_KEY_HEADER: &str = "x-smg-routing-key";

/// Every route, with the body limit and (when configured) the API-key check.
pub fn router(state: AppState) -> Router {
    let limit = state.config.max_body_bytes;
    let api = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
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
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    if given.is_some_and(|key| constant_time_eq(key.as_bytes(), expected.as_bytes())) {
        next.run(request).await
    } else {
        ApiError::unauthorized().into_response()
    }
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
    let job = match parse::<ChatRequest>(body, state.config.max_body_bytes) {
        Ok(request) => {
            let session = session(&headers);
            off_the_runtime(&state, move |openai| chat_job(openai, request, session)).await
        }
        Err(error) => Err(error),
    };
    match job {
        Ok(job) => {
            let warnings = job.schema_warnings.clone();
            let mut response = answer(&state, job).await;
            if !warnings.is_empty() {
                tracing::warn!("lenient schemas: {}", warnings.join("; "));
                response
                    .headers_mut()
                    .insert(SCHEMA_WARNINGS_HEADER, header_text(&warnings.join("; ")));
            }
            response
        }
        Err(error) => error.into_response(),
    }
}

/// Validate a request on a blocking thread: rendering the template,
/// tokenizing and compiling a tool set are CPU work of up to seconds, which
/// on the async workers would stall every other connection (`/health`,
/// streams). The tool-set cache is shared without a lock across a compile.
pub(crate) async fn off_the_runtime<T: Send + 'static>(
    state: &AppState,
    validate: impl FnOnce(&OpenAi) -> Result<T, OpenAiError> + Send + 'static,
) -> Result<T, ApiError> {
    let openai = state.openai.clone();
    match tokio::task::spawn_blocking(move || validate(&openai)).await {
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

async fn completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let job = match parse::<CompletionRequest>(body, state.config.max_body_bytes) {
        Ok(request) => {
            let session = session(&headers);
            off_the_runtime(&state, move |openai| completion_job(openai, request, session)).await
        }
        Err(error) => Err(error),
    };
    match job {
        Ok(job) => answer(&state, job).await,
        Err(error) => error.into_response(),
    }
}

async fn models(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"object": "list", "data": [{
        "id": state.config.model_name, "object": "model", "created": state.openai.started(), "owned_by": "tessera",
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
    ApiError::method_not_allowed(method.as_str(), uri.path()).into_response()
}

async fn not_found(uri: Uri) -> Response {
    ApiError::not_found(uri.path()).into_response()
}
