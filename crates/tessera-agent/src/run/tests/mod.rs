//! The loop's mechanics against a scripted backend: the model's answers are
//! fixed, so each test checks one lesson of the harness exactly (what was
//! sent, what was written), which the real model cannot be steered to show.

use super::*;
use crate::jail::Jail;
use std::collections::VecDeque;
use std::path::Path;
use tessera_api::openai::ChatCompletionRequest;

/// Answers from a list and keeps every request body.
struct Script {
    answers: VecDeque<ChatOutcome>,
    bodies: Vec<Value>,
}

impl Backend for Script {
    fn chat(&mut self, request: &ChatCompletionRequest, _session: &str) -> Result<ChatOutcome, AgentError> {
        let body = serde_json::to_value(request).unwrap();
        self.bodies.push(body.clone());
        let mut answer = self
            .answers
            .pop_front()
            .ok_or_else(|| AgentError::Backend("the script has no more answers".into()))?;
        answer.prompt_tokens = body.to_string().len() / 4;
        Ok(answer)
    }

    fn model(&self) -> &str {
        "script"
    }
}

fn text(content: &str) -> ChatOutcome {
    ChatOutcome {
        content: content.into(),
        finish_reason: Some(FinishReason::Stop),
        ..ChatOutcome::default()
    }
}

fn call(name: &str, arguments: Value) -> ChatOutcome {
    ChatOutcome {
        calls: vec![ChatCall {
            id: format!("call_{name}_{}", arguments.to_string().len()),
            name: name.into(),
            arguments: arguments.to_string(),
        }],
        finish_reason: Some(FinishReason::ToolCalls),
        ..ChatOutcome::default()
    }
}

/// The forced plan and the planner's answer.
fn opening(plan: &str) -> Vec<ChatOutcome> {
    vec![call("create_plan", json!({"goal": "do it"})), text(plan)]
}

/// One successful action (`finish` is masked until the run has acted), then `finish`.
fn act_then_finish(summary: &str) -> [ChatOutcome; 2] {
    [
        call("file_list", json!({})),
        call("finish", json!({"summary": summary})),
    ]
}

fn run_script(
    dir: &Path,
    answers: Vec<ChatOutcome>,
    config: AgentConfig,
) -> (Result<RunReport, AgentError>, Vec<Value>) {
    let mut script = Script {
        answers: answers.into(),
        bodies: Vec::new(),
    };
    let toolbox = Toolbox::new(Jail::new(dir).unwrap(), config.allow_shell);
    let report = run(&mut script, toolbox, config, &mut |_| {});
    (report, script.bodies)
}

fn config(task: &str) -> AgentConfig {
    AgentConfig::new(task, 8192)
}

fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        std::fs::write(dir.path().join(path), text).unwrap();
    }
    dir
}

/// The last message before the task reminder that ends every answered turn.
fn last_message(body: &Value) -> &str {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .find(|text| !text.starts_with("Now do the task: "))
        .unwrap_or("")
}

fn allowed(body: &Value) -> Vec<&str> {
    body["tool_choice"]["allowed_tools"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect()
}

#[test]
fn a_run_follows_the_policy_keeps_its_prefix_and_finishes() {
    let dir = workspace(&[("notes.md", "first line\nsecond line\n")]);
    let mut answers = opening(r#"{"mode":"complex","plan":["Read notes.md","Write its first line to out.txt"]}"#);
    let tick = |todo: &str| call("todo_write", json!({"content": todo}));
    answers.extend([
        call("file_read", json!({"path": "notes.md"})),
        tick("# Plan\n- [x] Read notes.md\n- [ ] Write its first line to out.txt\n"),
        call("file_write", json!({"path": "out.txt", "content": "first line"})),
        tick("# Plan\n- [x] Read notes.md\n- [x] Write its first line to out.txt\n"),
        call("finish", json!({"summary": "copied"})),
    ]);
    let (report, bodies) = run_script(
        dir.path(),
        answers,
        config("Copy the first line of notes.md to out.txt."),
    );
    let report = report.unwrap();
    assert_eq!(
        report.stop,
        StopReason::Finished {
            summary: "copied".into()
        }
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "first line"
    );

    // Request order: plan (no reply turn), planner, step 1 twice (a success
    // does not end it; the model's tick does), step 2 twice, act.
    assert_eq!(bodies[0]["tool_choice"]["function"]["name"], "create_plan");
    assert_eq!(bodies[1]["temperature"], 0.0, "the planner is deterministic");
    assert!(bodies[1].get("tools").is_none(), "the planner has its own prompt");
    for step in [2, 3, 4, 5] {
        let tools = allowed(&bodies[step]);
        assert!(tools.contains(&"file_read") && tools.contains(&"file_write") && tools.contains(&"todo_write"));
        assert!(!tools.contains(&"browser_open"), "nothing in this task browses");
        assert_eq!(tools.contains(&"finish"), step > 2, "finish once the run has acted");
        assert_eq!(
            bodies[step]["tool_choice"]["allowed_tools"]["mode"], "required",
            "a plan step is open"
        );
    }
    assert!(allowed(&bodies[6]).contains(&"finish"));
    assert_eq!(bodies[6]["tool_choice"]["allowed_tools"]["mode"], "auto");

    // Stable prefix: every agent request has the same tools and extends the previous messages.
    let agent: Vec<&Value> = bodies.iter().filter(|b| b.get("tools").is_some()).collect();
    for pair in agent.windows(2) {
        assert_eq!(pair[0]["tools"], pair[1]["tools"], "tools are never added or removed");
        let before = pair[0]["messages"].as_array().unwrap();
        assert_eq!(&pair[1]["messages"].as_array().unwrap()[..before.len()], &before[..]);
    }
    // Recitation: the task ends each answered turn, after the results.
    for body in &bodies[3..] {
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(
            messages.last().unwrap()["content"],
            "Now do the task: Copy the first line of notes.md to out.txt."
        );
    }
    // Recitation: the plan's checklist ends each result, ticked by the model.
    assert!(last_message(&bodies[2])
        .ends_with("[todo.md]\n# Plan\n- [ ] Read notes.md\n- [ ] Write its first line to out.txt"));
    assert!(
        last_message(&bodies[3]).contains("- [ ] Read notes.md"),
        "read, not ticked yet"
    );
    assert!(last_message(&bodies[4]).contains("- [x] Read notes.md\n- [ ] Write"));
    assert!(last_message(&bodies[6]).contains("- [x] Write its first line to out.txt"));
    // The transcript holds every request, planner included.
    let lines = std::fs::read_to_string(&report.transcript).unwrap();
    assert_eq!(lines.lines().count(), 7);
    assert_eq!(
        report.turns.iter().map(|t| t.turn).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5, 6, 7]
    );
}

#[test]
fn the_planner_is_retried_with_the_error_then_given_up() {
    let dir = workspace(&[]);
    let mut answers = opening("not json");
    answers.extend([
        text(r#"{"mode":"complex","plan":["one"]}"#),
        text(r#"{"mode":"simple"}"#),
    ]);
    answers.extend(act_then_finish("done"));
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    let report = report.unwrap();
    let retry = bodies[2]["messages"][1]["content"].as_str().unwrap();
    assert!(
        retry.contains("Your last answer was not json") && retry.contains("not valid JSON"),
        "{retry}"
    );
    assert!(bodies[3]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("has 1 steps"));
    let verdicts: Vec<bool> = report
        .turns
        .iter()
        .filter(|t| t.phase == "planner")
        .map(|t| t.calls[0].ok)
        .collect();
    assert_eq!(verdicts, vec![false, false, true]);

    let mut answers = opening("{}");
    answers.extend([text("{}"), text("{}")]);
    answers.extend(act_then_finish("x"));
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    assert!(matches!(report.unwrap().stop, StopReason::Finished { .. }));
    assert!(
        last_message(&bodies[4]).starts_with("The planner failed 3 times (last error: missing string field `mode`)")
    );
    assert!(
        allowed(&bodies[5]).contains(&"finish"),
        "without a plan the agent acts freely (finish once it has acted)"
    );
}

#[test]
fn errors_stay_in_and_disallowed_calls_are_refused() {
    let dir = workspace(&[("a.md", "x\n")]);
    let mut answers = opening(r#"{"mode":"simple"}"#);
    answers.extend([
        call("file_read", json!({"path": "missing.md"})),
        call("shell_exec", json!({"command": "ls"})),
        call("file_read", json!({"path": "../etc/passwd"})),
        call("file_list", json!({})),
        call("finish", json!({"summary": "gave up"})),
    ]);
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    report.unwrap();
    let history = bodies.last().unwrap()["messages"].to_string();
    assert!(history.contains("error: path \\\"missing.md\\\" does not exist; the workspace root holds: a.md"));
    assert!(
        history.contains("error: `shell_exec` is not allowed in this step (act)"),
        "masked tools are refused by the harness too"
    );
    assert!(history.contains("leaves the workspace"));
}

#[test]
fn a_call_cut_off_by_the_token_limit_stays_out_of_the_history() {
    let dir = workspace(&[("a.md", "x\n")]);
    let mut answers = opening(r#"{"mode":"simple"}"#);
    // A complete call, then one cut off: the first's result follows its call.
    let mut cut = call("file_list", json!({"path": "."}));
    cut.calls.push(ChatCall {
        id: "call_cut".into(),
        name: "file_read".into(),
        arguments: r#"{"path": "a.m"#.into(),
    });
    cut.finish_reason = Some(FinishReason::Length);
    answers.extend([cut, call("finish", json!({"summary": "done"}))]);
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    let report = report.unwrap();
    let last = bodies.last().unwrap();
    for message in last["messages"].as_array().unwrap() {
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let arguments = call["function"]["arguments"].as_str().unwrap();
            assert!(serde_json::from_str::<Value>(arguments).is_ok(), "{arguments}");
        }
    }
    assert!(
        last_message(last).contains("the call to `file_read` was cut off by the token limit"),
        "{}",
        last_message(last)
    );
    let messages = last["messages"].as_array().unwrap();
    let call_at = messages
        .iter()
        .position(|m| m["tool_calls"][0]["function"]["name"] == "file_list")
        .unwrap();
    assert_eq!(messages[call_at]["tool_calls"].as_array().unwrap().len(), 1);
    assert_eq!(messages[call_at + 1]["role"], "tool", "the result follows its call");
    assert!(report
        .turns
        .iter()
        .any(|t| t.calls.iter().any(|c| !c.ok && c.name == "file_read")));
}

#[test]
fn a_result_over_budget_keeps_head_and_tail_and_is_saved() {
    let big: String = (0..3000).map(|i| format!("line {i:05} {}\n", "x".repeat(30))).collect();
    let dir = workspace(&[("big.txt", &big)]);
    let mut answers = opening(r#"{"mode":"simple"}"#);
    answers.extend([
        call("file_read", json!({"path": "big.txt"})),
        call("finish", json!({"summary": "x"})),
    ]);
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    let report = report.unwrap();
    let observation = &report.turns[2].calls[0].result;
    let budget = crate::budget::result_budget(8192);
    assert!(
        observation.chars().count() < budget + 400,
        "{} chars",
        observation.chars().count()
    );
    assert!(observation.starts_with("big.txt: lines 1-"));
    assert!(observation.contains("saved as .tessera/results/turn-3-file_read.txt"));
    let saved = std::fs::read_to_string(dir.path().join(".tessera/results/turn-3-file_read.txt")).unwrap();
    assert!(saved.starts_with("big.txt: lines 1-") && saved.contains("line 01000") && saved.len() > 50_000);
    assert!(last_message(&bodies[3]).contains("characters omitted"));
}

#[test]
fn compaction_before_the_window_fills_keeps_calls_with_results() {
    let page: String = (0..40).map(|i| format!("row {i} of a medium file\n")).collect();
    let dir = workspace(&[("m.txt", &page), ("n.txt", "short\n")]);
    let mut answers = opening(r#"{"mode":"simple"}"#);
    for i in 0..8 {
        let path = if i % 2 == 0 { "m.txt" } else { "n.txt" };
        answers.push(call("file_read", json!({"path": path, "start_line": 1 + i / 2})));
    }
    answers.push(call("finish", json!({"summary": "x"})));
    let config = AgentConfig {
        reserve_tokens: 512,
        keep_turns: 1,
        ..AgentConfig::new("Read the files.", 2048)
    };
    let (report, bodies) = run_script(dir.path(), answers, config);
    let report = report.unwrap();
    assert!(report.compactions >= 1, "a 2,048-token window must compact");
    let compacted: Vec<usize> = report.turns.iter().filter(|t| t.compacted).map(|t| t.turn).collect();
    let body = &bodies[compacted[compacted.len() - 1] - 1];
    let messages = body["messages"].as_array().unwrap();
    let checkpoint = messages[2]["content"].as_str().unwrap();
    for field in [
        "Goal: Read the files.",
        "Constraints:",
        "Decisions:",
        "Open items:",
        "Files touched:",
        "Next step:",
    ] {
        assert!(checkpoint.contains(field), "{field} missing from\n{checkpoint}");
    }
    assert!(
        checkpoint.contains("re-attach with file_read {\"path\":\"m.txt\"}"),
        "{checkpoint}"
    );
    for compacted_body in compacted.iter().map(|t| &bodies[t - 1]) {
        let messages = compacted_body["messages"].as_array().unwrap();
        let ids: Vec<&Value> = messages
            .iter()
            .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
            .map(|c| &c["id"])
            .collect();
        for result in messages.iter().filter(|m| m["role"] == "tool") {
            assert!(
                ids.contains(&&result["tool_call_id"]),
                "a result lost its call: {result}"
            );
        }
        assert!(
            compacted_body.to_string().len() / 4 < 2048,
            "the compacted request fits the window"
        );
    }
}

#[cfg(unix)]
#[test]
fn harness_files_stay_in_the_workspace() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "top secret\n").unwrap();
    let dir = workspace(&[]);
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("todo.md")).unwrap();
    let mut answers = opening(r#"{"mode":"simple"}"#);
    answers.extend([
        call("file_list", json!({})),
        call(
            "file_write",
            json!({"path": ".tessera/transcript.jsonl", "content": "x"}),
        ),
        call("finish", json!({"summary": "x"})),
    ]);
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    report.unwrap();
    let history = bodies.last().unwrap().to_string();
    assert!(
        !history.contains("top secret"),
        "a todo.md linking out of the workspace is never recited"
    );
    assert!(
        history.contains("is inside .tessera/, where the harness keeps"),
        "the model cannot overwrite the transcript"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "top secret\n"
    );

    let linked = workspace(&[]);
    std::os::unix::fs::symlink(outside.path(), linked.path().join(".tessera")).unwrap();
    let (report, _) = run_script(linked.path(), opening(r#"{"mode":"simple"}"#), config("t"));
    let error = report.unwrap_err().to_string();
    assert!(
        error.contains("leaves the workspace") || error.contains("outside"),
        "{error}"
    );
    assert!(!outside.path().join("transcript.jsonl").exists());
}

#[test]
fn a_long_unknown_tool_name_is_never_a_path() {
    let dir = workspace(&[]);
    let name = format!("/../../x{}", "/.".repeat(4000));
    let mut answers = opening(r#"{"mode":"simple"}"#);
    answers.push(call(&name, json!({})));
    answers.extend(act_then_finish("x"));
    let (report, _) = run_script(dir.path(), answers, config("t"));
    let report = report.unwrap();
    let result = &report.turns[2].calls[0].result;
    assert!(result.contains("is not allowed in this step"));
    assert!(
        result.contains("turn-3-unknown.txt"),
        "the saved result is named after no model text"
    );
    assert!(dir.path().join(".tessera/results/turn-3-unknown.txt").is_file());
}

#[test]
fn a_users_todo_is_kept_and_the_harness_never_ticks_for_the_model() {
    let dir = workspace(&[("todo.md", "- [ ] my own item\n")]);
    let mut answers = opening(r#"{"mode":"simple"}"#);
    answers.extend(act_then_finish("x"));
    let (_, bodies) = run_script(dir.path(), answers, config("t"));
    assert!(last_message(&bodies[2]).is_empty() || !last_message(&bodies[2]).contains("# Plan"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("todo.md")).unwrap(),
        "- [ ] my own item\n"
    );
    assert!(
        last_message(&bodies[2]).ends_with("[todo.md]\n- [ ] my own item"),
        "{}",
        last_message(&bodies[2])
    );

    let dir = workspace(&[]);
    let mut answers = opening(r#"{"mode":"complex","plan":["Read a.md","Open site/index.html in the browser"]}"#);
    answers.extend((0..=STEP_CALLS).map(|_| call("file_read", json!({"path": "a.md"}))));
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    report.unwrap_err(); // the script runs out of answers
    let todo = std::fs::read_to_string(dir.path().join("todo.md")).unwrap();
    assert!(
        todo.contains("- [ ] Read a.md"),
        "a step the model did not tick stays open: {todo}"
    );
    assert!(
        allowed(&bodies[STEP_CALLS + 2]).contains(&"browser_open"),
        "the plan browses"
    );
    let transcript = std::fs::read_to_string(dir.path().join(".tessera/transcript.jsonl")).unwrap();
    let phases: Vec<String> = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|t| t["kind"] == "agent")
        .map(|t| t["phase"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(phases[1..=STEP_CALLS], vec!["step 1/2".to_string(); STEP_CALLS]);
    assert_eq!(
        phases[STEP_CALLS + 1],
        "step 2/2",
        "moved on, unticked, after its calls"
    );
}

#[test]
fn a_valid_call_closed_by_the_token_limit_is_not_run() {
    let dir = workspace(&[("a.md", "x\n")]);
    let mut answers = opening(r#"{"mode":"simple"}"#);
    // A masking server closes a cut call validly: its content is still where the budget ran out.
    let mut cut = call("file_write", json!({"path": "a.md", "content": "half a senten"}));
    cut.finish_reason = Some(FinishReason::Length);
    answers.push(cut);
    answers.extend(act_then_finish("done"));
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    report.unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.md")).unwrap(),
        "x\n",
        "not written"
    );
    // The next request (bodies[3]) tells the model why.
    assert!(
        last_message(&bodies[3]).contains("the call to `file_write` was cut off by the token limit"),
        "{}",
        last_message(&bodies[3])
    );
}

mod endings;
