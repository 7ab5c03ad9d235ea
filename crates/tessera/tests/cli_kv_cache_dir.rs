//! `tessera generate --kv-cache-dir`: the second invocation with the same system
//! prompt reuses the first one's K/V from disk, and answers the same.

use crate::common::real_model;
use std::path::PathBuf;
use std::process::Command;

/// Run generate; returns (stdout, the JSON stats line).
fn generate(kv_dir: &PathBuf, prompt: &str) -> (String, serde_json::Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "generate",
            "--model",
            &real_model(),
            "--chat",
            "--max-tokens",
            "12",
            "--json-stats",
        ])
        .args([
            "--system",
            "You are a terse geography assistant. Answer in one short sentence.",
        ])
        .args(["--prompt", prompt, "--kv-cache-dir"])
        .arg(kv_dir)
        .output()
        .expect("running the tessera binary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "generate failed: {stderr}");
    let stats = stderr.lines().last().expect("a stats line");
    let stats = serde_json::from_str(stats).unwrap_or_else(|e| panic!("stats line {stats:?}: {e}"));
    (String::from_utf8_lossy(&output.stdout).into_owned(), stats)
}

#[test]
fn a_second_run_reuses_the_saved_prefix() {
    let dir = std::env::temp_dir().join(format!("tessera-cli-kv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (first_text, first) = generate(&dir, "Name the capital of France.");
    assert_eq!(first["cached_tokens"], 0);
    assert!(
        std::fs::read_dir(&dir).unwrap().count() == 1,
        "one cache file per model"
    );
    let (second_text, second) = generate(&dir, "Name the capital of France.");
    // Every full block of the first run is reused (a block-sized run is the unit
    // the index stores; the last prompt token is always recomputed).
    let prompt = second["prompt_tokens"].as_u64().unwrap();
    let cached = second["cached_tokens"].as_u64().unwrap();
    assert!(
        cached >= (prompt - 1) / 16 * 16 && cached < prompt,
        "{cached} of {prompt}"
    );
    assert_eq!(second_text, first_text);
    let (_, other) = generate(&dir, "Name the capital of Italy.");
    assert!(
        other["cached_tokens"].as_u64().unwrap() >= 20,
        "the system prompt is reused: {other}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
