//! Tessera's offline agent loop.
//!
//! The harness does the context engineering that keeps a long loop on a small
//! local model cheap and on track: a fixed system prompt and tool list (the
//! cached prefix never changes), an append-only history, budgets per source,
//! compaction into a restorable checkpoint, recitation of `todo.md`, and a
//! per-step tool policy enforced by masking (tool choice), never by removing
//! tools. Requests go to the engine in this process or to any
//! OpenAI-compatible server ([`backend`]).
#![deny(missing_docs)]

pub mod backend;
pub mod budget;
pub mod checkpoint;
pub mod config;
pub mod context;
pub mod error;
pub mod jail;
pub mod journal;
pub mod planner;
pub mod policy;
pub mod run;
pub mod tools;
pub mod transcript;

pub use config::AgentConfig;
pub use error::AgentError;
pub use run::{run, RunReport, StopReason};
