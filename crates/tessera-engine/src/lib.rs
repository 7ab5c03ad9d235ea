//! Tessera's engine: the single owner of live state.
//!
//! One thread runs the step loop and owns the model, the block pool, the K/V
//! storage, the scheduler and every sequence. Callers hold a cloneable
//! [`EngineHandle`]: commands go in over an mpsc channel, replies come back on
//! oneshots, and each request's tokens stream back on its own channel as
//! [`Event`]s (TGI's router/queue split, with vLLM v1's scheduler policy).
//!
//! Each step runs **one forward over a ragged batch**: one decode token for every
//! running sequence that has finished its prompt, then prefill chunks for the
//! others, all within a per-step token budget (chunked prefill: a long prompt
//! never stalls running decodes for more than one budget's worth of compute).
//! Admission looks up the longest cached prefix (token-granular, copy-on-write
//! for a partial block). When blocks run out the newest sequence is preempted:
//! its blocks are released (its full blocks stay cached, so re-admission is
//! mostly a hit) and it is requeued at the front. A dropped event receiver
//! cancels its sequence and frees its blocks at the next step.
//!
//! Cost per step: O(running sequences + batch tokens) bookkeeping around the
//! forward pass, plus O(matched blocks) per admission.
#![deny(missing_docs)]

mod active;
mod config;
mod draft;
mod emit;
mod engine;
mod error;
mod escaped;
mod handle;
mod lookup;
mod metrics;
mod persist;
mod replay;
mod request;
mod scheduler;
mod sessions;

pub use config::{EngineConfig, KvEventSink};
pub use draft::{DraftCounts, SpeculationConfig};
pub use error::{EngineError, Field, SourceError};
pub use handle::{EngineHandle, EventStream, Output, Pending};
pub use metrics::{EngineMetrics, Histogram, LATENCY_BUCKETS_S, MASK_BUCKETS_S};
pub use request::{
    Completion, Constraint, Event, FinishReason, GenerateRequest, Timings, TokenOrigin, ToolConstraint, ToolOutput,
    Usage, MAX_STOP_BYTES, MAX_STOP_STRINGS,
};
pub use tessera_kv::{FullBlock, IndexEvent};
