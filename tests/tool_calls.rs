//! Tool calls on the real model: 40 prompts × every mode (none, auto, required,
//! one named tool, a `prefix*` family) × temperature 0 and 0.8 (fixed seeds),
//! with 21 tools in five families. Every response must parse, obey its mode,
//! and every call's arguments must validate against the tool's schema, checked
//! by the `jsonschema` crate, independently of our automaton.

use serde_json::{json, Value};
use std::sync::Arc;
use tessera_api::tools_prompt;
use tessera_constrain::{parse_response, AllowedTool, CallFormat, CallMode, CompiledTools, ToolChoice, ToolDef};
use tessera_engine::{
    Constraint, EngineConfig, EngineError, EngineHandle, Field, FinishReason, GenerateRequest, Output, ToolConstraint,
};
use tessera_model::{ChatMessage, ChatRole, LoadOptions};
use tessera_sample::SamplingParams;

/// SmolLM2's template has no tool form of its own: calls use the Hermes envelope.
const OPENER: &str = "<tool_call>";

fn def(name: &str, description: &str, parameters: Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: description.into(),
        parameters,
    }
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// 21 tools in the families browser_, file_, shell_, git_ and math_/misc, with
/// strings, integers, numbers, booleans, enums, arrays, nested objects and optional fields.
pub(crate) fn tools() -> Vec<ToolDef> {
    let s = json!({"type": "string"});
    vec![
        def(
            "browser_open",
            "Open a web page.",
            object(json!({"url": s, "new_tab": {"type": "boolean"}}), &["url"]),
        ),
        def(
            "browser_search",
            "Search the web.",
            object(json!({"query": s, "max_results": {"type": "integer"}}), &["query"]),
        ),
        def(
            "browser_click",
            "Click a link on the open page.",
            object(json!({"link_id": {"type": "integer"}}), &["link_id"]),
        ),
        def(
            "browser_scroll",
            "Scroll the page.",
            object(
                json!({"direction": {"enum": ["up", "down"]}, "pages": {"type": "number"}}),
                &["direction"],
            ),
        ),
        def(
            "file_read",
            "Read a file.",
            object(
                json!({"path": s, "offset": {"type": "integer"}, "limit": {"type": "integer"}}),
                &["path"],
            ),
        ),
        def(
            "file_write",
            "Write a file.",
            object(
                json!({"path": s, "content": s, "append": {"type": "boolean"}}),
                &["path", "content"],
            ),
        ),
        def(
            "file_list",
            "List a directory.",
            object(json!({"path": s, "recursive": {"type": "boolean"}}), &["path"]),
        ),
        def(
            "file_search",
            "Search files for a pattern.",
            object(
                json!({"pattern": s, "paths": {"type": "array", "items": s, "maxItems": 4}}),
                &["pattern"],
            ),
        ),
        def("file_delete", "Delete a file.", object(json!({"path": s}), &["path"])),
        def(
            "shell_run",
            "Run a shell command.",
            object(
                json!({"command": s, "timeout_s": {"type": "number"}, "env": {"type": "object", "additionalProperties": s}}),
                &["command"],
            ),
        ),
        def(
            "shell_kill",
            "Stop a running command.",
            object(
                json!({"pid": {"type": "integer"}, "signal": {"enum": ["TERM", "KILL"]}}),
                &["pid"],
            ),
        ),
        def("shell_status", "Status of running commands.", object(json!({}), &[])),
        def(
            "git_status",
            "Show the working tree status.",
            object(json!({"path": s}), &[]),
        ),
        def(
            "git_diff",
            "Show changes.",
            object(json!({"rev": s, "paths": {"type": "array", "items": s}}), &[]),
        ),
        def(
            "git_commit",
            "Commit staged changes.",
            object(json!({"message": s, "amend": {"type": "boolean"}}), &["message"]),
        ),
        def(
            "git_log",
            "Show recent commits.",
            object(json!({"count": {"type": "integer"}}), &[]),
        ),
        def(
            "math_eval",
            "Evaluate an arithmetic expression.",
            object(json!({"expression": s}), &["expression"]),
        ),
        def(
            "math_convert",
            "Convert units.",
            object(
                json!({"value": {"type": "number"}, "from": s, "to": s}),
                &["value", "from", "to"],
            ),
        ),
        def(
            "get_weather",
            "Current weather in a city.",
            object(
                json!({"city": s, "unit": {"enum": ["celsius", "fahrenheit"]}}),
                &["city"],
            ),
        ),
        def(
            "send_email",
            "Send an email.",
            object(
                json!({"to": {"type": "array", "items": s, "minItems": 1}, "subject": s, "body": s}),
                &["to", "subject", "body"],
            ),
        ),
        def(
            "create_event",
            "Create a calendar event.",
            object(
                json!({"title": s, "when": {"type": "object", "properties": {"date": s, "hour": {"type": "integer"}}, "required": ["date"]}, "attendees": {"type": "array", "items": s}}),
                &["title", "when"],
            ),
        ),
    ]
}

pub(crate) const PROMPTS: [&str; 40] = [
    "What is the weather in Paris?",
    "Open https://example.com for me.",
    "Search the web for the tallest building in the world.",
    "Read the file src/main.rs.",
    "Write 'hello' to notes.txt.",
    "List the files in the current directory.",
    "Find TODO comments in the src folder.",
    "Delete the file old.log.",
    "Run the tests with cargo test.",
    "Kill process 4242.",
    "What is running right now?",
    "Show me the git status.",
    "What changed since the last commit?",
    "Commit with the message 'fix typo'.",
    "Show the last 5 commits.",
    "What is 17 times 23?",
    "Convert 10 miles to kilometers.",
    "Email alice@example.com that the build is green.",
    "Schedule a meeting called Standup tomorrow at 9.",
    "Scroll down two pages.",
    "Click the third link.",
    "Is it going to rain in Tokyo?",
    "Look up the Rust borrow checker documentation.",
    "Show the first 20 lines of README.md.",
    "Append a line to the changelog.",
    "How many files are in the tests directory?",
    "Search for the word 'unsafe' in all Rust files.",
    "Compile the project in release mode.",
    "Stop the server that is hanging.",
    "Which branch am I on?",
    "Show the diff of Cargo.toml.",
    "Amend the last commit message to 'docs: update'.",
    "Compute the square root of 144.",
    "Convert 100 fahrenheit to celsius.",
    "Tell Bob the release is delayed.",
    "Create an event for lunch on Friday.",
    "Open the project homepage in a new tab.",
    "Give me a short poem about the sea.",
    "Summarize what this agent can do.",
    "Check the temperature in Berlin in fahrenheit.",
];

const FAMILIES: [&str; 5] = ["browser_*", "file_*", "shell_*", "git_*", "math_*"];

/// A request's mode: label, choice.
pub(crate) fn choices(i: usize, tools: &[ToolDef]) -> Vec<(&'static str, ToolChoice)> {
    let choice = |mode, allowed: Option<Vec<AllowedTool>>| ToolChoice {
        mode,
        allowed,
        parallel: false,
    };
    vec![
        ("none", choice(CallMode::None, None)),
        ("auto", choice(CallMode::Auto, None)),
        ("required", choice(CallMode::Required, None)),
        (
            "named",
            choice(
                CallMode::Required,
                Some(vec![AllowedTool::Name(tools[i % tools.len()].name.clone())]),
            ),
        ),
        (
            "family",
            choice(
                CallMode::Required,
                Some(vec![AllowedTool::parse(FAMILIES[i % FAMILIES.len()])]),
            ),
        ),
    ]
}

/// A request for `prompt` under `tools` and `choice`, sampled at
/// `temperature` with `seed` (0: greedy).
pub(crate) fn tool_request(
    prompt: &[u32],
    (temperature, seed): (f32, u64),
    (tools, choice): (&Arc<CompiledTools>, ToolChoice),
    max_tokens: usize,
) -> GenerateRequest {
    GenerateRequest {
        sampling: SamplingParams {
            temperature,
            seed,
            ..SamplingParams::default()
        },
        constraint: Some(Constraint::Tools(ToolConstraint {
            tools: tools.clone(),
            choice,
        })),
        ..GenerateRequest::greedy(prompt.to_vec(), max_tokens)
    }
}

struct Case {
    label: &'static str,
    choice: ToolChoice,
    prompt: usize,
    temperature: f32,
    output: Output,
}

/// Check one response; returns a description of what is wrong, if anything.
fn check(case: &Case, tools: &[ToolDef], validators: &[jsonschema::Validator]) -> Result<usize, String> {
    let tool_output = case.output.completion.tool_output.as_ref().ok_or("no tool output")?;
    let full = format!("{}{}", tool_output.prefill, case.output.text);
    // Budget-aware closing: even a response cut by max_tokens holds only complete calls.
    let parsed = parse_response(&full, CallFormat::Hermes).map_err(|error| format!("does not parse: {error}"))?;
    match case.choice.mode {
        CallMode::None if full.contains(OPENER) => return Err("none mode wrote the opener".into()),
        CallMode::Required if !full.starts_with(OPENER) => {
            return Err("a required call does not start the response".into())
        }
        CallMode::Required if parsed.calls.is_empty() => return Err("no call".into()),
        _ => {}
    }
    if parsed.calls.len() > 1 {
        return Err("several calls without parallel_tool_calls".into());
    }
    for call in &parsed.calls {
        let allowed = match &case.choice.allowed {
            None => true,
            Some(entries) => entries.iter().any(|entry| match entry {
                AllowedTool::Family(prefix) => call.name.starts_with(prefix.as_str()),
                AllowedTool::Name(name) => &call.name == name,
            }),
        };
        if !allowed {
            return Err(format!("called `{}`, outside {:?}", call.name, case.choice.allowed));
        }
        let index = tools.iter().position(|t| t.name == call.name).ok_or("unknown tool")?;
        let arguments: Value = serde_json::from_str(&call.arguments).map_err(|e| e.to_string())?;
        let first_error = validators[index].iter_errors(&arguments).next().map(|e| e.to_string());
        if let Some(error) = first_error {
            return Err(format!("`{}` arguments {arguments} invalid: {error}", call.name));
        }
    }
    Ok(parsed.calls.len())
}

#[test]
fn every_mode_and_temperature_gives_valid_calls() {
    let tools = tools();
    let validators: Vec<jsonschema::Validator> = tools
        .iter()
        .map(|t| jsonschema::validator_for(&t.parameters).expect("a valid JSON Schema"))
        .collect();
    let compiled = Arc::new(CompiledTools::compile(&tools).unwrap());
    let loaded = crate::common::load(&LoadOptions::default());
    let system = tools_prompt(&tools, CallFormat::Hermes);
    let prompt_of = |user: &str| {
        let messages = [
            ChatMessage::new(ChatRole::System, &system),
            ChatMessage::new(ChatRole::User, user),
        ];
        let text = loaded.template.render(&messages, true).unwrap();
        loaded.tokenizer.encode(&text).unwrap()
    };
    // TESSERA_TOOL_CALL_PROMPTS runs fewer prompts (profiling); the default is all 40.
    let count = std::env::var("TESSERA_TOOL_CALL_PROMPTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(PROMPTS.len());
    let prompts: Vec<Vec<u32>> = PROMPTS.iter().take(count).map(|p| prompt_of(p)).collect();
    let engine = EngineHandle::start(
        loaded,
        EngineConfig {
            max_running: 16,
            max_waiting: 1024,
            ..EngineConfig::for_tokens(24 * 1024)
        },
    )
    .unwrap();
    assert_eq!(
        engine.call_format(),
        CallFormat::Hermes,
        "SmolLM2's template has no tool form"
    );
    let mut pending = Vec::new();
    let mut refused = 0;
    for (i, prompt) in prompts.iter().enumerate() {
        for temperature in [0.0, 0.8] {
            for (label, choice) in choices(i, &tools) {
                // Forced calls under budgets from 16 to 256 tokens: every one complete and valid.
                let max_tokens = match choice.mode {
                    CallMode::None => 16,
                    CallMode::Auto => 40,
                    CallMode::Required => [16, 24, 40, 64, 128, 256][(i + pending.len()) % 6],
                };
                let request = tool_request(prompt, (temperature, i as u64), (&compiled, choice.clone()), max_tokens);
                match engine.submit(request) {
                    Ok(stream) => pending.push((label, choice, i, temperature, stream)),
                    // A budget below the shortest complete call is refused at the edge.
                    Err(EngineError::Invalid {
                        field: Field::MaxTokens,
                        ..
                    }) if max_tokens < 24 => refused += 1,
                    Err(error) => panic!("{label} / prompt {i}: {error}"),
                }
            }
        }
    }
    let (mut failures, mut calls, mut cut, mut required) = (Vec::new(), 0, 0, 0);
    let total = pending.len();
    for (label, choice, prompt, temperature, stream) in pending {
        let output = stream.wait().unwrap();
        required += usize::from(choice.mode == CallMode::Required);
        cut += usize::from(output.completion.reason == FinishReason::Length && choice.mode == CallMode::Required);
        let case = Case {
            label,
            choice,
            prompt,
            temperature,
            output,
        };
        match check(&case, &tools, &validators) {
            Ok(n) => calls += n,
            Err(why) => failures.push(format!(
                "{} / prompt {} / t={}: {why}\n  {:?}",
                case.label, case.prompt, case.temperature, case.output.text
            )),
        }
    }
    let metrics = engine.metrics().wait().unwrap();
    let mask = &metrics.mask_time;
    eprintln!(
        "{total} responses, {calls} complete calls; {cut} of {required} required calls cut by max_tokens (complete), \
         {refused} refused for a budget below the shortest call\
         ; prefix-cache hit rate {:.3}; {} masks, mean {:.1} µs, p50 <= {:?} s, p99 <= {:?} s",
        metrics.hit_rate(),
        mask.count,
        mask.mean_s() * 1e6,
        mask.quantile_bound_s(0.5),
        mask.quantile_bound_s(0.99),
    );
    assert!(mask.count as usize >= total, "every constrained step computes a mask");
    assert!(
        failures.is_empty(),
        "{} of {total} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(total + refused, prompts.len() * 10);
    // Every required response ends in exactly one complete, valid call, cut by max_tokens or not.
    assert!(calls >= required, "{calls} calls for {required} required responses");
    assert_eq!(metrics.kv_blocks_used, 0);
}
