//! What validating and answering a request needs besides the request: the
//! engine (its template, tokenizer and limits), the serving defaults, the
//! cache of compiled tool sets, the arguments the model generated for recent
//! calls (their replies as generated), and the Responses API's stored responses.

use super::memory::ReplyMemory;
use crate::responses::ResponseStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tessera_constrain::{SchemaOptions, ToolSetCache};
use tessera_engine::EngineHandle;

/// Tool sets compiled and kept, keyed by their canonical hash.
const TOOL_SETS_KEPT: usize = 64;

/// How requests are read when they leave something unsaid.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The model id responses echo when a request names none.
    pub model_name: String,
    /// Most tokens a response gets when the request names no limit.
    pub default_max_tokens: usize,
    /// Ignore schema keywords the constraint cannot enforce (each named in
    /// the job's warnings) instead of refusing the request.
    pub lenient_schemas: bool,
    /// Responses kept for `previous_response_id` (least recently used out).
    pub stored_responses: usize,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            model_name: "tessera".into(),
            default_max_tokens: DEFAULT_MAX_TOKENS,
            lenient_schemas: false,
            stored_responses: DEFAULT_STORED_RESPONSES,
        }
    }
}

/// Responses kept for `previous_response_id` by default.
pub const DEFAULT_STORED_RESPONSES: usize = 256;

/// Default response length when a request sets none (a small model can
/// wander inside a string argument for the whole context).
pub const DEFAULT_MAX_TOKENS: usize = 1024;

/// The shared context of request validation (cheap to clone).
#[derive(Debug, Clone)]
pub struct Api {
    pub(crate) engine: EngineHandle,
    pub(crate) config: Arc<ApiConfig>,
    pub(crate) tool_sets: Arc<ToolSetCache>,
    pub(crate) replies: Arc<ReplyMemory>,
    pub(crate) responses: Arc<ResponseStore>,
    next_id: Arc<AtomicU64>,
    started: u64,
}

impl Api {
    /// The context for requests to `engine`.
    pub fn new(engine: EngineHandle, config: ApiConfig) -> Self {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let schemas = SchemaOptions {
            lenient: config.lenient_schemas,
            ..SchemaOptions::GENERATION
        };
        Self {
            engine,
            responses: Arc::new(ResponseStore::new(config.stored_responses)),
            config: Arc::new(config),
            replies: Arc::default(),
            tool_sets: Arc::new(ToolSetCache::with_options(TOOL_SETS_KEPT, schemas)),
            next_id: Arc::new(AtomicU64::new(1)),
            started,
        }
    }

    /// The engine requests run on.
    pub fn engine(&self) -> &EngineHandle {
        &self.engine
    }

    /// The store behind the Responses API's `previous_response_id`.
    pub fn response_store(&self) -> Arc<ResponseStore> {
        self.responses.clone()
    }

    /// The serving defaults.
    pub fn config(&self) -> &ApiConfig {
        &self.config
    }

    /// A fresh response number.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Unix seconds when this context was made (the model's `created`).
    pub fn started(&self) -> u64 {
        self.started
    }
}
