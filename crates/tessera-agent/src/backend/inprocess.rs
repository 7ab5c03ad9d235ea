//! The engine in this process, without HTTP: the request is validated and
//! answered by `tessera-openai`, the same code `tessera serve` runs, and its
//! chunks are read as they are generated, so TTFT is taken at the first
//! delta exactly as over a socket.

use super::sse::Assembler;
use super::{streaming_body, Backend, ChatOutcome};
use crate::AgentError;
use serde_json::Value;
use std::time::Instant;
use tessera_engine::EngineHandle;
use tessera_openai::api::ChatRequest;
use tessera_openai::{chat_job, start, Chunk, OpenAi, OpenAiConfig, OpenAiError};

/// The in-process backend.
pub struct InProcess {
    openai: OpenAi,
    engine: EngineHandle,
    model: String,
}

impl InProcess {
    /// Answer requests with `engine`, under the id `model`.
    pub fn new(engine: EngineHandle, model: String) -> Result<Self, AgentError> {
        let config = OpenAiConfig {
            model_name: model.clone(),
            ..OpenAiConfig::default()
        };
        Ok(Self {
            openai: OpenAi::new(engine.clone(), config),
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
        let sent = Instant::now();
        let request: ChatRequest = serde_json::from_value(streaming_body(body, &self.model))
            .map_err(|error| AgentError::Backend(format!("the agent built a malformed request: {error}")))?;
        let job = chat_job(&self.openai, request, Some(session.to_string())).map_err(refused)?;
        let mut chunks = start(&self.openai, job).map_err(refused)?.chunks();
        let mut assembler = Assembler::new(sent);
        while let Some(chunk) = chunks.blocking_next() {
            match chunk {
                Chunk::Data(value) => assembler.push_chunk(&value)?,
                Chunk::Failed(error) => {
                    return Err(AgentError::Backend(format!("the stream ended with an error: {error}")))
                }
                Chunk::Done => assembler.push_done(),
            }
        }
        assembler.finish()
    }

    fn model(&self) -> &str {
        &self.model
    }
}

/// A request the OpenAI layer or the engine refused.
fn refused(error: OpenAiError) -> AgentError {
    AgentError::Backend(format!("the request was refused: {error}"))
}
