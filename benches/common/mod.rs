//! Shared by the criterion benches: where the real model is (fetched on first use).

use std::path::PathBuf;

/// The default shipped model, fetched into `$TESSERA_MODELS_DIR` or `<repo>/models` when missing.
pub fn model_path() -> PathBuf {
    tessera_fixtures::model(tessera_model::default_model().name)
}
