//! Shared by the CLI tests: where the real model is. Missing = a loud failure.

use std::path::PathBuf;

/// `$TESSERA_MODELS_DIR` (as CI sets it) or the checkout's `models/`.
pub fn real_model() -> String {
    let dir = std::env::var_os("TESSERA_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"));
    let path = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.is_file(),
        "the real model is missing at {}: run scripts/fetch-model.sh",
        path.display()
    );
    path.to_string_lossy().into_owned()
}
