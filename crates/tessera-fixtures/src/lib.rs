//! What the tests need from outside the repository, fetched on first use so
//! that `cargo test` alone sets up a fresh clone: the shipped models (through
//! `scripts/fetch-model.sh NAME`, which prints a line per piece and verifies
//! the SHA-256), the official JSON Schema Test Suite (through
//! `scripts/fetch-schema-suite.sh`), the official `openai` client's venv
//! (through `scripts/setup-openai-client.sh`) and SMG's (`scripts/setup-smg.sh`). Both scripts take a lock, so parallel
//! test binaries wait for one fetch instead of racing. A fetch that fails
//! fails the test loudly, with the script's own words; nothing is skipped.
#![deny(missing_docs)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use tessera_model::shipped_model;

/// The shipped model the tests run on: small and fast (the default model is
/// the 1.5B, for users; tests that need a real tool-calling model name it).
pub const FAST_MODEL: &str = "smollm2";

/// The checkout (holds `scripts/` and, by default, `models/`).
pub const REPO_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// `$TESSERA_MODELS_DIR` (CI keeps models outside the clone) or the checkout's `models/`.
pub fn models_dir() -> PathBuf {
    std::env::var_os("TESSERA_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(REPO_ROOT).join("models"))
}

/// The path of shipped model `name` (`smollm2`, `qwen2.5-coder-1.5b`, …),
/// fetched and verified first (once per test binary).
///
/// # Panics
/// On an unknown name, or when the fetch fails (the panic names the command
/// to rerun and what the script said).
pub fn model(name: &str) -> PathBuf {
    static READY: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let ready = READY.get_or_init(Default::default);
    let mut ready = ready.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(path) = ready.get(name) {
        return path.clone();
    }
    let shipped = shipped_model(name).unwrap_or_else(|| panic!("`{name}` is not a shipped model"));
    run_script("scripts/fetch-model.sh", &[name], &format!("fetching model {name}"));
    let path = models_dir().join(shipped.file);
    assert!(
        path.is_file(),
        "scripts/fetch-model.sh {name} succeeded but {} is missing",
        path.display()
    );
    ready.insert(name.to_string(), path.clone());
    path
}

/// The interpreter of the venv holding the official `openai` client:
/// `$TESSERA_OPENAI_PYTHON` when set, else made (once) by
/// `scripts/setup-openai-client.sh`.
///
/// # Panics
/// When the venv cannot be made.
pub fn openai_python() -> PathBuf {
    if let Some(path) = std::env::var_os("TESSERA_OPENAI_PYTHON") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "TESSERA_OPENAI_PYTHON={} does not exist",
            path.display()
        );
        return path;
    }
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let out = run_script(
                "scripts/setup-openai-client.sh",
                &[],
                "setting up the openai client venv",
            );
            let path = PathBuf::from(out.trim());
            assert!(
                path.is_file(),
                "scripts/setup-openai-client.sh printed {out:?}, which is not a file"
            );
            path
        })
        .clone()
}

/// The `smg` binary (SMG, the Shepherd Model Gateway, from PyPI), installed
/// (once) in a venv outside the repository by `scripts/setup-smg.sh`.
///
/// # Panics
/// When the install fails (the panic names the command to rerun).
pub fn smg_binary() -> PathBuf {
    static SMG: OnceLock<PathBuf> = OnceLock::new();
    SMG.get_or_init(|| {
        let out = run_script("scripts/setup-smg.sh", &[], "installing SMG");
        let path = PathBuf::from(out.trim());
        assert!(
            path.is_file(),
            "scripts/setup-smg.sh printed {out:?}, which is not a file"
        );
        path
    })
    .clone()
}

/// The official JSON Schema Test Suite's `draft2020-12` folder (from the
/// `jsonschema` 4.26.0 sdist), fetched and verified first by
/// `scripts/fetch-schema-suite.sh` (once per test binary).
///
/// # Panics
/// When the fetch fails (the panic names the command to rerun).
pub fn json_schema_suite() -> PathBuf {
    static SUITE: OnceLock<PathBuf> = OnceLock::new();
    SUITE
        .get_or_init(|| {
            let out = run_script(
                "scripts/fetch-schema-suite.sh",
                &[],
                "fetching the JSON Schema Test Suite",
            );
            let path = PathBuf::from(out.trim()).join("draft2020-12");
            assert!(
                path.is_dir(),
                "scripts/fetch-schema-suite.sh printed {out:?}, which holds no draft2020-12 folder"
            );
            path
        })
        .clone()
}

/// Run a repository script with its progress on our stderr; returns its
/// stdout. Panics, naming the command, when it fails.
fn run_script(script: &str, args: &[&str], what: &str) -> String {
    let path = Path::new(REPO_ROOT).join(script);
    eprintln!("tessera-fixtures: {what} ({script} {})", args.join(" "));
    let output = Command::new("bash")
        .arg(&path)
        .args(args)
        .env("TESSERA_MODELS_DIR", models_dir())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {}: {e}", path.display()));
    assert!(
        output.status.success(),
        "{what} failed ({}): rerun `{script} {}` to see why; a test that needs it cannot run without it",
        output.status,
        args.join(" ")
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
