//! The engine in this process, without HTTP: the typed request goes through
//! `tessera-api`'s core, the same code `tessera serve` runs, and its typed
//! chunks are read as they are generated, so TTFT is taken at the first
//! delta exactly as over a socket. Nothing is serialized on the way.

use super::sse::Assembler;
use super::{streaming, Backend, ChatOutcome};
use crate::AgentError;
use std::time::Instant;
use tessera_api::openai::{chat_request, ChatCompletionRequest, ChatRender};
use tessera_api::{chat_job, start, Api, ApiConfig, Endpoint, Frame, Frames, RequestError};
use tessera_engine::EngineHandle;

/// The in-process backend.
pub struct InProcess {
    api: Api,
    engine: EngineHandle,
    model: String,
}

impl InProcess {
    /// Answer requests with `engine`, under the id `model`.
    pub fn new(engine: EngineHandle, model: String) -> Result<Self, AgentError> {
        let config = ApiConfig {
            model_name: model.clone(),
            ..ApiConfig::default()
        };
        Ok(Self {
            api: Api::new(engine.clone(), config),
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
    fn chat(&mut self, request: &ChatCompletionRequest, session: &str) -> Result<ChatOutcome, AgentError> {
        let sent = Instant::now();
        let (request, options) =
            chat_request(streaming(request, &self.model), Some(session.to_string())).map_err(refused)?;
        let job = chat_job(&self.api, Endpoint::Chat, request).map_err(refused)?;
        let answer = start(&self.api, job).map_err(refused)?;
        let render = ChatRender {
            include_usage: options.include_usage,
        };
        let mut frames = Frames::new(answer, render);
        let mut assembler = Assembler::new(sent);
        while let Some(frame) = frames.blocking_next() {
            match frame {
                Frame::Event(chunk) => assembler.push_chunk(&chunk)?,
                Frame::Failed(error) => {
                    return Err(AgentError::Backend(format!("the stream ended with an error: {error}")))
                }
                Frame::Done => assembler.push_done(),
            }
        }
        assembler.finish()
    }

    fn model(&self) -> &str {
        &self.model
    }
}

/// A request the OpenAI layer or the engine refused.
fn refused(error: RequestError) -> AgentError {
    AgentError::Backend(format!("the request was refused: {error}"))
}
