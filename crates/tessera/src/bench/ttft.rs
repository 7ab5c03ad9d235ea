//! `tessera bench ttft`: time to first token, in process, on the real model.
//!
//! (a) prefix sweep: a prefix of P tokens plus 64 new ones, cold (cache
//!     cleared) and warm (the prefix cached by an earlier request);
//! (b) agent replay: a ~2k-token system prompt with 20 tool schemas, then
//!     turns that each append a tool call and a ~150-token tool result;
//!     (each turn's tool call is then put in the cache untimed, as decoding it
//!     would have been in a real loop);
//! (c) two sessions sharing the system prompt, interleaved turn by turn;
//! (d) restart: the engine saves its prefix cache, a fresh one restores it and
//!     answers the sweep's longest warm prompt again.
//! Requests go through the engine (`EngineHandle`), one at a time. TTFT =
//! submission until the first token's event: queueing, prefix lookup, prefill
//! of the uncached tokens, the first token's logits and its (greedy) choice.
//! Prints tables; optionally writes JSON, an SVG plot and the request log.

use super::report::{plot_sweep, print_tables, report_json};
use super::workload::{agent_transcript, filler};
use crate::model_files::{load_model, ModelArgs};
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;
use tessera_engine::{EngineConfig, EngineHandle, EngineMetrics, Event, GenerateRequest};

/// Arguments of `tessera bench ttft`.
#[derive(Debug, clap::Args)]
pub struct TtftArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Smaller run: prefixes up to 2k tokens, 4 replay turns, 3 interleaved turns per session.
    #[arg(long)]
    quick: bool,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG plot of the prefix sweep (cold vs warm TTFT) to this file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Write every request's token ids, in order, as JSON (to replay the same workload on
    /// another engine: scripts/bench-ttft-vs-llamacpp.sh).
    #[arg(long)]
    prompts: Option<PathBuf>,
    /// Persist the prefix cache here (restored at start, saved at exit); the restart
    /// measurement uses it too. Default: a temporary folder, removed afterwards.
    #[arg(long, value_name = "DIR")]
    kv_cache_dir: Option<PathBuf>,
}

/// One measured request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sample {
    pub prompt_tokens: usize,
    pub cached_tokens: usize,
    pub ttft_ms: f64,
}

/// An engine reused across requests like a server's, one request at a time;
/// every request is logged (workload, label, whether the cache was cleared or
/// the engine restarted before it, whether it was timed).
struct Runner {
    engine: EngineHandle,
    config: EngineConfig,
    log: Vec<serde_json::Value>,
    cleared: bool,
}

impl Runner {
    fn start(args: &ModelArgs, config: EngineConfig) -> Result<Self> {
        let engine = EngineHandle::start(load_model(args)?, config.clone())?;
        Ok(Self {
            engine,
            config,
            log: Vec::new(),
            cleared: false,
        })
    }

    /// Empty the prefix cache: the next request starts cold.
    fn clear(&mut self) -> Result<()> {
        self.engine.clear_prefix_cache().wait()?;
        self.cleared = true;
        Ok(())
    }

    /// Shut the engine down (saving its prefix cache) and start a fresh one from the saved file.
    fn restart(&mut self, args: &ModelArgs) -> Result<()> {
        self.engine.shutdown().wait()?;
        self.engine = EngineHandle::start(load_model(args)?, self.config.clone())?;
        Ok(())
    }

    fn request(&mut self, workload: &str, label: String, prompt: &[u32]) -> Result<Sample> {
        self.logged(workload, label, prompt, true)
    }

    /// Put an assistant reply into the cache as decoding it would (untimed; logged
    /// so a replay on another engine does the same).
    fn absorb_reply(&mut self, workload: &str, label: String, tokens: &[u32]) -> Result<()> {
        self.logged(workload, label, tokens, false).map(|_| ())
    }

    fn logged(&mut self, workload: &str, label: String, prompt: &[u32], timed: bool) -> Result<Sample> {
        // An untimed request leaves the "cache was cleared" mark for the next timed one.
        let cold = timed && std::mem::take(&mut self.cleared);
        let sample = self.measure(prompt)?;
        self.log.push(json!({
            "workload": workload, "label": label, "cold": cold, "tokens": prompt, "timed": timed,
            "tessera_ttft_ms": sample.ttft_ms, "tessera_cached_tokens": sample.cached_tokens,
        }));
        Ok(sample)
    }

    /// Submit `prompt` for one token; TTFT = submission until the token event arrives.
    fn measure(&mut self, prompt: &[u32]) -> Result<Sample> {
        let started = Instant::now();
        let request = GenerateRequest {
            stop_at_eos: false,
            ..GenerateRequest::greedy(prompt.to_vec(), 1)
        };
        let mut stream = self.engine.submit(request)?;
        let mut ttft = None;
        loop {
            match stream.blocking_next() {
                Some(Event::Token { .. }) => ttft = ttft.or(Some(started.elapsed())),
                Some(Event::Finished(completion)) => {
                    let ttft = ttft.context("the request finished without a token")?;
                    return Ok(Sample {
                        prompt_tokens: prompt.len(),
                        cached_tokens: completion.usage.cached_tokens,
                        ttft_ms: ttft.as_secs_f64() * 1e3,
                    });
                }
                Some(Event::Failed(error)) => return Err(error.into()),
                None => anyhow::bail!("the engine stopped mid-request"),
            }
        }
    }
}

struct Plan {
    prefixes: Vec<usize>,
    replay_turns: usize,
    interleaved_turns: usize,
    system_tokens: usize,
}

/// Results of every workload.
pub(super) struct Results {
    pub sweep: Vec<SweepRow>,
    pub replay: Vec<Sample>,
    pub interleaved: Vec<SessionTurn>,
    pub restart: RestartRow,
    pub metrics: EngineMetrics,
}

pub fn run(args: TtftArgs) -> Result<()> {
    let plan = Plan {
        prefixes: if args.quick {
            vec![256, 512, 1024, 2048]
        } else {
            vec![256, 512, 1024, 2048, 4096]
        },
        replay_turns: if args.quick { 4 } else { 10 },
        interleaved_turns: if args.quick { 3 } else { 6 },
        system_tokens: 2048,
    };
    let temporary = std::env::temp_dir().join(format!("tessera-bench-kv-{}", std::process::id()));
    let kv_dir = args.kv_cache_dir.clone().unwrap_or_else(|| temporary.clone());
    let outcome = run_workloads(&args, &plan, kv_dir);
    if args.kv_cache_dir.is_none() {
        let _ = std::fs::remove_dir_all(&temporary);
    }
    let (results, log) = outcome?;
    print_tables(&results);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report_json(&results))?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        plot_sweep(path, &results.sweep)?;
    }
    if let Some(path) = &args.prompts {
        std::fs::write(path, serde_json::to_string(&log)?).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn run_workloads(args: &TtftArgs, plan: &Plan, kv_dir: PathBuf) -> Result<(Results, Vec<serde_json::Value>)> {
    let config = EngineConfig {
        kv_cache_dir: Some(kv_dir),
        model_fingerprint: Some(crate::model_files::fingerprint(&args.model)?),
        kv_dtype: args.model.kv_dtype,
        ..EngineConfig::for_tokens(3 * 4160)
    };
    let mut runner = Runner::start(&args.model, config)?;
    let context = runner.engine.model_config().max_context;
    anyhow::ensure!(
        context >= 4096 + 64,
        "the model's context ({context}) is too short for this benchmark"
    );
    let steps = plan.prefixes.len() * 2 + 1 + plan.replay_turns + 2 * plan.interleaved_turns;
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let sweep = prefix_sweep(&mut runner, plan, &bar)?;
    let restart = restart_warm(&mut runner, &args.model, &sweep, &bar)?;
    let replay = agent_replay(&mut runner, plan, &bar)?;
    let interleaved = interleaved_sessions(&mut runner, plan, &bar)?;
    let metrics = runner.engine.metrics().wait()?;
    bar.finish_and_clear();
    runner.engine.shutdown().wait()?;
    let results = Results {
        sweep,
        replay,
        interleaved,
        restart,
        metrics,
    };
    Ok((results, runner.log))
}

/// (prefix tokens, cold, warm)
pub(super) type SweepRow = (usize, Sample, Sample);

fn prefix_sweep(runner: &mut Runner, plan: &Plan, bar: &ProgressBar) -> Result<Vec<SweepRow>> {
    let engine = runner.engine.clone();
    let tokenizer = engine.tokenizer();
    let mut rows = Vec::new();
    for &prefix_len in &plan.prefixes {
        let prefix = filler(tokenizer, 1, prefix_len)?;
        let prompt = |seed| -> Result<Vec<u32>> { Ok([prefix.clone(), filler(tokenizer, seed, 64)?].concat()) };
        let (cold_prompt, warm_prompt) = (prompt(2)?, prompt(3)?);
        bar.set_message(format!("prefix {prefix_len}: cold"));
        runner.clear()?;
        let cold = runner.request("prefix_sweep", format!("{prefix_len} cold"), &cold_prompt)?;
        bar.inc(1);
        bar.set_message(format!("prefix {prefix_len}: warm"));
        let warm = runner.request("prefix_sweep", format!("{prefix_len} warm"), &warm_prompt)?;
        bar.inc(1);
        rows.push((prefix_len, cold, warm));
    }
    Ok(rows)
}

/// Each turn is timed to its first token; the assistant's tool call that ends the
/// turn is then put in the cache untimed, as decoding it would have.
fn agent_replay(runner: &mut Runner, plan: &Plan, bar: &ProgressBar) -> Result<Vec<Sample>> {
    let transcript = agent_transcript(runner.engine.tokenizer(), 1, plan.system_tokens, plan.replay_turns)?;
    runner.clear()?;
    let mut samples = Vec::new();
    for (turn, prompt) in transcript.turns.iter().enumerate() {
        bar.set_message(format!("agent replay turn {}", turn + 1));
        samples.push(runner.request("agent_replay", format!("turn {}", turn + 1), prompt)?);
        if let Some(reply) = transcript.replies.get(turn) {
            runner.absorb_reply("agent_replay", format!("turn {} reply", turn + 1), reply)?;
        }
        bar.inc(1);
    }
    Ok(samples)
}

/// (session, turn, sample)
pub(super) type SessionTurn = (usize, usize, Sample);

/// Two new sessions taking turns on the same engine. Not cleared first: like a
/// server that has served the replay, it holds the shared system prompt.
fn interleaved_sessions(runner: &mut Runner, plan: &Plan, bar: &ProgressBar) -> Result<Vec<SessionTurn>> {
    let engine = runner.engine.clone();
    let sessions = [
        agent_transcript(engine.tokenizer(), 2, plan.system_tokens, plan.interleaved_turns)?,
        agent_transcript(engine.tokenizer(), 3, plan.system_tokens, plan.interleaved_turns)?,
    ];
    let mut out = Vec::new();
    for turn in 0..plan.interleaved_turns {
        for (session, transcript) in sessions.iter().enumerate() {
            bar.set_message(format!("interleaved: session {} turn {}", session + 1, turn + 1));
            let label = format!("session {} turn {}", session + 1, turn + 1);
            let sample = runner.request("interleaved", label.clone(), &transcript.turns[turn])?;
            out.push((session + 1, turn + 1, sample));
            if let Some(reply) = transcript.replies.get(turn) {
                runner.absorb_reply("interleaved", format!("{label} reply"), reply)?;
            }
            bar.inc(1);
        }
    }
    Ok(out)
}

/// The sweep's longest warm prompt again, after the engine restarted from its
/// saved cache, against the sweep's cold TTFT for that length.
#[derive(Debug, Clone, Copy)]
pub(super) struct RestartRow {
    pub cold: Sample,
    pub restored: Sample,
}

fn restart_warm(runner: &mut Runner, args: &ModelArgs, sweep: &[SweepRow], bar: &ProgressBar) -> Result<RestartRow> {
    let (prefix, cold, _) = *sweep.last().context("the prefix sweep is empty")?;
    let tokenizer = runner.engine.tokenizer();
    let prompt = [filler(tokenizer, 1, prefix)?, filler(tokenizer, 3, 64)?].concat();
    bar.set_message("restart: saving the cache, restarting, restoring");
    runner.restart(args)?;
    let restored = runner.request("restart", format!("{prefix} after restart"), &prompt)?;
    if let Some(entry) = runner.log.last_mut() {
        entry["restart"] = json!(true);
    }
    bar.inc(1);
    Ok(RestartRow { cold, restored })
}
