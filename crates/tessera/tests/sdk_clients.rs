//! `tessera serve` driven by the official `anthropic` client (its Messages
//! API: `scripts/anthropic_client_check.py`) and the official `openai`
//! client's Responses API (`scripts/responses_client_check.py`): every
//! tool_choice, plain and streamed, calls validated with `jsonschema`,
//! cached tokens reported, a tool loop that reuses each turn's reply from
//! the cache. The clients live in the venv `scripts/setup-openai-client.sh`
//! makes on first use; a failed setup fails loudly.

use crate::common::serve;
use std::path::PathBuf;
use std::process::Command;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Run `script` against `url`; its output and whether it passed.
fn check(python: &PathBuf, script: &str, url: &str) -> (bool, String) {
    let output = Command::new(python)
        .arg(PathBuf::from(REPO).join("scripts").join(script))
        .arg(url)
        .output()
        .expect("running a client check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("== {script}\n{text}");
    (output.status.success() && text.contains(" 0 failures"), text)
}

#[test]
fn the_official_anthropic_and_responses_clients_work_unchanged() {
    let python = tessera_fixtures::openai_python();
    let (mut server, url) = serve();
    let anthropic = check(&python, "anthropic_client_check.py", url.trim_end_matches("/v1"));
    let responses = check(&python, "responses_client_check.py", &url);
    server.kill().ok();
    server.wait().ok();
    assert!(anthropic.0, "the anthropic client check failed:\n{}", anthropic.1);
    assert!(responses.0, "the responses client check failed:\n{}", responses.1);
}
