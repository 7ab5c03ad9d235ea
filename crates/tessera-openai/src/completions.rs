//! `POST /v1/completions`: raw prompt text, no chat template, no tools.

use crate::answer::Endpoint;
use crate::api::{CompletionRequest, PromptSpec};
use crate::chat::{check_temperature, max_tokens, sampling, stop_strings, Answering, Job};
use crate::OpenAi;
use crate::OpenAiError;
use std::sync::Arc;
use tessera_engine::GenerateRequest;

/// OpenAI's default completion length.
const DEFAULT_MAX_TOKENS: u64 = 16;

/// Parameters Tessera does not implement are refused, not silently ignored
/// (an evaluation harness asking for `echo` or `logprobs` must not get wrong scores).
fn unsupported(body: &CompletionRequest) -> Result<(), OpenAiError> {
    check_temperature(body.temperature)?;
    let refuse = |param: &str, what: &str| Err(OpenAiError::invalid(param, format!("{param}: {what}")));
    if body.n.is_some_and(|n| n != 1) {
        return refuse("n", "only n = 1 is supported");
    }
    if body.best_of.is_some_and(|n| n != 1) {
        return refuse("best_of", "only best_of = 1 is supported");
    }
    if body.echo == Some(true) {
        return refuse("echo", "echo is not supported");
    }
    if body.logprobs.is_some_and(|n| n > 0) {
        return refuse("logprobs", "logprobs are not supported");
    }
    if body.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return refuse("suffix", "suffix (insertion) is not supported");
    }
    for (param, value) in [
        ("presence_penalty", body.presence_penalty),
        ("frequency_penalty", body.frequency_penalty),
    ] {
        if value.is_some_and(|v| v != 0.0) {
            return refuse(param, "only 0 is supported");
        }
    }
    Ok(())
}

/// Validate `body` into a job; `session` is the `X-Session-Id` header, if sent.
pub fn completion_job(state: &OpenAi, body: CompletionRequest, session: Option<String>) -> Result<Job, OpenAiError> {
    unsupported(&body)?;
    let text = match body.prompt {
        PromptSpec::One(text) => text,
        PromptSpec::Many(mut many) if many.len() == 1 => many.remove(0),
        PromptSpec::Many(many) => {
            return Err(OpenAiError::invalid(
                "prompt",
                format!("{} prompts given; one prompt per request is supported", many.len()),
            ))
        }
    };
    if text.is_empty() {
        return Err(OpenAiError::invalid("prompt", "the prompt is empty"));
    }
    let prompt = state
        .engine
        .tokenizer()
        .encode(&text)
        .map_err(|error| OpenAiError::internal("tokenizing a prompt", error))?;
    let requested = Some(body.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS));
    let limit = max_tokens(state, Endpoint::Completion, prompt.len(), requested)?;
    let stops = stop_strings(body.stop)?;
    let request = GenerateRequest {
        sampling: sampling(state, body.temperature, body.top_p, body.seed),
        stop_strings: stops.clone(),
        session: session.or(body.user).map(Arc::from),
        ..GenerateRequest::greedy(prompt, limit)
    };
    let answering = Answering {
        stream: body.stream,
        stream_options: body.stream_options,
        model: body.model,
    };
    Ok(answering.job(state, Endpoint::Completion, request, stops, Vec::new()))
}
