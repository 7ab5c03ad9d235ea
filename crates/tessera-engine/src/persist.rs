//! The persisted prefix cache: one file per model fingerprint in the
//! configured directory, restored at start and written at shutdown or on request.
//! A missing file is a cold start; a mismatched or corrupt one is ignored with
//! a warning (the format's fingerprint, layout and checksum checks refuse it).

use crate::EngineError;
use std::path::{Path, PathBuf};
use tessera_kv::BlockPool;
use tessera_model::{load_prefix_cache, save_prefix_cache, KvCache, PersistError};

/// Where the cache for `fingerprint` lives in `dir`.
pub(crate) fn cache_file(dir: &Path, fingerprint: &str) -> PathBuf {
    let name: String = fingerprint
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    dir.join(format!("prefix-cache-{name}.tkv"))
}

/// Restore the cache if a file exists; warn and start cold if the file cannot be used.
/// Returns the number of blocks restored. A device that fails while taking the rows
/// in is an error: its state is unknown, so the engine does not start on it.
pub(crate) fn restore(
    dir: &Path,
    fingerprint: &str,
    pool: &mut BlockPool,
    kv: &mut KvCache,
) -> Result<usize, EngineError> {
    let path = cache_file(dir, fingerprint);
    if !path.exists() {
        tracing::info!(path = %path.display(), "no persisted prefix cache yet; starting cold");
        return Ok(0);
    }
    match load_prefix_cache(&path, pool, kv, fingerprint) {
        Ok(blocks) => {
            tracing::info!(path = %path.display(), blocks, "restored the prefix cache");
            Ok(blocks)
        }
        Err(error @ PersistError::Device(_)) => Err(EngineError::persist(
            format!("restoring {} onto the device", path.display()),
            error,
        )),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "ignoring the persisted prefix cache");
            Ok(0)
        }
    }
}

/// Write the cache (every indexed block). Returns the number of blocks written.
pub(crate) fn save(dir: &Path, fingerprint: &str, pool: &BlockPool, kv: &KvCache) -> Result<usize, EngineError> {
    std::fs::create_dir_all(dir).map_err(|error| EngineError::persist(format!("creating {}", dir.display()), error))?;
    let path = cache_file(dir, fingerprint);
    let blocks = save_prefix_cache(&path, pool, kv, fingerprint)
        .map_err(|error| EngineError::persist(format!("writing {}", path.display()), error))?;
    tracing::info!(path = %path.display(), blocks, "saved the prefix cache");
    Ok(blocks)
}
