//! `POST /v1/chat/completions`: the OpenAI request, validated into the
//! engine's [`GenerateRequest`] plus what answering it needs.

use crate::answer::Endpoint;
use crate::api::{
    ChatRequest, ResponseFormat, ResponseFormatKind, StopSpec, StreamOptions, ToolChoiceMode, ToolChoiceSpec,
};
use crate::choice::{parse_choice, tool_choice, EXTENSION_FIELD};
use crate::prompt::{chat_messages, tool_defs};
use crate::OpenAi;
use crate::OpenAiError;
use serde_json::json;
use std::sync::Arc;
use tessera_constrain::{AllowedTool, CallMode, ConstrainError, ResponseSchema, ToolChoice, ToolDef};
use tessera_engine::{Constraint, Field, GenerateRequest, ToolConstraint};
use tessera_model::Protected;
use tessera_sample::SamplingParams;

/// A validated request and how to answer it.
#[derive(Debug)]
pub struct Job {
    /// The endpoint it came from (the response's shape).
    pub endpoint: Endpoint,
    /// What the engine runs.
    pub request: GenerateRequest,
    /// Answer with server-sent events.
    pub stream: bool,
    /// Send a usage chunk last (streaming).
    pub include_usage: bool,
    /// Stop strings (the engine stops on them; the answer is cut before them).
    pub stops: Vec<String>,
    /// The model id to echo.
    pub model: String,
    /// Schema keywords ignored under `--lenient-schemas`, each with its path
    /// (sent back in the `x-tessera-schema-warnings` header).
    pub schema_warnings: Vec<String>,
}

/// Validate `body` into a job; `session` is the `X-Session-Id` header, if sent.
pub fn chat_job(state: &OpenAi, body: ChatRequest, session: Option<String>) -> Result<Job, OpenAiError> {
    unsupported(&body)?;
    let defs = tool_defs(body.tools.as_deref().unwrap_or_default());
    let format = state.engine.call_format();
    let mut protected = Protected::new(state.engine.tokenizer());
    let messages = chat_messages(&body.messages, &defs, format, &mut protected)?;
    let text = state
        .engine
        .template()
        .render(&messages, true)
        .map_err(|error| OpenAiError::invalid("messages", format!("the chat template rejected them: {error}")))?;
    // Outside text that spells a control token is tokenized as the plain text it
    // is; without any, the prompt may replay the engine's own earlier tokens.
    let prompt = match protected.is_empty() {
        true => state.engine.encode_prompt(&text),
        false => state.engine.tokenizer().encode_protected(&text, &protected),
    }
    .map_err(|error| OpenAiError::internal("tokenizing a prompt", error))?;
    let choice = match &body.x_tessera_tool_choice {
        Some(spec) => Some((spec, EXTENSION_FIELD)),
        None => body.tool_choice.as_ref().map(|spec| (spec, "tool_choice")),
    };
    let tools = tool_constraint(state, &defs, choice, body.parallel_tool_calls)?;
    let response_schema = response_schema(state, body.response_format.as_ref())?;
    let schema_warnings: Vec<String> = tools
        .iter()
        .map(|t| t.tools.warnings())
        .chain(response_schema.iter().map(ResponseSchema::warnings))
        .flat_map(|warnings| warnings.iter().cloned())
        .collect();
    let requested = body.max_completion_tokens.or(body.max_tokens);
    let max_tokens = max_tokens(state, Endpoint::Chat, prompt.len(), requested)?;
    let constraint = match (tools, response_schema) {
        (Some(_), Some(_)) => {
            return Err(OpenAiError::invalid(
                "response_format",
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
        _ => stop_strings(body.stop)?,
    };
    let request = GenerateRequest {
        sampling: sampling(state, body.temperature, body.top_p, body.seed),
        stop_strings: stops.clone(),
        constraint,
        session: session.or(body.user).map(Arc::from),
        ..GenerateRequest::greedy(prompt, max_tokens)
    };
    let answering = Answering {
        stream: body.stream,
        stream_options: body.stream_options,
        model: body.model,
    };
    Ok(answering.job(state, Endpoint::Chat, request, stops, schema_warnings))
}

/// The fields both endpoints take that say how to answer, not what to run.
pub(crate) struct Answering {
    pub(crate) stream: Option<bool>,
    pub(crate) stream_options: Option<StreamOptions>,
    pub(crate) model: Option<String>,
}

impl Answering {
    pub(crate) fn job(
        self,
        state: &OpenAi,
        endpoint: Endpoint,
        request: GenerateRequest,
        stops: Vec<String>,
        schema_warnings: Vec<String>,
    ) -> Job {
        Job {
            endpoint,
            request,
            stream: self.stream.unwrap_or(false),
            include_usage: self.stream_options.and_then(|o| o.include_usage).unwrap_or(false),
            stops,
            model: self.model.unwrap_or_else(|| state.config.model_name.clone()),
            schema_warnings,
        }
    }
}

/// Parameters Tessera does not implement are refused, not silently ignored.
fn unsupported(body: &ChatRequest) -> Result<(), OpenAiError> {
    check_temperature(body.temperature)?;
    if body.n.is_some_and(|n| n != 1) {
        return Err(OpenAiError::invalid("n", "only n = 1 is supported"));
    }
    for (param, value) in [
        ("presence_penalty", body.presence_penalty),
        ("frequency_penalty", body.frequency_penalty),
    ] {
        if value.is_some_and(|v| v != 0.0) {
            return Err(OpenAiError::invalid(
                param,
                format!("{param} is not supported (only 0)"),
            ));
        }
    }
    if body.logprobs == Some(true) {
        return Err(OpenAiError::invalid("logprobs", "logprobs are not supported"));
    }
    Ok(())
}

/// OpenAI's defaults (temperature 1, top_p 1); a request without a seed gets
/// a fresh one.
pub(crate) fn sampling(
    state: &OpenAi,
    temperature: Option<f32>,
    top_p: Option<f32>,
    seed: Option<u64>,
) -> SamplingParams {
    SamplingParams {
        temperature: temperature.unwrap_or(1.0),
        top_p: top_p.unwrap_or(1.0),
        seed: seed.unwrap_or_else(|| state.started().rotate_left(17) ^ state.next_id()),
        ..SamplingParams::default()
    }
}

/// Temperature above OpenAI's 2 is refused here; the engine checks the rest.
pub(crate) fn check_temperature(temperature: Option<f32>) -> Result<(), OpenAiError> {
    match temperature {
        Some(t) if !(0.0..=2.0).contains(&t) => Err(OpenAiError::invalid(
            "temperature",
            format!("temperature is {t}, outside [0, 2]"),
        )),
        _ => Ok(()),
    }
}

/// The requested limit, or the server's default capped by what is left of the
/// context; the prompt and a requested limit together must fit the context.
pub(crate) fn max_tokens(
    state: &OpenAi,
    endpoint: Endpoint,
    prompt: usize,
    requested: Option<u64>,
) -> Result<usize, OpenAiError> {
    let context = state.engine.model_config().max_context;
    let room = context.saturating_sub(prompt);
    match requested {
        _ if room == 0 => Err(OpenAiError::invalid(
            endpoint.param(Field::PromptTokens),
            format!("the prompt is {prompt} tokens, which fills the model's context of {context} tokens"),
        )),
        None => Ok(room.min(state.config.default_max_tokens)),
        Some(0) => Err(OpenAiError::invalid("max_tokens", "max_tokens must be at least 1")),
        Some(n) if n as usize > room => Err(OpenAiError::invalid(
            "max_tokens",
            format!(
                "the prompt ({prompt} tokens) plus max_tokens ({n}) is over the model's context of {context} tokens"
            ),
        )),
        Some(n) => Ok(n as usize),
    }
}

pub(crate) fn stop_strings(stop: Option<StopSpec>) -> Result<Vec<String>, OpenAiError> {
    Ok(match stop {
        None => Vec::new(),
        Some(StopSpec::One(one)) => vec![one],
        Some(StopSpec::Many(many)) => many,
    })
}

/// The tool constraint: OpenAI's default choice is `auto` when tools are given.
fn tool_constraint(
    state: &OpenAi,
    defs: &[ToolDef],
    choice: Option<(&ToolChoiceSpec, &str)>,
    parallel: Option<bool>,
) -> Result<Option<ToolConstraint>, OpenAiError> {
    let choice = match (defs.is_empty(), choice) {
        (true, None) => return Ok(None),
        (true, Some((ToolChoiceSpec::Mode(ToolChoiceMode::None), _))) => return Ok(None),
        (true, Some((_, field))) => return Err(OpenAiError::invalid(field, format!("{field} needs `tools`"))),
        (false, None) => tool_choice(CallMode::Auto, None),
        (false, Some((spec, field))) => parse_choice(spec, field)?,
    };
    let tools = state.tool_sets.get_or_compile(defs).map_err(|error| {
        let param = match &error {
            ConstrainError::InvalidSchema { tool, path, .. } => defs
                .iter()
                .position(|def| &def.name == tool)
                .map(|i| format!("tools[{i}].function.parameters{}", pointer_as_field_path(path))),
            _ => None,
        };
        OpenAiError::invalid(param.unwrap_or_else(|| "tools".into()), error.to_string())
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

/// `json_object` = any object; `json_schema` = its schema, through the same automaton.
fn response_schema(state: &OpenAi, format: Option<&ResponseFormat>) -> Result<Option<ResponseSchema>, OpenAiError> {
    let Some(format) = format else {
        return Ok(None);
    };
    let (schema, param) = match format.kind {
        ResponseFormatKind::Text => return Ok(None),
        ResponseFormatKind::JsonObject => (json!({"type": "object"}), "response_format"),
        ResponseFormatKind::JsonSchema => {
            let schema = format
                .json_schema
                .as_ref()
                .and_then(|s| s.schema.clone())
                .ok_or_else(|| {
                    OpenAiError::invalid(
                        "response_format.json_schema.schema",
                        "a json_schema format needs `schema`",
                    )
                })?;
            (schema, "response_format.json_schema.schema")
        }
    };
    state
        .tool_sets
        .get_or_compile_response(&schema)
        .map(Some)
        .map_err(|error| {
            let param = match &error {
                ConstrainError::InvalidResponseSchema { path, .. } => format!("{param}{}", pointer_as_field_path(path)),
                _ => param.to_string(),
            };
            OpenAiError::invalid(param, error.to_string())
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
