//! Shared by the criterion benches: where the real model is (fetched on first use).

use std::path::PathBuf;

/// The tests' fast model (SmolLM2), fetched into `$TESSERA_MODELS_DIR` or `<repo>/models` when missing.
pub fn model_path() -> PathBuf {
    tessera_fixtures::model(tessera_fixtures::FAST_MODEL)
}
