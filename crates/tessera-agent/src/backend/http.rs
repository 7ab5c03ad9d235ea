//! Any OpenAI-compatible server (`--server URL`): plain HTTP through ureq,
//! the answer streamed and read line by line.

use super::sse::Assembler;
use super::{error_message, streaming, Backend, ChatOutcome};
use crate::AgentError;
use serde::Deserialize;
use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};
use tessera_api::openai::ChatCompletionRequest;

/// A long prefill on a CPU server can take minutes before the first byte.
const READ_TIMEOUT: Duration = Duration::from_secs(600);

/// A chat-completions endpoint at a base URL such as `http://127.0.0.1:8080/v1`.
pub struct Http {
    agent: ureq::Agent,
    base: String,
    api_key: Option<String>,
    model: String,
}

impl Http {
    /// Connect to `base_url`; with no `model`, the first one `GET /models` lists.
    pub fn connect(base_url: &str, api_key: Option<String>, model: Option<String>) -> Result<Self, AgentError> {
        let base = base_url.trim_end_matches('/').to_string();
        if !base.starts_with("http://") {
            return Err(AgentError::Config {
                field: "server",
                reason: format!(
                    "`{base_url}` is not an http:// URL (expected e.g. http://127.0.0.1:8080/v1; this build speaks plain HTTP only)"
                ),
            });
        }
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(10))
            .timeout_read(READ_TIMEOUT)
            .build();
        let mut http = Self {
            agent,
            base,
            api_key,
            model: String::new(),
        };
        http.model = match model {
            Some(model) => model,
            None => http.first_model()?,
        };
        Ok(http)
    }

    fn request(&self, method: &str, path: &str) -> ureq::Request {
        let request = self.agent.request(method, &format!("{}{path}", self.base));
        match &self.api_key {
            Some(key) => request.set("Authorization", &format!("Bearer {key}")),
            None => request,
        }
    }

    fn first_model(&self) -> Result<String, AgentError> {
        let body = read_answer(self.request("GET", "/models").call(), &self.base)?
            .into_string()
            .map_err(|e| AgentError::Backend(format!("reading {}/models: {e}", self.base)))?;
        let models: ModelList = serde_json::from_str(&body)
            .map_err(|e| AgentError::Backend(format!("{}/models did not answer a model list: {e}", self.base)))?;
        models
            .data
            .into_iter()
            .next()
            .map(|model| model.id)
            .ok_or_else(|| AgentError::Backend(format!("{}/models lists no model", self.base)))
    }
}

/// `GET /models`.
#[derive(Deserialize)]
struct ModelList {
    data: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
}

fn read_answer(result: Result<ureq::Response, ureq::Error>, base: &str) -> Result<ureq::Response, AgentError> {
    match result {
        Ok(response) => Ok(response),
        Err(ureq::Error::Status(status, response)) => {
            Err(error_message(status, &response.into_string().unwrap_or_default()))
        }
        Err(error) => Err(AgentError::Backend(format!("cannot reach {base}: {error}"))),
    }
}

impl Backend for Http {
    fn chat(&mut self, request: &ChatCompletionRequest, session: &str) -> Result<ChatOutcome, AgentError> {
        let body = serde_json::to_string(&streaming(request, &self.model))
            .map_err(|e| AgentError::Backend(format!("serializing a request: {e}")))?;
        let sent = Instant::now();
        let response = read_answer(
            self.request("POST", "/chat/completions")
                .set("Content-Type", "application/json")
                .set("X-Session-Id", session)
                .send_string(&body),
            &self.base,
        )?;
        let mut assembler = Assembler::new(sent);
        for line in BufReader::new(response.into_reader()).lines() {
            let line = line.map_err(|e| AgentError::Backend(format!("reading the stream: {e}")))?;
            assembler.push_line(&line)?;
        }
        assembler.finish()
    }

    fn model(&self) -> &str {
        &self.model
    }
}
