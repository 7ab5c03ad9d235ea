//! Two `tessera serve` replicas behind SMG, the Shepherd Model Gateway (PyPI
//! `smg` 1.13.0, installed outside the repo by `scripts/setup-smg.sh`, bound
//! to 127.0.0.1 only), driven through SMG by the official `openai` client
//! (`scripts/smg_check.py`): every tool-choice mode, plain and streamed, in
//! the forms SMG passes; SMG reads each replica's `/v1/loads`; its routing key
//! becomes a replica's session.

use crate::common::serve_with;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A child process killed when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    listener.local_addr().expect("the bound address").port()
}

#[test]
fn replicas_behind_smg_keep_every_feature() {
    let smg = tessera_fixtures::smg_binary();
    let python = tessera_fixtures::openai_python();
    let replicas: Vec<(Running, String)> = (0..2)
        .map(|_| {
            let (child, url) = serve_with(&["--served-model-name", "tessera"]);
            (Running(child), url.trim_end_matches("/v1").to_string())
        })
        .collect();
    let port = free_port();
    let mut gateway = Command::new(&smg);
    gateway
        .args([
            "launch",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--worker-urls",
        ])
        .args(replicas.iter().map(|(_, url)| url.as_str()))
        .args(["--policy", "cache_aware", "--prometheus-host", "127.0.0.1"])
        .args(["--prometheus-port", &free_port().to_string()])
        .args([
            "--load-monitor-interval",
            "1",
            "--disable-retries",
            "--log-level",
            "warn",
        ]);
    let log = tempfile::NamedTempFile::new().expect("a log file for smg");
    let output = || log.reopen().expect("reopening the smg log");
    gateway.stdout(output()).stderr(output());
    let _gateway = Running(gateway.spawn().expect("running smg"));
    let check = Command::new(&python)
        .arg(PathBuf::from(REPO).join("scripts/smg_check.py"))
        .arg(format!("http://127.0.0.1:{port}"))
        .args(replicas.iter().map(|(_, url)| url.as_str()))
        .output()
        .expect("running the SMG check");
    let stdout = String::from_utf8_lossy(&check.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&check.stderr));
    let smg_log = || std::fs::read_to_string(log.path()).unwrap_or_default();
    assert!(
        check.status.success(),
        "the check through SMG failed:\n{stdout}\nSMG's log:\n{}",
        smg_log()
    );
    assert!(stdout.contains(" 0 failures"), "{stdout}");
}
