//! `POST /v1/completions`: raw prompt text, no chat template, no tools.

use super::convert::{stop_strings, Streaming};
use super::wire::{CompletionRequest, PromptSpec};
use crate::{raw_job, Api, Endpoint, Job, RawRequest, RequestError, Sampling};

/// OpenAI's default completion length.
const DEFAULT_MAX_TOKENS: u64 = 16;

/// Parameters Tessera does not implement are refused, not silently ignored
/// (an evaluation harness asking for `echo` or `logprobs` must not get wrong scores).
fn unsupported(body: &CompletionRequest) -> Result<(), RequestError> {
    let refuse = |param: &str, what: &str| Err(RequestError::invalid(param, format!("{param}: {what}")));
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
pub fn completion_job(
    state: &Api,
    body: CompletionRequest,
    session: Option<String>,
) -> Result<(Job, Streaming), RequestError> {
    unsupported(&body)?;
    let prompt = match body.prompt {
        PromptSpec::One(text) => text,
        PromptSpec::Many(mut many) if many.len() == 1 => many.remove(0),
        PromptSpec::Many(many) => {
            return Err(RequestError::invalid(
                "prompt",
                format!("{} prompts given; one prompt per request is supported", many.len()),
            ))
        }
    };
    let raw = RawRequest {
        prompt,
        sampling: Sampling {
            temperature: body.temperature,
            top_p: body.top_p,
            seed: body.seed,
            ..Sampling::default()
        },
        max_tokens: Some(body.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        stop: stop_strings(body.stop),
        session: session.or(body.user),
        model: body.model,
        ignore_eos: false,
    };
    let streaming = Streaming {
        stream: body.stream.unwrap_or(false),
        include_usage: body.stream_options.and_then(|o| o.include_usage).unwrap_or(false),
    };
    Ok((raw_job(state, Endpoint::Completion, raw)?, streaming))
}
