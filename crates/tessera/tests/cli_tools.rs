//! `tessera generate --tools`: a required call prints one valid JSON line of
//! calls; bad tool definitions and choices are one clear line and a non-zero exit.

use crate::common::real_model;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Output};

fn tools_file(name: &str, tools: &Value) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-cli-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, tools.to_string()).unwrap();
    path
}

fn generate(tools: &PathBuf, choice: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["generate", "--model", &real_model(), "--max-tokens", "64", "--tools"])
        .arg(tools)
        .args(["--tool-choice", choice, "--prompt", "Look up the weather in Paris."])
        .output()
        .expect("running the tessera binary")
}

fn function(name: &str, parameters: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "description": "A tool.", "parameters": parameters}})
}

fn good_tools() -> Value {
    let query = json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]});
    json!([
        function("browser_search", query.clone()),
        function(
            "browser_open",
            json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]})
        ),
        function(
            "file_read",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
        ),
    ])
}

#[test]
fn a_family_choice_prints_one_valid_call() {
    let output = generate(&tools_file("good.json", &good_tools()), "browser_*");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let calls: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let calls = calls.as_array().unwrap();
    assert_eq!(calls.len(), 1, "{stdout}");
    assert!(calls[0]["name"].as_str().unwrap().starts_with("browser_"), "{stdout}");
    assert!(calls[0]["arguments"].is_object(), "{stdout}");
}

#[test]
fn bad_tools_and_choices_are_clear_errors() {
    let cases = [
        (
            json!([function("a", json!({})), function("a", json!({}))]),
            "auto",
            "defined twice",
        ),
        (json!([function("", json!({}))]), "auto", "name is empty"),
        (
            json!([function("t", json!({"type": "objekt"}))]),
            "auto",
            "unknown type `objekt`",
        ),
        (good_tools(), "git_status", "`git_status`, which is not among the tools"),
        (good_tools(), "git_*", "family `git_*` matches no tool"),
        (json!({"not": "a list"}), "auto", "expected a JSON array"),
    ];
    for (i, (tools, choice, needle)) in cases.iter().enumerate() {
        let output = generate(&tools_file(&format!("bad{i}.json"), tools), choice);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "case {i} succeeded");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(stderr.contains(needle), "case {i}: stderr lacks {needle:?}: {stderr}");
    }
}
