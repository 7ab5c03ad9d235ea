//! `tessera serve` as a newcomer runs it, driven by the official `openai`
//! Python client (`scripts/openai_client_check.py`: every tool-choice mode,
//! streamed and not, calls validated with `jsonschema`; the README example).
//! Then SIGTERM: the server stops cleanly. The client lives in a venv made by
//! `scripts/setup-openai-client.sh` (CI runs it); a missing one fails loudly.

mod common;

use common::serve;
use std::path::PathBuf;
use std::process::Command;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The venv's interpreter: `$TESSERA_OPENAI_PYTHON`, else the setup script's default place.
fn python() -> PathBuf {
    let path = std::env::var_os("TESSERA_OPENAI_PYTHON")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/tessera/openai-venv/bin/python")))
        .expect("HOME or TESSERA_OPENAI_PYTHON must be set");
    assert!(
        path.is_file(),
        "the openai client venv is missing at {}: run scripts/setup-openai-client.sh (CI does this in .ci/run)",
        path.display()
    );
    path
}

#[test]
fn the_official_openai_client_works_unchanged() {
    let python = python();
    let (mut server, url) = serve();
    let check = Command::new(&python)
        .arg(PathBuf::from(REPO).join("scripts/openai_client_check.py"))
        .arg(&url)
        .output()
        .expect("running the client check");
    let stdout = String::from_utf8_lossy(&check.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&check.stderr));
    let pid = server.id().to_string();
    let terminated = Command::new("kill").args(["-TERM", &pid]).status();
    let status = server.wait().expect("waiting for the server");
    assert!(check.status.success(), "the openai client check failed:\n{stdout}");
    assert!(stdout.contains(" 0 failures"), "{stdout}");
    assert!(terminated.is_ok_and(|s| s.success()), "sending SIGTERM");
    assert!(status.success(), "the server did not stop cleanly on SIGTERM: {status}");
}
