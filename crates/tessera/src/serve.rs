//! `tessera serve`: one model behind OpenAI's Chat Completions, Completions
//! and Responses APIs and Anthropic's Messages API.

use crate::model_files::{fingerprint_for_cache, load_model, model_name, ModelArgs};
use crate::speculation_args::SpeculationArgs;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::time::Duration;
use tessera_engine::{EngineConfig, EngineHandle};
use tessera_server::{
    serve, shutdown_signal, start_kv_events, AppState, ServerConfig, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_TOKENS,
    DEFAULT_STORED_RESPONSES,
};

/// Arguments of `tessera serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    speculation: SpeculationArgs,
    /// Address to bind (use 0.0.0.0 to accept connections from other machines).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to bind.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Require the key on every route but /health, as `Authorization: Bearer KEY` or `x-api-key: KEY`.
    #[arg(long, env = "TESSERA_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// The model id clients see in /v1/models and responses (default: the model file's name).
    #[arg(long)]
    served_model_name: Option<String>,
    /// Token slots in the KV pool, shared by running requests and the prefix cache [default: the
    /// model's context, at least 16384, so one request of any length fits (an agent harness's first
    /// turn runs to 20k tokens)].
    #[arg(long, value_name = "TOKENS")]
    kv_cache_tokens: Option<usize>,
    /// Persist the prefix cache in this folder (restored at start, saved at shutdown).
    #[arg(long)]
    kv_cache_dir: Option<PathBuf>,
    /// Most sequences decoding at once.
    #[arg(long, default_value_t = 16)]
    max_running: usize,
    /// Most requests queued for admission; more get 429.
    #[arg(long, default_value_t = 256)]
    max_waiting: usize,
    /// Tokens per forward pass (decode tokens plus prefill chunks).
    #[arg(long, default_value_t = 512)]
    max_batch_tokens: usize,
    /// Largest request body in bytes; larger bodies get 413.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// Most tokens a response gets when the request sets no max_tokens.
    #[arg(long, default_value_t = DEFAULT_MAX_TOKENS)]
    default_max_tokens: usize,
    /// Seconds in-flight requests may take to finish after SIGINT/SIGTERM before they are cancelled.
    #[arg(long, default_value_t = 30)]
    shutdown_grace_secs: u64,
    /// Publish the prefix index's changes as vLLM-format KV events on a ZMQ PUB socket bound here
    /// (e.g. `tcp://127.0.0.1:5557`), topic `kv@<host>:<port>@<model>`, for llm-d's KV-cache
    /// indexer and other KV-aware routers.
    #[arg(long, value_name = "ENDPOINT")]
    kv_events: Option<String>,
    /// Accept tool and response schemas with keywords the constraint cannot enforce (`not`,
    /// `if`/`then`/`else`, `uniqueItems`, remote `$ref`s...), ignoring them: the output then obeys
    /// a looser schema. Each response says which were ignored in an `x-tessera-schema-warnings`
    /// header (and the log). Without it such schemas are refused with a 400 naming the keyword.
    #[arg(long)]
    lenient_schemas: bool,
    /// Responses kept in memory for the Responses API's `previous_response_id` (least recently
    /// used out; a forgotten id is a 400).
    #[arg(long, default_value_t = DEFAULT_STORED_RESPONSES)]
    stored_responses: usize,
}

/// The smallest default KV pool, in tokens.
const MIN_KV_CACHE_TOKENS: usize = 16384;

pub fn run(args: ServeArgs) -> Result<()> {
    if args.max_body_bytes == 0 {
        bail!("--max-body-bytes must be at least 1");
    }
    if args.default_max_tokens == 0 {
        bail!("--default-max-tokens must be at least 1");
    }
    let name = match &args.served_model_name {
        Some(name) => name.clone(),
        None => model_name(&args.model)?,
    };
    let model_fingerprint = fingerprint_for_cache(&args.model, args.kv_cache_dir.as_deref())?;
    let loaded = load_model(&args.model)?;
    let kv_cache_tokens = args
        .kv_cache_tokens
        .unwrap_or_else(|| loaded.model.config().max_context.max(MIN_KV_CACHE_TOKENS));
    let address = format!("{}:{}", args.host, args.port);
    let listener = std::net::TcpListener::bind(&address)
        .with_context(|| format!("binding {address} (is another server using the port? try --port)"))?;
    listener
        .set_nonblocking(true)
        .context("making the listener non-blocking")?;
    let bound = listener.local_addr().context("reading the bound address")?;
    let mut config = EngineConfig {
        max_running: args.max_running,
        max_waiting: args.max_waiting,
        max_batch_tokens: args.max_batch_tokens,
        kv_cache_dir: args.kv_cache_dir.clone(),
        model_fingerprint,
        kv_dtype: args.model.kv_dtype,
        speculation: args.speculation.config(),
        ..EngineConfig::for_tokens(kv_cache_tokens)
    };
    if let Some(endpoint) = &args.kv_events {
        let topic = format!("kv@{bound}@{name}");
        config.kv_events = Some(start_kv_events(endpoint, topic, config.block_size).map_err(anyhow::Error::msg)?);
    }
    let engine = EngineHandle::start(loaded, config).context("starting the engine")?;
    let state = AppState::new(
        engine,
        ServerConfig {
            model_name: name.clone(),
            api_key: args.api_key.clone(),
            max_body_bytes: args.max_body_bytes,
            shutdown_grace: Duration::from_secs(args.shutdown_grace_secs),
            default_max_tokens: args.default_max_tokens,
            lenient_schemas: args.lenient_schemas,
            stored_responses: args.stored_responses,
        },
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).context("serving on the bound socket")?;
        eprintln!(
            "tessera: serving {name} on http://{bound}/v1 (KV pool {} tokens, drafts: {}{}{}); Ctrl-C stops",
            kv_cache_tokens,
            args.speculation.describe(),
            if args.api_key.is_some() {
                ", API key required"
            } else {
                ""
            },
            args.kv_events
                .as_deref()
                .map(|endpoint| format!(", KV events on {endpoint}"))
                .unwrap_or_default(),
        );
        serve(listener, state, shutdown_signal()).await.context("serving")
    })?;
    eprintln!("tessera: stopped");
    Ok(())
}
