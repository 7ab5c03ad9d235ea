//! `tessera bench ttft`: time to first token, in process, on the real model.
//!
//! (a) prefix sweep: a prefix of P tokens plus 64 new ones, cold (cache
//!     cleared) and warm (the prefix cached by an earlier request);
//! (b) agent replay: a ~2k-token system prompt with 20 tool schemas, then
//!     turns that each append a tool call and a ~150-token tool result;
//! (c) two sessions sharing the system prompt, interleaved turn by turn.
//! TTFT here = prefix lookup + prefill of the uncached tokens + the first
//! token's logits and its (greedy) choice. Prints a table; optionally writes JSON and an SVG plot.

use super::workload::{agent_transcript, filler};
use crate::model_files::{load_model, ModelArgs};
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;
use tessera_kv::{BlockPool, DEFAULT_BLOCK_SIZE};
use tessera_model::{KvCache, LoadedModel, LogitsFor, Runtime, Sequence};

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
}

/// One measured request.
#[derive(Debug, Clone, Copy)]
struct Sample {
    prompt_tokens: usize,
    cached_tokens: usize,
    ttft_ms: f64,
}

/// The model, a pool and a cache, reused across requests like a server's; every
/// request is logged (workload, label, whether the cache was cleared before it).
struct Runner<'a> {
    loaded: &'a LoadedModel,
    pool: BlockPool,
    kv: KvCache,
    log: Vec<serde_json::Value>,
    cleared: bool,
}

impl Runner<'_> {
    /// Empty the prefix cache: the next request starts cold.
    fn clear(&mut self) {
        self.pool.clear_cache();
        self.cleared = true;
    }

    fn request(&mut self, workload: &str, label: String, prompt: &[u32]) -> Result<Sample> {
        let cold = std::mem::take(&mut self.cleared);
        let sample = self.measure(prompt)?;
        self.log.push(json!({
            "workload": workload, "label": label, "cold": cold, "tokens": prompt,
            "tessera_ttft_ms": sample.ttft_ms, "tessera_cached_tokens": sample.cached_tokens,
        }));
        Ok(sample)
    }

    fn measure(&mut self, prompt: &[u32]) -> Result<Sample> {
        let model = &self.loaded.model;
        let started = Instant::now();
        let (mut seq, cached) = Sequence::start(
            Runtime {
                model,
                pool: &mut self.pool,
                kv: &mut self.kv,
            },
            prompt,
        );
        let outcome = seq.feed(
            Runtime {
                model,
                pool: &mut self.pool,
                kv: &mut self.kv,
            },
            &prompt[cached..],
            512,
            LogitsFor::Last,
        );
        let first = outcome.map(|logits| tessera_sample::argmax(logits.row(0)));
        let elapsed = started.elapsed();
        seq.release(&mut self.pool);
        first?.context("the model produced no finite logit")?;
        Ok(Sample {
            prompt_tokens: prompt.len(),
            cached_tokens: cached,
            ttft_ms: elapsed.as_secs_f64() * 1e3,
        })
    }
}

struct Plan {
    prefixes: Vec<usize>,
    replay_turns: usize,
    interleaved_turns: usize,
    system_tokens: usize,
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
    let loaded = load_model(&args.model)?;
    let context = loaded.model.config().max_context;
    anyhow::ensure!(
        context >= 4096 + 64,
        "the model's context ({context}) is too short for this benchmark"
    );
    let blocks = (3 * 4160usize).div_ceil(DEFAULT_BLOCK_SIZE);
    let mut runner = Runner {
        loaded: &loaded,
        pool: BlockPool::new(blocks, DEFAULT_BLOCK_SIZE),
        kv: KvCache::new(loaded.model.config(), blocks, DEFAULT_BLOCK_SIZE)?,
        log: Vec::new(),
        cleared: false,
    };
    let steps = plan.prefixes.len() * 2 + plan.replay_turns + 2 * plan.interleaved_turns;
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let sweep = prefix_sweep(&mut runner, &plan, &bar)?;
    let replay = agent_replay(&mut runner, &plan, &bar)?;
    let interleaved = interleaved_sessions(&mut runner, &plan, &bar)?;
    bar.finish_and_clear();
    print_tables(&sweep, &replay, &interleaved);
    let report = report_json(&sweep, &replay, &interleaved, runner.pool.counters());
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        plot_sweep(path, &sweep)?;
    }
    if let Some(path) = &args.prompts {
        std::fs::write(path, serde_json::to_string(&runner.log)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// (prefix tokens, cold, warm)
type SweepRow = (usize, Sample, Sample);

fn prefix_sweep(runner: &mut Runner<'_>, plan: &Plan, bar: &ProgressBar) -> Result<Vec<SweepRow>> {
    let tokenizer = &runner.loaded.tokenizer;
    let mut rows = Vec::new();
    for &prefix_len in &plan.prefixes {
        let prefix = filler(tokenizer, 1, prefix_len)?;
        let prompt = |seed| -> Result<Vec<u32>> { Ok([prefix.clone(), filler(tokenizer, seed, 64)?].concat()) };
        let (cold_prompt, warm_prompt) = (prompt(2)?, prompt(3)?);
        bar.set_message(format!("prefix {prefix_len}: cold"));
        runner.clear();
        let cold = runner.request("prefix_sweep", format!("{prefix_len} cold"), &cold_prompt)?;
        bar.inc(1);
        bar.set_message(format!("prefix {prefix_len}: warm"));
        let warm = runner.request("prefix_sweep", format!("{prefix_len} warm"), &warm_prompt)?;
        bar.inc(1);
        rows.push((prefix_len, cold, warm));
    }
    Ok(rows)
}

fn agent_replay(runner: &mut Runner<'_>, plan: &Plan, bar: &ProgressBar) -> Result<Vec<Sample>> {
    let transcript = agent_transcript(&runner.loaded.tokenizer, 1, plan.system_tokens, plan.replay_turns)?;
    runner.clear();
    let mut samples = Vec::new();
    for (turn, prompt) in transcript.turns.iter().enumerate() {
        bar.set_message(format!("agent replay turn {}", turn + 1));
        samples.push(runner.request("agent_replay", format!("turn {}", turn + 1), prompt)?);
        bar.inc(1);
    }
    Ok(samples)
}

/// (session, turn, sample)
type SessionTurn = (usize, usize, Sample);

fn interleaved_sessions(runner: &mut Runner<'_>, plan: &Plan, bar: &ProgressBar) -> Result<Vec<SessionTurn>> {
    let tokenizer = &runner.loaded.tokenizer;
    let sessions = [
        agent_transcript(tokenizer, 2, plan.system_tokens, plan.interleaved_turns)?,
        agent_transcript(tokenizer, 3, plan.system_tokens, plan.interleaved_turns)?,
    ];
    runner.clear();
    let mut out = Vec::new();
    for turn in 0..plan.interleaved_turns {
        for (session, transcript) in sessions.iter().enumerate() {
            bar.set_message(format!("interleaved: session {} turn {}", session + 1, turn + 1));
            let label = format!("session {} turn {}", session + 1, turn + 1);
            out.push((
                session + 1,
                turn + 1,
                runner.request("interleaved", label, &transcript.turns[turn])?,
            ));
            bar.inc(1);
        }
    }
    Ok(out)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Token-weighted hit rate of the samples (cached / prompt tokens).
fn hit_rate<'s>(samples: impl Iterator<Item = &'s Sample>) -> f64 {
    let (cached, total) = samples.fold((0, 0), |(c, t), s| (c + s.cached_tokens, t + s.prompt_tokens));
    cached as f64 / total.max(1) as f64
}

fn print_tables(sweep: &[SweepRow], replay: &[Sample], interleaved: &[SessionTurn]) {
    println!("prefix sweep (+64 new tokens)");
    println!(
        "{:>8} {:>12} {:>12} {:>8} {:>8}",
        "prefix", "cold ms", "warm ms", "cached", "warm/cold"
    );
    for (prefix, cold, warm) in sweep {
        println!(
            "{prefix:>8} {:>12.1} {:>12.1} {:>8} {:>8.3}",
            cold.ttft_ms,
            warm.ttft_ms,
            warm.cached_tokens,
            warm.ttft_ms / cold.ttft_ms
        );
    }
    println!("\nagent replay");
    println!("{:>5} {:>8} {:>8} {:>10}", "turn", "prompt", "cached", "ttft ms");
    for (i, s) in replay.iter().enumerate() {
        println!(
            "{:>5} {:>8} {:>8} {:>10.1}",
            i + 1,
            s.prompt_tokens,
            s.cached_tokens,
            s.ttft_ms
        );
    }
    println!(
        "hit rate from turn 2 (token-weighted): {:.1}%",
        100.0 * hit_rate(replay.iter().skip(1))
    );
    println!("\ninterleaved sessions");
    println!(
        "{:>8} {:>5} {:>8} {:>8} {:>10}",
        "session", "turn", "prompt", "cached", "ttft ms"
    );
    for (session, turn, s) in interleaved {
        println!(
            "{session:>8} {turn:>5} {:>8} {:>8} {:>10.1}",
            s.prompt_tokens, s.cached_tokens, s.ttft_ms
        );
    }
    println!(
        "median ttft: {:.1} ms",
        median(interleaved.iter().map(|(_, _, s)| s.ttft_ms).collect())
    );
}

fn report_json(
    sweep: &[SweepRow],
    replay: &[Sample],
    interleaved: &[SessionTurn],
    counters: tessera_kv::CacheCounters,
) -> serde_json::Value {
    json!({
        "prefix_sweep": sweep.iter().map(|(prefix, cold, warm)| json!({
            "prefix_tokens": prefix, "new_tokens": 64, "cold_ttft_ms": cold.ttft_ms,
            "warm_ttft_ms": warm.ttft_ms, "warm_cached_tokens": warm.cached_tokens,
        })).collect::<Vec<_>>(),
        "agent_replay": {
            "turns": replay.iter().enumerate().map(|(i, s)| json!({
                "turn": i + 1, "prompt_tokens": s.prompt_tokens, "cached_tokens": s.cached_tokens, "ttft_ms": s.ttft_ms,
            })).collect::<Vec<_>>(),
            "hit_rate_from_turn_2": hit_rate(replay.iter().skip(1)),
        },
        "interleaved": {
            "turns": interleaved.iter().map(|(session, turn, s)| json!({
                "session": session, "turn": turn, "prompt_tokens": s.prompt_tokens,
                "cached_tokens": s.cached_tokens, "ttft_ms": s.ttft_ms,
            })).collect::<Vec<_>>(),
            "median_ttft_ms": median(interleaved.iter().map(|(_, _, s)| s.ttft_ms).collect()),
        },
        "cache": {
            "queried_tokens": counters.queried_tokens, "hit_tokens": counters.hit_tokens,
            "evicted_blocks": counters.evicted_blocks,
        },
    })
}

fn plot_sweep(path: &PathBuf, sweep: &[SweepRow]) -> Result<()> {
    use plotters::prelude::*;
    let max_x = sweep.iter().map(|r| r.0).max().unwrap_or(1) as f64;
    let max_y = sweep.iter().map(|r| r.1.ttft_ms.max(r.2.ttft_ms)).fold(1.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    let draw = |e: &dyn std::fmt::Display| anyhow::anyhow!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| draw(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Tessera TTFT: prefix + 64 new tokens", ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max_x * 1.05, 0f64..max_y)
        .map_err(|e| draw(&e))?;
    chart
        .configure_mesh()
        .x_desc("prefix tokens")
        .y_desc("TTFT (ms)")
        .draw()
        .map_err(|e| draw(&e))?;
    let series = |pick: fn(&SweepRow) -> f64| sweep.iter().map(move |r| (r.0 as f64, pick(r))).collect::<Vec<_>>();
    chart
        .draw_series(LineSeries::new(series(|r| r.1.ttft_ms), &RED))
        .map_err(|e| draw(&e))?
        .label("cold")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    chart
        .draw_series(LineSeries::new(series(|r| r.2.ttft_ms), &BLUE))
        .map_err(|e| draw(&e))?
        .label("warm (prefix cached)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|e| draw(&e))?;
    root.present().map_err(|e| draw(&e))?;
    Ok(())
}
