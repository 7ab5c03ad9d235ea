//! The engine in this process, reached through `tessera-server`'s router
//! without a socket: the same validation, prompt rendering, masking and
//! streaming as `tessera serve`, and no second copy of any of it.

use super::sse::Assembler;
use super::{error_message, streaming_body, Backend, ChatOutcome};
use crate::AgentError;
use axum::body::Body;
use axum::http::{header, Request};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use std::time::Instant;
use tessera_engine::EngineHandle;
use tessera_server::{router, AppState, ServerConfig};
use tower::ServiceExt;

/// The in-process backend.
pub struct InProcess {
    runtime: tokio::runtime::Runtime,
    router: Router,
    engine: EngineHandle,
    model: String,
}

impl InProcess {
    /// Serve `engine` to this process only, under the id `model`.
    pub fn new(engine: EngineHandle, model: String) -> Result<Self, AgentError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| AgentError::Io {
                what: "starting the async runtime".into(),
                source,
            })?;
        let config = ServerConfig {
            model_name: model.clone(),
            ..ServerConfig::default()
        };
        let router = router(AppState::new(engine.clone(), config));
        Ok(Self {
            runtime,
            router,
            engine,
            model,
        })
    }

    /// The engine (for its tokenizer, context size and metrics).
    pub fn engine(&self) -> &EngineHandle {
        &self.engine
    }
}

impl Backend for InProcess {
    fn chat(&mut self, body: &Value, session: &str) -> Result<ChatOutcome, AgentError> {
        let body = streaming_body(body, &self.model).to_string();
        let request = Request::post("/v1/chat/completions")
            .header(header::CONTENT_TYPE, "application/json")
            .header("x-session-id", session)
            .body(Body::from(body))
            .map_err(|e| AgentError::Backend(format!("building the request: {e}")))?;
        let sent = Instant::now();
        let router = self.router.clone();
        let response = self
            .runtime
            .block_on(router.oneshot(request))
            .map_err(|e| AgentError::Backend(format!("the router failed: {e}")))?;
        let status = response.status();
        let mut body = response.into_body();
        if !status.is_success() {
            let bytes = self
                .runtime
                .block_on(body.collect())
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            return Err(error_message(status.as_u16(), &String::from_utf8_lossy(&bytes)));
        }
        let mut assembler = Assembler::new(sent);
        while let Some(frame) = self.runtime.block_on(body.frame()) {
            let frame = frame.map_err(|e| AgentError::Backend(format!("reading the stream: {e}")))?;
            if let Some(data) = frame.data_ref() {
                assembler.push_bytes(data)?;
            }
        }
        assembler.finish()
    }

    fn model(&self) -> &str {
        &self.model
    }
}
