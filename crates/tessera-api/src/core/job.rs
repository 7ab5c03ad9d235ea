//! A [`ChatRequest`] validated into the engine's [`GenerateRequest`] plus what
//! answering it needs: the one place requests of every protocol are checked,
//! rendered, tokenized and constrained.

use super::endpoint::Endpoint;
use super::prompt::{chat_messages, RenderContext};
use super::request::{ChatRequest, Choice, RawRequest, Sampling};
use crate::{Api, RequestError};
use std::sync::Arc;
use tessera_constrain::{AllowedTool, CallMode, ConstrainError, ResponseSchema, ToolChoice, ToolDef};
use tessera_engine::{Constraint, Field, GenerateRequest, ToolConstraint};
use tessera_model::Protected;
use tessera_sample::SamplingParams;

/// A validated request and how to answer it.
#[derive(Debug)]
pub struct Job {
    /// The endpoint it came from (field names in errors, response shapes).
    pub endpoint: Endpoint,
    /// What the engine runs.
    pub request: GenerateRequest,
    /// Stop strings (the engine stops on them; the answer is cut before them).
    pub stops: Vec<String>,
    /// The model id to echo.
    pub model: String,
    /// Schema keywords ignored under `--lenient-schemas`, each with its path
    /// (sent back in the `x-tessera-schema-warnings` header).
    pub schema_warnings: Vec<String>,
    /// The length limit is what was left of the context, less than asked
    /// (an answer that reaches it ended at the window).
    pub context_bound: bool,
}

/// Validate `body`, which came through `endpoint`, into a job.
pub fn chat_job(state: &Api, endpoint: Endpoint, body: ChatRequest) -> Result<Job, RequestError> {
    check_temperature(endpoint, body.sampling.temperature)?;
    let prompt = prompt_tokens(state, endpoint, &body)?;
    let tools = tool_constraint(state, endpoint, &body.tools, body.tool_choice, body.parallel_tool_calls)?;
    let json_format = json_format(state, endpoint, body.json_format.as_ref())?;
    let schema_warnings: Vec<String> = tools
        .iter()
        .map(|t| t.tools.warnings())
        .chain(json_format.iter().map(ResponseSchema::warnings))
        .flat_map(|warnings| warnings.iter().cloned())
        .collect();
    let room = state.engine.model_config().max_context.saturating_sub(prompt.len());
    let (requested, context_bound) = match body.max_tokens {
        Some(n) if body.fit_to_context && room > 0 && n as usize > room => (Some(room as u64), true),
        requested => (requested, false),
    };
    let max_tokens = max_tokens(state, endpoint, prompt.len(), requested)?;
    let constraint = match (tools, json_format) {
        (Some(_), Some(_)) => {
            return Err(RequestError::invalid(
                endpoint.json_format_field(),
                "a JSON response format cannot be combined with tools",
            ))
        }
        (Some(tools), None) => Some(Constraint::Tools(tools)),
        (None, Some(schema)) => Some(Constraint::Json(schema)),
        (None, None) => None,
    };
    // Stop strings end free text; a JSON response is one value, never cut.
    let stops = match constraint {
        Some(Constraint::Json(_)) => Vec::new(),
        _ => body.stop,
    };
    let request = GenerateRequest {
        sampling: sampling(state, body.sampling),
        stop_strings: stops.clone(),
        stop_at_eos: !body.ignore_eos,
        constraint,
        session: body.session.map(Arc::from),
        ..GenerateRequest::greedy(prompt, max_tokens)
    };
    Ok(Job {
        endpoint,
        request,
        stops,
        model: body.model.unwrap_or_else(|| state.config.model_name.clone()),
        schema_warnings,
        context_bound,
    })
}

/// Validate a raw prompt (no template, no tools) into a job.
pub fn raw_job(state: &Api, endpoint: Endpoint, body: RawRequest) -> Result<Job, RequestError> {
    check_temperature(endpoint, body.sampling.temperature)?;
    if body.prompt.is_empty() {
        return Err(RequestError::invalid(endpoint.prompt_field(), "the prompt is empty"));
    }
    // The caller's own text: control-token text in it is that control token.
    let prompt = state
        .engine
        .tokenizer()
        .encode(&body.prompt)
        .map_err(|error| RequestError::internal("tokenizing a prompt", error))?;
    let max_tokens = max_tokens(state, endpoint, prompt.len(), body.max_tokens)?;
    let request = GenerateRequest {
        sampling: sampling(state, body.sampling),
        stop_strings: body.stop.clone(),
        stop_at_eos: !body.ignore_eos,
        session: body.session.map(Arc::from),
        ..GenerateRequest::greedy(prompt, max_tokens)
    };
    Ok(Job {
        endpoint,
        request,
        stops: body.stop,
        model: body.model.unwrap_or_else(|| state.config.model_name.clone()),
        schema_warnings: Vec::new(),
        context_bound: false,
    })
}

/// The prompt `body` renders to: its messages and tools through the chat
/// template, tokenized so that only the template's own text becomes control
/// tokens.
pub fn prompt_tokens(state: &Api, endpoint: Endpoint, body: &ChatRequest) -> Result<Vec<u32>, RequestError> {
    let format = state.engine.call_format();
    let mut protected = Protected::new(state.engine.tokenizer());
    let mut render = RenderContext {
        format,
        protected: &mut protected,
        memory: &state.replies,
        prompt_field: endpoint.prompt_field(),
    };
    let messages = chat_messages(&body.messages, &body.tools, &mut render)?;
    let text = state.engine.template().render(&messages, true).map_err(|error| {
        RequestError::invalid(
            endpoint.prompt_field(),
            format!("the chat template rejected them: {error}"),
        )
    })?;
    // Outside text that spells a control token is tokenized as the plain text it
    // is; without any, the prompt may replay the engine's own earlier tokens.
    match protected.is_empty() {
        true => state.engine.encode_prompt(&text),
        false => state.engine.tokenizer().encode_protected(&text, &protected),
    }
    .map_err(|error| RequestError::internal("tokenizing a prompt", error))
}

/// The tokens the engine would prefill for `body`: its prompt and, for a
/// forced call, the call's opening the engine appends. A prompt that fills
/// the context is counted as it is (there is no room to force anything).
pub fn count_tokens(state: &Api, endpoint: Endpoint, body: ChatRequest) -> Result<usize, RequestError> {
    let counted = body.clone();
    match chat_job(state, endpoint, body) {
        Ok(job) => {
            let prompt = job.request.prompt.len();
            match state.engine.render(job.request) {
                Ok(prefilled) => Ok(prefilled.len()),
                // Over what this server runs (its pool): counted all the same.
                Err(tessera_engine::EngineError::OverLimit { .. }) => Ok(prompt),
                Err(error) => Err(RequestError::engine(error, endpoint)),
            }
        }
        // No room to generate: the prompt alone is the count.
        Err(RequestError::Invalid(invalid)) if invalid.param == endpoint.param(Field::PromptTokens) => {
            prompt_tokens(state, endpoint, &counted).map(|tokens| tokens.len())
        }
        Err(error) => Err(error),
    }
}

/// The protocols' defaults (temperature 1, top_p 1); a request without a
/// seed gets a fresh one.
pub(crate) fn sampling(state: &Api, sampling: Sampling) -> SamplingParams {
    let defaults = SamplingParams::default();
    SamplingParams {
        temperature: sampling.temperature.unwrap_or(1.0),
        top_p: sampling.top_p.unwrap_or(1.0),
        top_k: sampling.top_k.unwrap_or(defaults.top_k),
        min_p: sampling.min_p.unwrap_or(defaults.min_p),
        repetition_penalty: sampling.repetition_penalty.unwrap_or(defaults.repetition_penalty),
        seed: sampling
            .seed
            .unwrap_or_else(|| state.started().rotate_left(17) ^ state.next_id()),
    }
}

/// A temperature above the protocol's scale is refused here; the engine checks the rest.
pub(crate) fn check_temperature(endpoint: Endpoint, temperature: Option<f32>) -> Result<(), RequestError> {
    let most = endpoint.max_temperature();
    match temperature {
        Some(t) if !(0.0..=most).contains(&t) => Err(RequestError::invalid(
            endpoint.param(Field::Sampling("temperature")),
            format!("temperature is {t}, outside [0, {most}]"),
        )),
        _ => Ok(()),
    }
}

/// The requested limit, or the server's default capped by what is left of the
/// context; the prompt and a requested limit together must fit the context.
pub(crate) fn max_tokens(
    state: &Api,
    endpoint: Endpoint,
    prompt: usize,
    requested: Option<u64>,
) -> Result<usize, RequestError> {
    let context = state.engine.model_config().max_context;
    let room = context.saturating_sub(prompt);
    let field = endpoint.max_tokens_field();
    match requested {
        _ if room == 0 => Err(RequestError::invalid(
            endpoint.param(Field::PromptTokens),
            format!(
                "the prompt is {prompt} tokens: with one token to generate, it is over the model's context of {context} tokens"
            ),
        )),
        None => Ok(room.min(state.config.default_max_tokens)),
        Some(0) => Err(RequestError::invalid(field, format!("{field} must be at least 1"))),
        Some(n) if n as usize > room => Err(RequestError::invalid(
            field,
            format!(
                "the prompt ({prompt} tokens) plus {field} ({n}) is over the model's context of {context} tokens"
            ),
        )),
        Some(n) => Ok(n as usize),
    }
}

/// The tool constraint: the default choice is `auto` when tools are given.
fn tool_constraint(
    state: &Api,
    endpoint: Endpoint,
    defs: &[ToolDef],
    choice: Option<Choice>,
    parallel: Option<bool>,
) -> Result<Option<ToolConstraint>, RequestError> {
    let choice = match (defs.is_empty(), choice) {
        (true, None) => return Ok(None),
        (true, Some(choice)) if choice.choice.mode == CallMode::None => return Ok(None),
        (true, Some(choice)) => {
            let field = choice.field;
            return Err(RequestError::invalid(field, format!("{field} needs `tools`")));
        }
        (false, None) => Choice::mode(CallMode::Auto, "tool_choice").choice,
        (false, Some(choice)) => choice.choice,
    };
    let tools = state.tool_sets.get_or_compile(defs).map_err(|error| {
        let param = match &error {
            ConstrainError::InvalidSchema { tool, path, .. } => defs
                .iter()
                .position(|def| &def.name == tool)
                .map(|i| format!("{}{}", endpoint.tool_schema_field(i), pointer_as_field_path(path))),
            _ => None,
        };
        RequestError::invalid(param.unwrap_or_else(|| "tools".into()), error.to_string())
    })?;
    // A single forced function is called once, as OpenAI does.
    let single = choice.mode == CallMode::Required
        && choice
            .allowed
            .as_ref()
            .is_some_and(|allowed| matches!(allowed.as_slice(), [AllowedTool::Name(_)]));
    Ok(Some(ToolConstraint {
        tools,
        choice: ToolChoice {
            parallel: parallel.unwrap_or(true) && !single,
            ..choice
        },
    }))
}

/// The answer as one JSON value of `schema`, through the same automaton as
/// tool arguments.
fn json_format(
    state: &Api,
    endpoint: Endpoint,
    schema: Option<&serde_json::Value>,
) -> Result<Option<ResponseSchema>, RequestError> {
    let Some(schema) = schema else {
        return Ok(None);
    };
    let field = endpoint.json_schema_field();
    state
        .tool_sets
        .get_or_compile_response(schema)
        .map(Some)
        .map_err(|error| {
            let param = match &error {
                ConstrainError::InvalidResponseSchema { path, .. } => format!("{field}{}", pointer_as_field_path(path)),
                _ => field.to_string(),
            };
            RequestError::invalid(param, error.to_string())
        })
}

/// A JSON pointer into a schema as the rest of a request field path:
/// `/properties/due/pattern` → `.properties.due.pattern`, `/anyOf/1` → `.anyOf[1]`.
pub(crate) fn pointer_as_field_path(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .filter(|segment| !segment.is_empty())
        .map(|segment| {
            let segment = segment.replace("~1", "/").replace("~0", "~");
            match segment.parse::<usize>() {
                Ok(index) => format!("[{index}]"),
                Err(_) => format!(".{segment}"),
            }
        })
        .collect()
}
