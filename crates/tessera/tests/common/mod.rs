//! Shared by the CLI tests: where the real model is (missing = a loud
//! failure), and a `tessera serve` child on a free port.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The tests' fast model's path (SmolLM2, fetched on first use).
pub fn real_model() -> String {
    tessera_fixtures::model(tessera_fixtures::FAST_MODEL)
        .to_string_lossy()
        .into_owned()
}

/// Start `tessera serve` on a free port; returns the child and its base URL.
pub fn serve() -> (Child, String) {
    serve_with(&[])
}

/// `serve` with more arguments.
pub fn serve_with(extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["serve", "--model", &real_model(), "--port", "0"])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .expect("running the tessera binary");
    let stderr = child.stderr.take().expect("piped stderr");
    let (found, url) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[serve] {line}");
            if let Some(at) = line.find("http://") {
                let address = line[at..].split_whitespace().next().unwrap_or_default().to_string();
                let _ = found.send(address);
            }
        }
    });
    let url = url
        .recv_timeout(Duration::from_secs(120))
        .expect("the server never said where it listens");
    (child, url)
}
