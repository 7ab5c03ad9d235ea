//! The offline agent on the real model, in process: the example tasks end
//! with `finish` or a stated reason, every call in the transcript is valid
//! for its tool's schema, the policy's phases show in the transcript, the
//! prefix cache serves ≥ 90 % of prompt tokens from turn 2 on, and the KV
//! pool is back to its baseline afterwards.

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use tessera_agent::backend::InProcess;
use tessera_agent::jail::Jail;
use tessera_agent::tools::{definitions, Toolbox};
use tessera_agent::transcript::{hit_rate_from_turn_2, table};
use tessera_agent::{run, AgentConfig, RunReport, StopReason};
use tessera_engine::{EngineConfig, EngineHandle};
use tessera_model::LoadOptions;

fn engine() -> EngineHandle {
    EngineHandle::start(
        crate::common::load(&LoadOptions::default()),
        EngineConfig::for_tokens(16384),
    )
    .expect("starting the engine")
}

fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary workspace");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn run_task(backend: &mut InProcess, dir: &Path, task: &str) -> RunReport {
    let toolbox = Toolbox::new(Jail::new(dir).unwrap(), false);
    let config = AgentConfig {
        max_steps: 10,
        ..AgentConfig::new(task, backend.engine().model_config().max_context)
    };
    let report = run(backend, toolbox, config, &mut |_| {}).expect("the run ends without an error");
    eprintln!("{task}\n{}{}", table(&report.turns), report.stop);
    report
}

/// Every call of every agent turn is valid JSON for its tool's schema (a
/// call cut by max_tokens is the one allowed exception, and is counted).
fn assert_calls_valid(transcript: &Path) -> usize {
    let schemas: HashMap<String, Value> = definitions()
        .into_iter()
        .map(|d| (d.function.name, d.function.parameters.unwrap()))
        .collect();
    let mut checked = 0;
    for line in std::fs::read_to_string(transcript).unwrap().lines() {
        let record: Value = serde_json::from_str(line).expect("each transcript line is JSON");
        for key in ["turn", "prompt_tokens", "cached_tokens", "ttft_ms", "calls", "phase"] {
            assert!(record.get(key).is_some(), "transcript line lacks {key}: {line}");
        }
        if record["kind"] != "agent" || record["finish_reason"] == "length" {
            continue;
        }
        for call in record["calls"].as_array().unwrap() {
            let name = call["name"].as_str().unwrap();
            let schema = schemas
                .get(name)
                .unwrap_or_else(|| panic!("unknown tool {name} in {line}"));
            let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap())
                .unwrap_or_else(|e| panic!("arguments of {name} are not JSON ({e}): {line}"));
            let validator = jsonschema::validator_for(schema).unwrap();
            assert!(
                validator.is_valid(&arguments),
                "{name} arguments {arguments} break the schema"
            );
            checked += 1;
        }
    }
    checked
}

/// Tokens per K/V block of the engine these tests run (a finished sequence's
/// last, partial block is not kept in the prefix cache).
const BLOCK_TOKENS: usize = tessera_kv::DEFAULT_BLOCK_SIZE;

fn assert_phases(report: &RunReport) {
    // No reply turn: the run starts by planning. The plan is forced until a
    // create_plan call completes; one cut off by the token limit is answered
    // with a note and forced again. The planner's request follows the
    // completed call. No turn is an empty message, but for the last one of
    // a run the model ended without a call once it had written (that end of
    // turn is the run's end, not a step spent).
    assert_eq!(report.turns[0].phase, "plan");
    let agent: Vec<_> = report
        .turns
        .iter()
        .filter(|t| t.kind == tessera_agent::transcript::RequestKind::Agent)
        .collect();
    let ended_without_a_call = matches!(report.stop, StopReason::Answered { .. });
    for (i, turn) in agent.iter().enumerate() {
        let last_and_ending = ended_without_a_call && i + 1 == agent.len();
        assert!(
            last_and_ending || !turn.calls.is_empty() || !turn.content.trim().is_empty(),
            "an empty turn: {turn:?}"
        );
    }
    let mut index = 0;
    while report.turns[index].phase == "plan" {
        let call = &report.turns[index].calls[0];
        assert_eq!(call.name, "create_plan", "the plan is forced");
        index += 1;
        if call.ok {
            break;
        }
        assert!(call.result.contains("cut off"), "{}", call.result);
    }
    assert_eq!(
        report.turns[index].kind,
        tessera_agent::transcript::RequestKind::Planner
    );
    assert_eq!(report.turns[index].tool_choice["json_schema"]["name"], "plan");
}

#[test]
fn example_tasks_end_cleanly_with_valid_calls_and_a_warm_prefix() {
    let engine = engine();
    let mut backend = InProcess::new(engine.clone(), "smollm2".into()).unwrap();

    let notes = workspace(&[("notes.md", "Buy green apples\nCall the plumber\nWater the plants\n")]);
    let report = run_task(
        &mut backend,
        notes.path(),
        "Read notes.md and write its first line to out.txt.",
    );
    let docs = workspace(&[
        (
            "docs/index.html",
            "<html><head><title>Docs</title></head><body><p>See <a href=\"fruit.md\">fruit</a>.</p></body></html>",
        ),
        ("docs/fruit.md", "# Fruit\nThe kiwi is a small fruit with brown skin.\n"),
        ("docs/tools.md", "# Tools\nA hammer and a saw.\n"),
    ]);
    let second = run_task(&mut backend, docs.path(), "Find which file in docs/ mentions kiwi.");

    for (report, dir) in [(&report, notes.path()), (&second, docs.path())] {
        assert_phases(report);
        assert!(report.transcript.starts_with(dir) && report.transcript.ends_with(".tessera/transcript.jsonl"));
        let checked = assert_calls_valid(&report.transcript);
        assert!(checked >= 2, "at least the plan call and one more were checked");
        let rate = hit_rate_from_turn_2(&report.turns).unwrap();
        assert!(
            rate >= 0.90,
            "token-weighted hit rate from turn 2 is {:.1}% (< 90%)",
            rate * 100.0
        );
        // The history replays the model's own tokens: each turn misses only its
        // new tokens, plus at most the previous sequence's last partial block.
        for turn in report.turns.iter().filter(|t| t.new_tokens.is_some()) {
            let missed = turn.prompt_tokens - turn.cached_tokens;
            let new = turn.new_tokens.unwrap_or(0);
            assert!(
                missed <= new + BLOCK_TOKENS,
                "turn {} missed {missed} tokens, {new} of them new",
                turn.turn
            );
        }
        match &report.stop {
            StopReason::Finished { .. }
            | StopReason::Answered { .. }
            | StopReason::StepLimit { .. }
            | StopReason::NoCall { .. } => {}
        }
        assert!(!report.stop.to_string().is_empty());
    }
    if let StopReason::Finished { .. } = report.stop {
        let written = std::fs::read_to_string(notes.path().join("out.txt")).unwrap_or_default();
        eprintln!("out.txt after finish: {written:?}");
    }
    // The planner's prompt is stable: the second task's planner request
    // reuses the first's system prompt.
    let planner = |report: &RunReport| {
        report
            .turns
            .iter()
            .find(|t| t.kind == tessera_agent::transcript::RequestKind::Planner)
            .map(|t| t.cached_tokens)
            .unwrap_or(0)
    };
    assert!(
        planner(&second) >= 64,
        "the second planner request cached {} tokens",
        planner(&second)
    );
    // The second task shares the system prompt and tool list: its first
    // request is served mostly from the first task's cache.
    let first_of_second = &second.turns[0];
    assert!(
        first_of_second.cached_tokens * 10 >= first_of_second.prompt_tokens * 8,
        "the fixed prefix is shared across runs: {} of {} cached",
        first_of_second.cached_tokens,
        first_of_second.prompt_tokens
    );

    drop(backend);
    let metrics = engine.metrics().wait().unwrap();
    assert_eq!(metrics.requests_running, 0);
    assert_eq!(metrics.requests_failed, 0);
    assert_eq!(
        metrics.kv_blocks_used, 0,
        "no block is held once the runs are over (pins are counted apart)"
    );
    engine.shutdown().wait().unwrap();
}
