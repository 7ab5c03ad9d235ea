//! Tessera's HTTP server: OpenAI's `POST /v1/chat/completions`,
//! `/v1/completions` and `/v1/responses`, Anthropic's `POST /v1/messages` and
//! `/v1/messages/count_tokens`, `GET /v1/models`, `GET /health`,
//! `GET /metrics`, and what routers in front of replicas read. The only
//! crate that knows HTTP: it reads bodies within their limit, hands them to
//! `tessera-api` (each protocol parsed into one typed core: validation,
//! prompt rendering, answers), frames streamed answers as server-sent
//! events, checks the API key, exposes the metrics, and maps every typed
//! error to an HTTP status at one place ([`ApiError`], in each protocol's
//! error shape). A dropped connection drops the request's event stream,
//! which cancels it and frees its KV blocks.
#![deny(missing_docs)]

mod body;
mod cluster;
mod error;
mod kv_events;
mod metrics;
mod respond;
mod routes;

pub use error::{ApiError, Dialect};
pub use kv_events::start_kv_events;
pub use routes::router;
pub use tessera_api::{Delta, Pipeline, StopScanner, DEFAULT_MAX_TOKENS, DEFAULT_STORED_RESPONSES};

use std::sync::Arc;
use std::time::Duration;
use tessera_api::{Api, ApiConfig};
use tessera_engine::EngineHandle;

/// How the server behaves at its edge.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The id `/v1/models` lists and responses echo.
    pub model_name: String,
    /// Require `Authorization: Bearer <key>` on every route but `/health`.
    pub api_key: Option<String>,
    /// Largest request body, in bytes (413 above).
    pub max_body_bytes: usize,
    /// After SIGINT/SIGTERM, how long in-flight requests may take to finish
    /// before they are cancelled.
    pub shutdown_grace: Duration,
    /// Most tokens a response gets when the request names no limit (a small
    /// model can wander inside a string argument for the whole context).
    pub default_max_tokens: usize,
    /// Ignore schema keywords the constraint cannot enforce (named in a
    /// warning header) instead of refusing the request.
    pub lenient_schemas: bool,
    /// Responses kept for the Responses API's `previous_response_id`.
    pub stored_responses: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            model_name: "tessera".into(),
            api_key: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            shutdown_grace: Duration::from_secs(30),
            default_max_tokens: DEFAULT_MAX_TOKENS,
            lenient_schemas: false,
            stored_responses: DEFAULT_STORED_RESPONSES,
        }
    }
}

/// Default request body limit: 8 MiB (a long agent context with tool schemas
/// is well under 1 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    pub(crate) engine: EngineHandle,
    pub(crate) config: Arc<ServerConfig>,
    /// Request validation and answers, shared with in-process callers' code.
    pub(crate) api: Api,
}

impl AppState {
    /// State for a server over `engine`.
    pub fn new(engine: EngineHandle, config: ServerConfig) -> Self {
        let api = Api::new(
            engine.clone(),
            ApiConfig {
                model_name: config.model_name.clone(),
                default_max_tokens: config.default_max_tokens,
                lenient_schemas: config.lenient_schemas,
                stored_responses: config.stored_responses,
            },
        );
        Self {
            engine,
            config: Arc::new(config),
            api,
        }
    }
}

/// Serve `state` on `listener` until `shutdown` resolves; then stop taking
/// connections, let in-flight requests finish for the grace period, and
/// cancel what is left by shutting the engine down (which also saves the
/// prefix cache when one is configured).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let engine = state.engine.clone();
    let grace = state.config.shutdown_grace;
    let (signalled, mut signal) = tokio::sync::watch::channel(false);
    let app = router(state);
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        shutdown.await;
        tracing::info!("shutting down: finishing in-flight requests");
        let _ = signalled.send(true);
    });
    let cancel_after_grace = async move {
        let _ = signal.wait_for(|&s| s).await;
        tokio::time::sleep(grace).await;
        tracing::warn!("grace period over: cancelling in-flight requests");
    };
    tokio::select! {
        result = server => result?,
        () = cancel_after_grace => {}
    }
    if let Err(error) = engine.shutdown().recv().await {
        tracing::warn!(%error, "engine shutdown");
    }
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "listening for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "listening for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
