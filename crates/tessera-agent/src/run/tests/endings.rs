//! How a run ends (`finish`, an answer without a call, the step limit, too
//! many answers without a call) and how it is kept out of loops (repeats
//! worded apart, a repeated call's tool resting, the rut temperature).

use super::*;

#[test]
fn repeated_results_are_worded_apart_a_repeated_call_rests_its_tool_and_a_rut_raises_the_temperature() {
    let dir = workspace(&[("a.md", "x\n")]);
    let mut answers = opening(r#"{"mode":"simple"}"#);
    let read = || call("file_read", json!({"path": "a.md"}));
    answers.extend([
        read(),
        read(),
        read(),
        call("file_list", json!({})),
        call("file_read", json!({"path": "a.md", "start_line": 1})),
        call("finish", json!({"summary": "x"})),
    ]);
    let (_, bodies) = run_script(dir.path(), answers, config("t"));
    let agent: Vec<&Value> = bodies.iter().filter(|b| b.get("tools").is_some()).collect();
    let messages = agent.last().unwrap()["messages"].as_array().unwrap();
    let results: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        !dir.path().join("todo.md").exists(),
        "a simple plan writes no todo (a small model copied the recited task into files)"
    );
    assert!(results[1].starts_with("a.md: lines"));
    assert!(results[2].starts_with("(same result as an earlier call) a.md"));
    assert!(
        results[3].starts_with("error: `file_read` is not allowed"),
        "the repeated call rests file_read: {}",
        results[3]
    );
    assert!(!allowed(agent[3]).contains(&"file_read"));
    assert!(
        !allowed(agent[4]).contains(&"file_read"),
        "still resting after a refused call"
    );
    assert!(allowed(agent[5]).contains(&"file_read"), "a new call woke it");
    assert!(results[5].starts_with("(unchanged from before) a.md"));
    let temperatures: Vec<f64> = agent.iter().map(|b| b["temperature"].as_f64().unwrap()).collect();
    let rut = RUT_TEMPERATURE as f64;
    assert_eq!(
        temperatures,
        vec![0.0, 0.0, 0.0, rut, rut, 0.0, 0.0],
        "after two identical calls the next turns are sampled"
    );
}

#[test]
fn runs_end_on_repeated_no_calls_and_at_the_step_limit() {
    let dir = workspace(&[]);
    let mut answers = opening(r#"{"mode":"simple"}"#);
    answers.extend([text("hmm"), text("well"), text("so")]);
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    assert_eq!(report.unwrap().stop, StopReason::NoCall { misses: MAX_MISSES });
    assert!(last_message(&bodies[4])
        .starts_with("[harness] no tool call was made (finish reason: stop); call one of: file_read"));

    let mut answers = opening(r#"{"mode":"simple"}"#);
    answers.extend((0..3).map(|i| call("file_list", json!({"path": ".", "n": i}))));
    let config = AgentConfig {
        max_steps: 4,
        ..config("t")
    };
    let (report, _) = run_script(dir.path(), answers, config);
    assert_eq!(report.unwrap().stop, StopReason::StepLimit { steps: 4 });
}

#[test]
fn an_answer_without_a_call_ends_the_run_only_after_a_write_with_no_step_open() {
    let dir = workspace(&[("a.md", "x\n")]);
    let read = || call("file_read", json!({"path": "a.md"}));
    let write = || call("file_write", json!({"path": "b.md", "content": "x"}));
    for answer in ["The file holds x.", ""] {
        let mut answers = opening(r#"{"mode":"simple"}"#);
        answers.extend([
            text("thinking"),
            read(),
            text("a read is not the end"),
            write(),
            text(answer),
        ]);
        let (report, bodies) = run_script(dir.path(), answers, config("t"));
        assert_eq!(
            report.unwrap().stop,
            StopReason::Answered { text: answer.into() },
            "words (or an empty end of turn) after a write end the run"
        );
        let mode = |i: usize| bodies[i]["tool_choice"]["allowed_tools"]["mode"].clone();
        assert_eq!(mode(2), "required", "before acting a call is required");
        assert!(
            last_message(&bodies[3]).starts_with("[harness] no tool call"),
            "an answer before acting is a miss"
        );
        assert_eq!(mode(4), "required", "after a read, still required");
        assert!(last_message(&bodies[5]).starts_with("[harness] no tool call"));
        assert_eq!(mode(6), "auto", "after a write the model may end the run");
    }

    let mut answers = opening(r#"{"mode":"complex","plan":["Read a.md","Write b.md"]}"#);
    answers.extend([write(), text(""), call("finish", json!({"summary": "done"}))]);
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    assert!(
        matches!(report.unwrap().stop, StopReason::Finished { .. }),
        "inside a plan step an empty answer is a miss, not the end"
    );
    assert_eq!(bodies[3]["tool_choice"]["allowed_tools"]["mode"], "required");
}

#[test]
fn finish_is_validated_and_ends_the_answer() {
    let dir = workspace(&[]);
    let mut answers = opening(r#"{"mode":"simple"}"#);
    answers.extend([call("file_list", json!({})), call("finish", json!({}))]);
    let summary = "done";
    let mut both = call("finish", json!({"summary": summary}));
    both.calls.push(ChatCall {
        id: "late".into(),
        name: "file_write".into(),
        arguments: json!({"path": "late.txt", "content": "x"}).to_string(),
    });
    answers.push(both);
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    assert_eq!(
        report.unwrap().stop,
        StopReason::Finished {
            summary: summary.into()
        }
    );
    assert!(
        last_message(&bodies[4]).contains("summary"),
        "{}",
        last_message(&bodies[4])
    );
    assert!(!dir.path().join("late.txt").exists(), "calls after finish do not run");
}

#[test]
fn finish_waits_until_the_run_has_acted() {
    let dir = workspace(&[]);
    let mut answers = opening(r#"{"mode":"simple"}"#);
    // A server that does not mask: the harness refuses the early finish itself.
    answers.push(call("finish", json!({"summary": "done"})));
    answers.extend(act_then_finish("done"));
    let (report, bodies) = run_script(dir.path(), answers, config("t"));
    assert!(matches!(report.unwrap().stop, StopReason::Finished { .. }));
    assert!(!allowed(&bodies[2]).contains(&"finish"), "masked before any action");
    assert!(
        last_message(&bodies[3]).contains("`finish` is not allowed in this step (act)"),
        "{}",
        last_message(&bodies[3])
    );
    assert!(allowed(&bodies[4]).contains(&"finish"), "allowed once a call succeeded");
}
