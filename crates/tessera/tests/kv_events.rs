//! `tessera serve --kv-events`: a subscriber with PyPI `pyzmq` and `msgpack`
//! (`scripts/kv_events_check.py`) rebuilds the set of cached blocks from the
//! events alone while a workload overflows the pool, and the set equals the
//! engine's index at the end.

use crate::common::serve_with;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

#[test]
fn a_subscriber_rebuilds_the_index_from_kv_events() {
    let python = tessera_fixtures::openai_python();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let endpoint = format!("tcp://127.0.0.1:{port}");
    // 1,024 token slots: six agents' prompts of ~300 tokens each overflow it.
    let (mut server, url) = serve_with(&["--kv-events", &endpoint, "--kv-cache-tokens", "1024"]);
    let check = Command::new(&python)
        .arg(PathBuf::from(REPO).join("scripts/kv_events_check.py"))
        .arg(url.trim_end_matches("/v1"))
        .arg(&endpoint)
        .output()
        .expect("running the KV-event subscriber");
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&check.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&check.stderr));
    assert!(
        check.status.success(),
        "the subscriber's set differs from the index:\n{stdout}"
    );
    assert!(stdout.contains(" 0 problems"), "{stdout}");
}
