//! `tessera agent` as a user runs it: in process and against `tessera serve`
//! over HTTP (`--server`), on the real model, in temporary workspaces. Each
//! run ends with `finish` (exit 0) or a stated reason (exit 1), prints the
//! per-turn table with the hit rate, and leaves a JSONL transcript. Bad input
//! is one clear line before any model loads.

use crate::common::{real_model, serve};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn workspace(name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-cli-agent-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn agent(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("agent")
        .args(args)
        .output()
        .expect("running the tessera binary")
}

/// Exit 0 with "finished: …" or exit 1 with "stopped: …"; the table, its hit
/// rate (≥ 90 % from turn 2) and the transcript are there either way.
fn assert_clean_end(output: &Output, dir: &Path) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    match output.status.code() {
        Some(0) => assert!(last.starts_with("finished: "), "{last}"),
        Some(1) => {
            assert!(last.starts_with("stopped: "), "{last}");
            assert!(stderr.contains("did not finish"), "{stderr}");
        }
        other => panic!("exit status {other:?}: {stderr}"),
    }
    assert!(stdout.contains("turn  phase"), "the per-turn table is printed");
    let rate_line = stdout
        .lines()
        .find(|l| l.starts_with("cache hit rate from turn 2"))
        .expect("the hit rate line");
    let rate: f64 = rate_line
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    assert!(rate >= 90.0, "{rate_line}");
    let transcript = std::fs::read_to_string(dir.join(".tessera/transcript.jsonl")).expect("the transcript");
    let records: Vec<Value> = transcript.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(records.len() >= 3, "reply, plan, planner at least");
    assert!(records.iter().skip(1).any(|r| r["cached_tokens"].as_u64().unwrap() > 0));
}

#[test]
fn in_process_run_ends_cleanly_with_table_and_transcript() {
    let dir = workspace("local", &[("notes.md", "Buy green apples\nCall the plumber\n")]);
    let output = agent(&[
        "--model",
        &real_model(),
        "--workspace",
        dir.to_str().unwrap(),
        "--max-steps",
        "8",
        "Read notes.md and write its first line to out.txt.",
    ]);
    assert_clean_end(&output, &dir);
}

#[test]
fn server_run_drives_tessera_serve_over_http() {
    let (mut server, url) = serve();
    let dir = workspace(
        "server",
        &[
            ("docs/fruit.md", "The kiwi is a fruit.\n"),
            ("docs/tools.md", "A hammer.\n"),
        ],
    );
    let output = agent(&[
        "--server",
        &url,
        "--workspace",
        dir.to_str().unwrap(),
        "--max-steps",
        "6",
        "Find which file in docs/ mentions kiwi.",
    ]);
    let _ = server.kill();
    let _ = server.wait();
    assert_clean_end(&output, &dir);
}

#[test]
fn bad_input_is_one_clear_line_before_loading() {
    let missing = std::env::temp_dir().join("tessera-no-such-workspace-for-agent");
    let output = agent(&["--workspace", missing.to_str().unwrap(), "do it"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr.starts_with("error: workspace ") && stderr.contains("tessera-no-such-workspace"),
        "{stderr}"
    );
    let dir = workspace("bad", &[]);
    for (args, needle) in [
        (vec!["--max-steps", "0", "x"], "max_steps"),
        (vec!["  "], "task"),
        (vec!["--context-window", "100", "x"], "context_window"),
        (vec!["--server", "localhost:1", "x"], "not an http:// URL"),
        (vec!["--server", "http://127.0.0.1:1/v1", "x"], "cannot reach"),
    ] {
        let mut all = vec!["--workspace", dir.to_str().unwrap()];
        all.extend(args);
        let output = agent(&all);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(needle), "{needle}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}
