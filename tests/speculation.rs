//! Speculative decoding on the real model changes no token: drafts from the
//! context (prompt lookup) and from the tool-call constraint (grammar
//! fast-forward) are verified in batched forwards, and every output, greedy
//! or sampled with a seed, alone or beside others, with or without a
//! constraint, is token for token what plain decoding gives. Each test also
//! checks that drafts were made and kept (so it can fail), and that the pool
//! is back to baseline.

use crate::common::{assert_baseline, chat_prompt, long_prompt, model};
use crate::tool_calls::{choices, tool_request, tools, PROMPTS};
use serde_json::json;
use std::sync::Arc;
use tessera_api::tools_prompt;
use tessera_constrain::{CallFormat, CompiledTools, ResponseSchema, SchemaOptions};
use tessera_engine::{
    Constraint, EngineConfig, EngineHandle, EngineMetrics, GenerateRequest, Output, SpeculationConfig,
};
use tessera_model::{ChatMessage, ChatRole, LoadOptions};
use tessera_sample::SamplingParams;

fn start(speculation: SpeculationConfig) -> EngineHandle {
    let config = EngineConfig {
        speculation,
        max_running: 16,
        ..EngineConfig::for_tokens(16 * 1024)
    };
    EngineHandle::start(crate::common::load(&LoadOptions::default()), config).expect("starting the engine")
}

fn encode(text: &str) -> Vec<u32> {
    model().tokenizer.encode(text).unwrap()
}

/// Run every request at once on an engine with `speculation`; the outputs in
/// order and the engine's metrics once it is idle (no block referenced).
fn run_all(speculation: SpeculationConfig, requests: &[GenerateRequest]) -> (Vec<Output>, EngineMetrics) {
    let engine = start(speculation);
    let streams: Vec<_> = requests
        .iter()
        .map(|request| engine.submit(request.clone()).expect("submitting"))
        .collect();
    let outputs = streams.into_iter().map(|s| s.wait().expect("an answer")).collect();
    (outputs, assert_baseline(&engine))
}

fn assert_same(plain: &[Output], drafted: &[Output]) {
    for (i, (a, b)) in plain.iter().zip(drafted).enumerate() {
        assert_eq!(a.tokens, b.tokens, "request {i}: tokens differ with drafts");
        assert_eq!(a.text, b.text, "request {i}");
        assert_eq!(a.completion.reason, b.completion.reason, "request {i}");
    }
}

/// [`assert_same`], and the same tool calls parsed from them.
fn assert_same_calls(plain: &[Output], drafted: &[Output]) {
    assert_same(plain, drafted);
    for (i, (a, b)) in plain.iter().zip(drafted).enumerate() {
        assert_eq!(a.completion.tool_output, b.completion.tool_output, "request {i}");
    }
}

/// Prompts that invite copying from the context, and one that does not.
fn copying_prompts() -> Vec<Vec<u32>> {
    let list = "alpha beta gamma delta\nepsilon zeta eta theta\niota kappa lambda mu\nnu xi omicron pi\n";
    let code = "fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\nfn main() {\n    println!(\"{}\", add(2, 3));\n}\n";
    vec![
        encode(&chat_prompt(&format!("Copy these lines exactly:\n{list}"))),
        encode(&chat_prompt(&format!(
            "Here is a file:\n```rust\n{code}```\nWrite it out again unchanged."
        ))),
        encode(&long_prompt()),
        encode(&chat_prompt("Write a haiku about the sea.")),
    ]
}

#[test]
fn drafts_from_the_context_change_no_token() {
    let prompts = copying_prompts();
    let mut requests = Vec::new();
    for (i, prompt) in prompts.iter().enumerate() {
        requests.push(GenerateRequest::greedy(prompt.clone(), 48));
        requests.push(GenerateRequest {
            sampling: SamplingParams {
                temperature: 0.8,
                top_p: 0.95,
                seed: 11 + i as u64,
                ..SamplingParams::default()
            },
            ..GenerateRequest::greedy(prompt.clone(), 48)
        });
    }
    // A limit that cuts a draft short: the answer still stops at exactly 5 tokens.
    requests.push(GenerateRequest::greedy(prompts[0].clone(), 5));
    let (plain, plain_metrics) = run_all(SpeculationConfig::off(), &requests);
    assert_eq!(plain_metrics.draft_tokens, 0, "off means no drafts");
    // Drafts beside other sequences in the same step: the default leaves them
    // only 4 rows there, which these requests fill, so the test gives them 16.
    let lookup = SpeculationConfig {
        fast_forward: false,
        max_draft: 8,
        shared_step_rows: 16,
        ..SpeculationConfig::default()
    };
    let (drafted, metrics) = run_all(lookup, &requests);
    assert_same(&plain, &drafted);
    assert!(metrics.draft_tokens > 0 && metrics.draft_accepted > 0, "{metrics:?}");
    let per_request: usize = drafted.iter().map(|o| o.completion.usage.speculation.accepted).sum();
    assert_eq!(
        per_request as u64, metrics.draft_accepted,
        "usage adds up to the metrics"
    );
    assert_eq!(drafted.last().map(|o| o.tokens.len()), Some(5));
}

#[test]
fn drafts_alone_and_one_sequence_at_a_time_change_no_token() {
    // One sequence at a time: every step has room for a full draft.
    let prompt = copying_prompts().remove(1);
    let request = GenerateRequest::greedy(prompt, 64);
    let (plain, plain_metrics) = run_all(SpeculationConfig::off(), std::slice::from_ref(&request));
    let (drafted, metrics) = run_all(SpeculationConfig::default(), std::slice::from_ref(&request));
    assert_same(&plain, &drafted);
    assert!(metrics.draft_accepted > 0, "{metrics:?}");
    assert_eq!(
        metrics.steps + metrics.draft_accepted,
        plain_metrics.steps,
        "each kept draft token saves one forward pass"
    );
    // A request that opts out decodes plainly on a drafting engine.
    let opted_out = GenerateRequest {
        speculate: false,
        ..request
    };
    let (undrafted, metrics) = run_all(SpeculationConfig::default(), std::slice::from_ref(&opted_out));
    assert_same(&plain, &undrafted);
    assert_eq!(
        (metrics.draft_tokens, metrics.steps),
        (0, plain_metrics.steps),
        "no draft, one token per step"
    );
}

#[test]
fn grammar_fast_forward_changes_no_tool_call() {
    let tools = tools();
    let compiled = Arc::new(CompiledTools::compile(&tools).unwrap());
    let system = tools_prompt(&tools, CallFormat::Hermes);
    let loaded = model();
    let mut requests = Vec::new();
    for (i, user) in PROMPTS.iter().enumerate().take(8) {
        let messages = [
            ChatMessage::new(ChatRole::System, &system),
            ChatMessage::new(ChatRole::User, *user),
        ];
        let prompt = loaded
            .tokenizer
            .encode(&loaded.template.render(&messages, true).unwrap())
            .unwrap();
        for temperature in [0.0, 0.8] {
            for (_, choice) in choices(i, &tools) {
                let sampling = (temperature, i as u64);
                requests.push(tool_request(&prompt, sampling, (&compiled, choice), 64));
            }
        }
    }
    let (plain, _) = run_all(SpeculationConfig::off(), &requests);
    // Forced drafts beside other sequences in the same step (see above).
    let fast_forward = SpeculationConfig {
        lookup: false,
        shared_step_rows: 16,
        ..SpeculationConfig::default()
    };
    let (forwarded, metrics) = run_all(fast_forward, &requests);
    assert_same_calls(&plain, &forwarded);
    assert!(metrics.forced_tokens > 0, "the constraint forced nothing: {metrics:?}");
    assert_eq!(
        metrics.forced_tokens, metrics.draft_accepted,
        "only forced drafts with lookup off"
    );
    // With lookup on, a call's likely punctuation is drafted past the forced
    // bytes too (and lookup after it): still the same tokens and calls.
    let all = SpeculationConfig {
        shared_step_rows: 16,
        ..SpeculationConfig::default()
    };
    let (speculated, metrics) = run_all(all, &requests);
    assert_same_calls(&plain, &speculated);
    assert!(
        metrics.draft_accepted > metrics.forced_tokens,
        "nothing past the forced tokens was kept: {metrics:?}"
    );
}

/// One JSON value per schema of the official JSON Schema Test Suite that
/// compiles for generation (every group of every draft 2020-12 file, a
/// schema that is not an object's asked for as an object's one property; the
/// refused ones are refused by name elsewhere), greedy: with every draft
/// source on (fast-forward, likely punctuation, lookup) each value is token
/// for token what plain decoding gives.
#[test]
fn drafts_change_no_json_value_of_the_schema_suite() {
    let prompt = encode(&chat_prompt("Answer with one JSON value."));
    let mut requests = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(tessera_fixtures::json_schema_suite())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for file in files {
        let groups: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for group in groups.as_array().unwrap() {
            // A schema that is not an object's is asked for as an object's one property.
            let wrapped = json!({"type": "object", "properties": {"value": group["schema"]}, "required": ["value"]});
            let compile = |schema: &serde_json::Value| ResponseSchema::compile(schema, SchemaOptions::GENERATION);
            let Ok(schema) = compile(&group["schema"]).or_else(|_| compile(&wrapped)) else {
                continue;
            };
            requests.push(GenerateRequest {
                constraint: Some(Constraint::Json(schema)),
                ..GenerateRequest::greedy(prompt.clone(), 64)
            });
        }
    }
    // 171 of the 368 groups (the rest use keywords refused by name, or refer
    // to the root that wrapping moves).
    assert!(requests.len() > 150, "only {} suite schemas compiled", requests.len());
    let (plain, _) = run_all(SpeculationConfig::off(), &requests);
    let all = SpeculationConfig {
        shared_step_rows: 16,
        ..SpeculationConfig::default()
    };
    let (drafted, metrics) = run_all(all, &requests);
    assert_same(&plain, &drafted);
    assert!(
        metrics.forced_tokens > 0 && metrics.draft_accepted > metrics.forced_tokens,
        "no forced or no other draft kept: {metrics:?}"
    );
}

/// A request that makes the model write text it was shown into a JSON
/// string (escaped newlines and quotes): `file_write` named, with `sampling`
/// (temperature, seed).
fn copy_notes_request(sampling: (f32, u64), max_tokens: usize) -> GenerateRequest {
    let tools = tools();
    let compiled = Arc::new(CompiledTools::compile(&tools).unwrap());
    let system = tools_prompt(&tools, CallFormat::Hermes);
    let notes = "# Notes\n- The parser accepts \"trailing\" commas.\n- Calls stream their arguments.\n";
    let user = format!("Here is notes.md:\n{notes}\nWrite exactly that text to backup.md with file_write.");
    let messages = [
        ChatMessage::new(ChatRole::System, &system),
        ChatMessage::new(ChatRole::User, &user),
    ];
    let prompt = encode(&model().template.render(&messages, true).unwrap());
    let write = tools
        .iter()
        .position(|t| t.name == "file_write")
        .expect("a file_write tool");
    tool_request(
        &prompt,
        sampling,
        (&compiled, choices(write, &tools).remove(3).1),
        max_tokens,
    )
}

#[test]
fn drafts_inside_a_calls_string_change_no_token() {
    // The model writes text it was shown into a JSON string: escaped newlines
    // and quotes, where the escaped prompt supplies the drafts.
    let requests = [copy_notes_request((0.0, 0), 96), copy_notes_request((0.8, 5), 96)];
    let (plain, _) = run_all(SpeculationConfig::off(), &requests);
    let (drafted, metrics) = run_all(SpeculationConfig::default(), &requests);
    assert_same(&plain, &drafted);
    for (a, b) in plain.iter().zip(&drafted) {
        assert_eq!(a.completion.tool_output, b.completion.tool_output);
    }
    assert!(
        metrics.draft_accepted > metrics.forced_tokens,
        "no drafted text was kept: {metrics:?}"
    );
}

/// Each token's stream event says where it came from and which step made it:
/// the forced and copied ones add up to the request's usage (a final stop
/// token is counted but not streamed), and a step emits
/// its kept drafts and then one sampled token (none when the request ended
/// on a kept draft).
#[test]
fn token_events_name_their_origin_and_step() {
    use std::collections::BTreeMap;
    use tessera_engine::{Event, TokenOrigin};
    let requests = [
        copy_notes_request((0.0, 0), 96),
        GenerateRequest::greedy(copying_prompts().remove(1), 48),
    ];
    let engine = start(SpeculationConfig::default());
    let mut seen = BTreeMap::new();
    for request in requests {
        let mut stream = engine.submit(request).unwrap();
        let mut tokens: Vec<(TokenOrigin, u64)> = Vec::new();
        let usage = loop {
            match stream.blocking_next() {
                Some(Event::Token { origin, step, .. }) => tokens.push((origin, step)),
                Some(Event::Finished(completion)) => break completion.usage,
                other => panic!("unexpected event {other:?}"),
            }
        };
        let count = |kind| tokens.iter().filter(|(origin, _)| *origin == kind).count();
        // A final stop token is counted in usage but not streamed; it may have been a kept draft.
        let unstreamed = usage.completion_tokens - tokens.len();
        assert!(unstreamed <= 1, "{unstreamed} tokens were not streamed");
        let (forced, accepted) = (usage.speculation.forced, usage.speculation.accepted);
        let streamed_drafts = count(TokenOrigin::Forced) + count(TokenOrigin::Copied);
        assert!(
            forced - count(TokenOrigin::Forced) <= unstreamed,
            "{tokens:?} {usage:?}"
        );
        assert!(accepted - streamed_drafts <= unstreamed, "{tokens:?} {usage:?}");
        let mut steps: Vec<&[(TokenOrigin, u64)]> = tokens.chunk_by(|a, b| a.1 == b.1).collect();
        let last = steps.pop().unwrap();
        for step in &steps {
            let sampled = step.iter().filter(|(o, _)| *o == TokenOrigin::Sampled).count();
            assert_eq!(sampled, 1, "one sampled token per step: {step:?}");
            assert_eq!(
                step.last().unwrap().0,
                TokenOrigin::Sampled,
                "after the kept drafts: {step:?}"
            );
        }
        assert!(last.iter().filter(|(o, _)| *o == TokenOrigin::Sampled).count() <= 1);
        assert!(steps.windows(2).all(|w| w[0][0].1 < w[1][0].1), "steps increase");
        for (origin, _) in tokens {
            *seen.entry(origin.name()).or_insert(0) += 1;
        }
    }
    assert_baseline(&engine);
    assert!(seen.len() == 3, "every origin was seen: {seen:?}");
}
