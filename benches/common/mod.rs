//! Shared by the criterion benches: where the real model is (missing = a loud failure).

use std::path::PathBuf;

/// `$TESSERA_MODELS_DIR/<file>` or `<repo>/models/<file>`, which must exist.
pub fn model_path() -> PathBuf {
    let dir = std::env::var_os("TESSERA_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models"));
    let path = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.is_file(),
        "the model is missing at {}: run scripts/fetch-model.sh",
        path.display()
    );
    path
}
