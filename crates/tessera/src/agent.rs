//! `tessera agent`: run the offline agent loop on a workspace, on the engine
//! in this process or on any OpenAI-compatible server.

use crate::model_files::{fingerprint_for_cache, load_model, model_name, ModelArgs};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::Duration;
use tessera_agent::backend::{Backend, Http, InProcess};
use tessera_agent::config::DEFAULT_MAX_STEPS;
use tessera_agent::jail::Jail;
use tessera_agent::tools::Toolbox;
use tessera_agent::transcript::{table, TurnRecord};
use tessera_agent::{run, AgentConfig, StopReason};
use tessera_engine::{EngineConfig, EngineHandle};

/// Arguments of `tessera agent`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Every request is logged to <workspace>/.tessera/transcript.jsonl (prompt and cached \
tokens, TTFT, the call, the result); a per-turn table with the cache hit rate is printed at the end. \
Exit status: 0 when the agent called finish, 1 when it stopped for another reason (the reason is printed).\n\n\
Example: tessera agent --workspace ./ws \"Read notes.md and write its first line to out.txt.\""
)]
pub struct AgentArgs {
    /// What the agent should do.
    task: String,
    /// The folder the agent works in; every tool path is jailed to it.
    #[arg(long, short)]
    workspace: PathBuf,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    speculation: crate::speculation_args::SpeculationArgs,
    /// Most agent turns before the run stops (planner requests are not counted).
    #[arg(long, default_value_t = DEFAULT_MAX_STEPS)]
    max_steps: usize,
    /// Let the agent run shell commands in the workspace (shell_exec, shell_view).
    #[arg(long)]
    allow_shell: bool,
    /// Drive an OpenAI-compatible server at this base URL (e.g. http://127.0.0.1:8080/v1) instead of
    /// loading the model in this process.
    #[arg(long)]
    server: Option<String>,
    /// API key for --server.
    #[arg(long, env = "TESSERA_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Model id to request from --server (default: the first one it lists).
    #[arg(long)]
    server_model: Option<String>,
    /// The model's context window in tokens (default: the model's own, capped by --kv-cache-tokens;
    /// 8192 with --server).
    #[arg(long)]
    context_window: Option<usize>,
    /// Sampling temperature of agent turns (the planner always uses 0).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Base sampling seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Token slots in the in-process KV pool (prefix cache included).
    #[arg(long, default_value_t = 16384)]
    kv_cache_tokens: usize,
    /// Persist the in-process prefix cache in this folder (a second run starts warm).
    #[arg(long)]
    kv_cache_dir: Option<PathBuf>,
}

/// Context window assumed for a server that does not say.
const SERVER_CONTEXT_WINDOW: usize = 8192;

pub fn run_agent(args: AgentArgs) -> Result<()> {
    let jail = Jail::new(&args.workspace)?;
    let toolbox = Toolbox::new(jail, args.allow_shell);
    // Check what can be checked before a model loads.
    config(&args, args.context_window.unwrap_or(SERVER_CONTEXT_WINDOW)).validate()?;
    let (mut backend, engine, model_context): (Box<dyn Backend>, Option<EngineHandle>, usize) = match &args.server {
        Some(url) => {
            let http = Http::connect(url, args.api_key.clone(), args.server_model.clone())?;
            (Box::new(http), None, SERVER_CONTEXT_WINDOW)
        }
        None => {
            let engine = start_engine(&args)?;
            // The KV pool bounds a request as much as the model does.
            let context = engine.model_config().max_context.min(args.kv_cache_tokens);
            let backend = InProcess::new(engine.clone(), model_name(&args.model)?)?;
            (Box::new(backend), Some(engine), context)
        }
    };
    let config = config(&args, args.context_window.unwrap_or(model_context));
    let progress = progress_bar(backend.model());
    let mut on_turn = |turn: &TurnRecord| {
        progress.println(turn_line(turn));
        progress.set_message(format!("turn {} done; waiting for the model", turn.turn));
    };
    let report = run(backend.as_mut(), toolbox, config, &mut on_turn);
    progress.finish_and_clear();
    if let Some(engine) = engine {
        engine.shutdown().wait().context("stopping the engine")?;
    }
    let report = report?;
    print!("{}", table(&report.turns));
    println!("transcript: {}", report.transcript.display());
    if report.compactions > 0 {
        println!("history compacted {} time(s)", report.compactions);
    }
    println!("{}", report.stop);
    match report.stop {
        StopReason::Finished { .. } | StopReason::Answered { .. } => Ok(()),
        other => bail!("the agent did not finish ({other})"),
    }
}

fn config(args: &AgentArgs, context_window: usize) -> AgentConfig {
    AgentConfig {
        max_steps: args.max_steps,
        allow_shell: args.allow_shell,
        temperature: args.temperature,
        seed: args.seed,
        ..AgentConfig::new(args.task.clone(), context_window)
    }
}

fn start_engine(args: &AgentArgs) -> Result<EngineHandle> {
    let model_fingerprint = fingerprint_for_cache(&args.model, args.kv_cache_dir.as_deref())?;
    let loaded = load_model(&args.model)?;
    let config = EngineConfig {
        kv_cache_dir: args.kv_cache_dir.clone(),
        model_fingerprint,
        kv_dtype: args.model.kv_dtype,
        speculation: args.speculation.config(),
        ..EngineConfig::for_tokens(args.kv_cache_tokens)
    };
    EngineHandle::start(loaded, config).context("starting the engine")
}

fn progress_bar(model: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed}] {msg}") {
        bar.set_style(style);
    }
    bar.set_message(format!("turn 1: {model} is reading the task"));
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

fn turn_line(turn: &TurnRecord) -> String {
    let action = match turn.calls.first() {
        Some(call) => format!(
            "{} {}{}",
            call.name,
            call.arguments,
            if call.ok { "" } else { " (failed)" }
        ),
        None => format!("says {:?}", turn.content.chars().take(60).collect::<String>()),
    };
    format!(
        "turn {:>2} [{}] {action} — prompt {} tok, {} cached, TTFT {:.2} s",
        turn.turn,
        turn.phase,
        turn.prompt_tokens,
        turn.cached_tokens,
        turn.ttft_ms / 1e3
    )
}
