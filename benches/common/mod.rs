//! Shared by the criterion benches: where the real model is (fetched on first use).

use std::path::PathBuf;

/// The shipped model named by `$TESSERA_BENCH_MODEL`, or the tests' fast
/// model (SmolLM2), fetched into `$TESSERA_MODELS_DIR` or `<repo>/models`
/// when missing.
pub fn model_path() -> PathBuf {
    let name = std::env::var("TESSERA_BENCH_MODEL").unwrap_or_else(|_| tessera_fixtures::FAST_MODEL.to_string());
    tessera_fixtures::model(&name)
}
