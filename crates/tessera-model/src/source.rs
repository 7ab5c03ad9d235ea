//! Resolving a `--model` argument to files on disk, offline: a `.gguf` file, an
//! HF checkpoint directory, or an `org/name` id looked up in the local Hugging
//! Face hub cache (`$HF_HOME/hub`, default `~/.cache/huggingface/hub`). Nothing
//! here touches the network; downloading is the binary's opt-in job.

use crate::error::{ModelError, Result};
use crate::load::ModelLocation;
use std::path::{Path, PathBuf};

/// Why a `--model` argument could not be resolved offline.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Neither a path nor an id found in the cache.
    #[error("model `{spec}` not found: {detail}")]
    NotFound {
        /// The argument given.
        spec: String,
        /// What was looked at.
        detail: String,
    },
}

/// The local HF hub cache directory.
pub fn hf_hub_cache_dir() -> Option<PathBuf> {
    if let Some(cache) = std::env::var_os("HF_HUB_CACHE") {
        return Some(PathBuf::from(cache));
    }
    if let Some(home) = std::env::var_os("HF_HOME") {
        return Some(PathBuf::from(home).join("hub"));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/huggingface/hub"))
}

/// Resolve `spec` (a path or an `org/name` id) without the network, in the
/// default HF cache ([`hf_hub_cache_dir`]).
pub fn resolve_offline(spec: &str) -> std::result::Result<ModelLocation, ResolveError> {
    resolve_offline_in(spec, hf_hub_cache_dir())
}

/// [`resolve_offline`] against a given HF cache directory (`None`: no cache known).
pub fn resolve_offline_in(spec: &str, cache: Option<PathBuf>) -> std::result::Result<ModelLocation, ResolveError> {
    let path = Path::new(spec);
    if path.is_file() {
        return Ok(ModelLocation::Gguf(path.to_path_buf()));
    }
    if path.is_dir() {
        return Ok(classify_dir(path));
    }
    let not_found = |detail: String| ResolveError::NotFound {
        spec: spec.to_string(),
        detail,
    };
    let Some((org, name)) = spec
        .split_once('/')
        .filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
    else {
        return Err(not_found(
            "no such file or directory, and not an `org/name` hub id".into(),
        ));
    };
    let cache = cache.ok_or_else(|| not_found("no HF cache directory (set HF_HOME)".into()))?;
    let repo = cache.join(format!("models--{org}--{name}"));
    let snapshot = snapshot_dir(&repo).ok_or_else(|| {
        not_found(format!(
            "not in the local hub cache ({} has no snapshot); download it with --allow-download or place the files there",
            repo.display()
        ))
    })?;
    Ok(classify_dir(&snapshot))
}

/// The snapshot `refs/main` points at, else any snapshot.
fn snapshot_dir(repo: &Path) -> Option<PathBuf> {
    let snapshots = repo.join("snapshots");
    if let Ok(main) = std::fs::read_to_string(repo.join("refs/main")) {
        let dir = snapshots.join(main.trim());
        if dir.is_dir() {
            return Some(dir);
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// A directory holding exactly one `.gguf` is that file; otherwise it is read as HF layout.
fn classify_dir(dir: &Path) -> ModelLocation {
    let ggufs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
                .collect()
        })
        .unwrap_or_default();
    let has_config = dir.join("config.json").is_file();
    match ggufs.as_slice() {
        [only] if !has_config => ModelLocation::Gguf(only.clone()),
        _ => ModelLocation::HfDir(dir.to_path_buf()),
    }
}

impl From<ResolveError> for ModelError {
    fn from(error: ResolveError) -> Self {
        ModelError::InvalidConfig(error.to_string())
    }
}

/// Resolve and load in one step.
pub fn load_spec(spec: &str, options: &crate::load::LoadOptions) -> Result<crate::load::LoadedModel> {
    crate::load::LoadedModel::load(&resolve_offline(spec)?, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tessera-source-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn hub_id_resolves_to_the_snapshot_refs_main_names() {
        // hub/models--org--tiny/{refs/main = "abc", snapshots/abc/{config.json,...}}
        let cache = temp_dir("hub");
        let repo = cache.join("models--org--tiny");
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::create_dir_all(repo.join("snapshots/old")).unwrap();
        std::fs::create_dir_all(repo.join("snapshots/abc")).unwrap();
        std::fs::write(repo.join("refs/main"), "abc\n").unwrap();
        std::fs::write(repo.join("snapshots/abc/config.json"), "{}").unwrap();
        let location = resolve_offline_in("org/tiny", Some(cache.clone())).unwrap();
        assert_eq!(location, ModelLocation::HfDir(repo.join("snapshots/abc")));
        std::fs::remove_dir_all(&cache).ok();
    }

    #[test]
    fn a_single_gguf_in_a_snapshot_is_that_file() {
        let cache = temp_dir("gguf");
        let snapshot = cache.join("models--org--q/snapshots/r1");
        std::fs::create_dir_all(&snapshot).unwrap();
        std::fs::write(snapshot.join("m.Q4_0.gguf"), b"GGUF").unwrap();
        let location = resolve_offline_in("org/q", Some(cache.clone())).unwrap();
        assert_eq!(location, ModelLocation::Gguf(snapshot.join("m.Q4_0.gguf")));
        std::fs::remove_dir_all(&cache).ok();
    }

    #[test]
    fn missing_ids_and_paths_say_what_was_looked_at() {
        let cache = temp_dir("empty");
        let error = resolve_offline_in("org/absent", Some(cache.clone()))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("models--org--absent") && error.contains("--allow-download"),
            "{error}"
        );
        let error = resolve_offline_in("no/such/path.gguf", Some(cache.clone()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("no such file"), "{error}");
        std::fs::remove_dir_all(&cache).ok();
    }
}
