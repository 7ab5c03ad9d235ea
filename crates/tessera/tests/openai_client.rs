//! `tessera serve` as a newcomer runs it, driven by the official `openai`
//! Python client (`scripts/openai_client_check.py`: every tool-choice mode,
//! streamed and not, calls validated with `jsonschema`; the README example).
//! Then SIGTERM: the server stops cleanly. The client lives in a venv made by
//! `scripts/setup-openai-client.sh`, run on first use; a failed setup fails loudly.

use crate::common::serve;
use std::path::PathBuf;
use std::process::Command;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

#[test]
fn the_official_openai_client_works_unchanged() {
    let python = tessera_fixtures::openai_python();
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
