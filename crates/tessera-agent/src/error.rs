//! Errors that end a run (a failed tool call is an observation, not an error).

use std::path::PathBuf;

/// Why an agent run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The workspace folder is missing or unusable.
    #[error("workspace {path}: {reason}")]
    Workspace {
        /// The folder given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading or writing the harness's own files failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The model backend failed (HTTP status, transport, malformed stream).
    #[error("model request failed: {0}")]
    Backend(String),
    /// A setting is out of range.
    #[error("{field}: {reason}")]
    Config {
        /// The setting.
        field: &'static str,
        /// Its limit.
        reason: String,
    },
}
