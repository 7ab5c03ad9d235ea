//! `tessera bench decode`: decode speed on the real model, in process, with
//! speculation (grammar fast-forward and prompt lookup) and without.
//!
//! (a) one stream of free text (a chat answer, EOS ignored), the median of
//!     five rounds;
//! (b) 1, 2, 4, 8, 16 streams at once: the aggregate rate while every stream
//!     decodes (from the last stream's first token to the first stream's end);
//! (c) agent turns: a recorded run whose turns write files they read
//!     (`agent_turns.rs`), under `tool_choice` `auto`, greedy. Each token's
//!     stream event says whether it was forced, copied or sampled and which
//!     step made it; a step's time is shared by its tokens, which gives
//!     tokens per second per span kind.
//! Greedy outputs with and without speculation are compared token by token.
//! The agent turns (each one tool call) are set against the single-stream
//! bandwidth limit: the read bandwidth over the bytes of weights a token
//! reads. The bandwidth is the larger of `bench memory`'s reading (the best
//! of measurements before the engine starts and after it stops) and the
//! weights plain one-stream decoding read per second, which on a shared VM
//! has been the higher of the two.
//! Both settings run on one engine (a plain request opts out of drafting)
//! and take turns on every measurement, in alternating order: on a shared
//! VM the machine's speed drifts over minutes, and two engines' copies of
//! the weights sat in memory that read at different speeds, either more
//! than speculation moves free text.
//! Prints tables; optionally writes JSON, an SVG plot and the workload's
//! token ids (`scripts/bench-decode-vs-llamacpp.sh` replays them on
//! llama-server).

use super::agent_turns::agent_turns;
use super::decode_report::{plot_batched, print_tables, report_json};
use crate::model_files::{load_model, ModelArgs};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::Instant;
use tessera_api::{chat_job, Api, ApiConfig, ChatRequest, Endpoint, Message, Sampling};
use tessera_engine::{
    DraftCounts, EngineConfig, EngineHandle, Event, EventStream, GenerateRequest, SpeculationConfig, TokenOrigin,
};

/// Arguments of `tessera bench decode`.
#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Smaller run: 32 tokens per stream, streams 1, 4 and 8.
    #[arg(long)]
    quick: bool,
    /// Tokens each free-text stream generates (the single stream twice as many).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(8..=4096))]
    tokens: u64,
    /// Stream counts of the batched sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4, 8, 16])]
    streams: Vec<usize>,
    /// Most tokens an agent turn generates.
    #[arg(long, default_value_t = 384, value_parser = clap::value_parser!(u64).range(16..=4096))]
    agent_tokens: u64,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG plot of the batched sweep (aggregate tok/s against streams) to this file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Write the workload's requests as token ids, as JSON (for a replay on another engine).
    #[arg(long)]
    prompts: Option<PathBuf>,
}

/// One request's stream: each token's arrival, origin and step, in order.
#[derive(Debug, Clone)]
pub(super) struct Timeline {
    pub ids: Vec<u32>,
    pub tokens: Vec<(Instant, TokenOrigin, u64)>,
    pub speculation: DraftCounts,
}

impl Timeline {
    /// Decode rate: tokens after the first over the time since the first.
    pub fn decode_rate(&self) -> f64 {
        match (self.tokens.first(), self.tokens.last()) {
            (Some(first), Some(last)) if self.tokens.len() > 1 => {
                (self.tokens.len() - 1) as f64 / (last.0 - first.0).as_secs_f64().max(1e-9)
            }
            _ => 0.0,
        }
    }

    /// Seconds and tokens per origin: each step's time (since the previous
    /// step's last token) is shared equally by the tokens it produced; the
    /// first step (the prefill's) is left out.
    pub fn per_origin(&self) -> [(TokenOrigin, usize, f64); 3] {
        let mut out = [
            (TokenOrigin::Sampled, 0, 0.0),
            (TokenOrigin::Forced, 0, 0.0),
            (TokenOrigin::Copied, 0, 0.0),
        ];
        let steps: Vec<&[(Instant, TokenOrigin, u64)]> = self.tokens.chunk_by(|a, b| a.2 == b.2).collect();
        for pair in steps.windows(2) {
            let (previous, step) = (pair[0], pair[1]);
            let (Some(end), Some(start)) = (previous.last(), step.first()) else {
                continue;
            };
            let share = (start.0 - end.0).as_secs_f64() / step.len() as f64;
            for &(_, origin, _) in step {
                if let Some(slot) = out.iter_mut().find(|slot| slot.0 == origin) {
                    slot.1 += 1;
                    slot.2 += share;
                }
            }
        }
        out
    }
}

/// The batched sweep at one stream count.
#[derive(Debug, Clone)]
pub(super) struct BatchRow {
    pub streams: usize,
    /// Tokens per second, all streams together, while every stream decodes.
    pub aggregate: f64,
    pub timelines: Vec<Timeline>,
}

/// Everything measured under one speculation setting.
#[derive(Debug, Clone)]
pub(super) struct ModeResults {
    pub name: &'static str,
    pub single: Timeline,
    /// Each single-stream round's decode rate (tok/s), in the order they ran.
    pub single_rounds: Vec<f64>,
    pub batched: Vec<BatchRow>,
    pub agent: Vec<(&'static str, Timeline)>,
}

/// What a run measured, both settings.
pub(super) struct Results {
    pub tokens: usize,
    pub modes: Vec<ModeResults>,
    pub limit: Option<BandwidthLimit>,
}

/// The single-stream decode limit set by memory: every weight read once per
/// token, at the machine's read bandwidth measured in the same run.
#[derive(Debug, Clone, Copy)]
pub(super) struct BandwidthLimit {
    /// Read bandwidth, GB/s (`bench memory`'s sum: the best of five passes
    /// over 1 GiB, before the engine starts and after it stops).
    pub read_gb_s: f64,
    /// Weights read per second by plain one-stream decoding, GB/s (its
    /// fastest round): on a shared VM the forward, many streams of weights
    /// at once, has read faster than the one-stream sum, and a limit below
    /// what plain decoding reaches is no limit.
    pub plain_decode_gb_s: f64,
    /// Bytes of weights one token reads.
    pub weight_bytes: u64,
}

impl BandwidthLimit {
    /// The bandwidth the limit is taken at: the larger of the two readings.
    pub fn bandwidth_gb_s(&self) -> f64 {
        self.read_gb_s.max(self.plain_decode_gb_s)
    }

    /// Tokens per second one stream cannot pass without reading a weight
    /// once for several tokens.
    pub fn tokens_per_second(&self) -> f64 {
        self.bandwidth_gb_s() * 1e9 / self.weight_bytes.max(1) as f64
    }
}

/// The machine's read bandwidth now, GB/s: the best of five passes over 1 GiB.
fn best_read_bandwidth() -> Result<f64> {
    let (_, rates) = super::memory::read_bandwidth(1024, 5)?;
    Ok(rates.into_iter().fold(0f64, f64::max))
}

pub fn run(args: DecodeArgs) -> Result<()> {
    let (tokens, streams) = match args.quick {
        true => (32, vec![1, 4, 8]),
        false => (args.tokens as usize, args.streams.clone()),
    };
    if let Some(&bad) = streams.iter().find(|&&s| s == 0 || s > 64) {
        bail!("--streams: {bad} is not between 1 and 64");
    }
    let settings = [("speculation", true), (PLAIN, false)];
    let steps = settings.len() * (SINGLE_ROUNDS + streams.len() + 3);
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let plan = Plan {
        tokens,
        streams: &streams,
        agent_tokens: args.agent_tokens as usize,
    };
    // The bandwidth is measured before and after (the best kept): on a
    // shared machine one measurement can fall in a slow moment. A checkpoint
    // folder's weight bytes are not known: no limit then.
    let weight_bytes = crate::model_files::weight_bytes_per_token(&args.model)?;
    bar.set_message("memory read bandwidth");
    let before = weight_bytes.map(|_| best_read_bandwidth()).transpose()?;
    // One engine and one copy of the weights for both settings: each request
    // says whether it drafts, and the settings take turns on every measurement.
    let engine = start_engine(&args.model, &plan)?;
    let workload = Workload::new(&Api::new(engine.clone(), ApiConfig::default()), &plan)?;
    let modes = measure(&engine, &settings, &workload, &plan, &bar)?;
    engine.shutdown().wait()?;
    bar.set_message("memory read bandwidth");
    let limit = match (weight_bytes, before) {
        (Some(weight_bytes), Some(before)) => Some(BandwidthLimit {
            read_gb_s: before.max(best_read_bandwidth()?),
            plain_decode_gb_s: plain_single_rate(&modes) * weight_bytes as f64 / 1e9,
            weight_bytes,
        }),
        _ => None,
    };
    bar.finish_and_clear();
    let results = Results { tokens, modes, limit };
    print_tables(&results);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report_json(&results))?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        plot_batched(path, &results)?;
    }
    if let Some(path) = &args.prompts {
        std::fs::write(path, serde_json::to_string(&workload.to_json(&results))?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

struct Plan<'a> {
    tokens: usize,
    streams: &'a [usize],
    agent_tokens: usize,
}

/// The requests of a run, kept to write the workload out.
pub(super) struct Workload {
    single: GenerateRequest,
    stories: Vec<GenerateRequest>,
    agent: Vec<(&'static str, GenerateRequest)>,
}

impl Workload {
    /// The run's requests: one story per stream (the single stream's twice
    /// as long) and the agent turns.
    fn new(api: &Api, plan: &Plan<'_>) -> Result<Self> {
        let most = plan.streams.iter().copied().max().unwrap_or(1);
        let stories = story_requests(api, most, plan.tokens)?;
        let single = GenerateRequest {
            max_tokens: 2 * plan.tokens,
            ..stories[0].clone()
        };
        let agent = agent_turns(api, plan.agent_tokens)?
            .into_iter()
            .map(|turn| (turn.name, turn.request))
            .collect();
        Ok(Self { single, stories, agent })
    }

    fn to_json(&self, results: &Results) -> serde_json::Value {
        let lengths = results.modes.first().map(|m| &m.agent);
        serde_json::json!({
            "single": {"prompt": self.single.prompt, "max_tokens": self.single.max_tokens},
            "stories": self.stories.iter().map(|r| &r.prompt).collect::<Vec<_>>(),
            "tokens_per_stream": self.stories.first().map(|r| r.max_tokens),
            "streams": results.modes.first().map(|m| m.batched.iter().map(|b| b.streams).collect::<Vec<_>>()),
            "agent": self.agent.iter().enumerate().map(|(i, (name, r))| serde_json::json!({
                "name": name, "prompt": r.prompt,
                // llama-server replays as many tokens as Tessera's reply had.
                "tokens": lengths.and_then(|turns| turns.get(i)).map(|(_, t)| t.ids.len()),
            })).collect::<Vec<_>>(),
        })
    }
}

/// The engine both settings run on (speculation on; a plain request opts out).
fn start_engine(model: &ModelArgs, plan: &Plan<'_>) -> Result<EngineHandle> {
    let most = plan.streams.iter().copied().max().unwrap_or(1);
    let config = EngineConfig {
        speculation: SpeculationConfig::default(),
        max_running: most.max(4),
        kv_dtype: model.kv_dtype,
        ..EngineConfig::for_tokens(16 * 1024 + most * (plan.tokens + 256))
    };
    Ok(EngineHandle::start(load_model(model)?, config)?)
}

/// Runs each measurement under every setting, back to back, the order
/// alternating from one measurement to the next.
struct Alternation<'a> {
    engine: &'a EngineHandle,
    sides: &'a [(&'static str, bool)],
    bar: &'a ProgressBar,
    count: usize,
}

impl Alternation<'_> {
    /// `requests` under every setting, each side's timelines in side order.
    fn each(&mut self, label: &str, requests: &[GenerateRequest]) -> Result<Vec<Vec<Timeline>>> {
        let mut order: Vec<usize> = (0..self.sides.len()).collect();
        if self.count % 2 == 1 {
            order.reverse();
        }
        self.count += 1;
        let mut runs = vec![Vec::new(); self.sides.len()];
        for i in order {
            let (name, speculate) = self.sides[i];
            self.bar.set_message(format!("{name}: {label}"));
            let requests = requests.iter().map(|r| GenerateRequest { speculate, ..r.clone() });
            runs[i] = run_together(self.engine, requests.collect())?;
            self.bar.inc(1);
        }
        Ok(runs)
    }
}

/// Every measurement under every setting (see [`Alternation`]): the single
/// stream, the batched sweep, the agent turns.
fn measure(
    engine: &EngineHandle,
    sides: &[(&'static str, bool)],
    workload: &Workload,
    plan: &Plan<'_>,
    bar: &ProgressBar,
) -> Result<Vec<ModeResults>> {
    let mut turns = Alternation {
        engine,
        sides,
        bar,
        count: 0,
    };
    // The single stream is short, and the setting that matters there (free
    // text, where speculation should cost nothing) moves by a few percent:
    // several rounds, each side's median kept.
    let mut single = vec![Vec::new(); sides.len()];
    for _ in 0..SINGLE_ROUNDS {
        let runs = turns.each("one stream", std::slice::from_ref(&workload.single))?;
        for (rounds, timelines) in single.iter_mut().zip(runs) {
            rounds.extend(timelines.into_iter().take(1));
        }
    }
    let mut batched = vec![Vec::new(); sides.len()];
    for &streams in plan.streams {
        let runs = turns.each(&format!("{streams} streams"), &workload.stories[..streams])?;
        for (rows, timelines) in batched.iter_mut().zip(runs) {
            rows.push(BatchRow {
                streams,
                aggregate: aggregate_rate(&timelines),
                timelines,
            });
        }
    }
    let mut agent = vec![Vec::new(); sides.len()];
    for (name, request) in &workload.agent {
        let runs = turns.each(&format!("agent turn {name}"), std::slice::from_ref(request))?;
        for (side_turns, timelines) in agent.iter_mut().zip(runs) {
            side_turns.extend(timelines.into_iter().take(1).map(|timeline| (*name, timeline)));
        }
    }
    let results = sides.iter().zip(single).zip(batched).zip(agent);
    results
        .map(|((((name, _), single), batched), agent)| {
            let single_rounds = single.iter().map(Timeline::decode_rate).collect();
            let single = median_rate(single).context("the single stream ran no request")?;
            Ok(ModeResults {
                name,
                single,
                single_rounds,
                batched,
                agent,
            })
        })
        .collect()
}

const TOPICS: &[&str] = &[
    "a lighthouse keeper",
    "a robot gardener",
    "a lost map",
    "a city under snow",
    "a river that sings",
    "an old compiler",
    "a night train",
    "a clockmaker's apprentice",
    "a desert observatory",
    "a library of maps",
    "a ship in a bottle",
    "a mountain village",
    "a forgotten password",
    "a cat who reads",
    "a bridge of glass",
    "a rainy market",
];

/// `count` chat requests for a short story each (distinct topics, then
/// numbered), greedy, `tokens` tokens with EOS ignored.
fn story_requests(api: &Api, count: usize, tokens: usize) -> Result<Vec<GenerateRequest>> {
    (0..count)
        .map(|i| {
            let topic = TOPICS[i % TOPICS.len()];
            let user = format!("Write a short story about {topic} (number {}).", i + 1);
            let request = ChatRequest {
                max_tokens: Some(tokens as u64),
                ignore_eos: true,
                sampling: greedy(),
                ..ChatRequest::new(vec![Message::User(user)])
            };
            let job = chat_job(api, Endpoint::Cli, request).map_err(|e| anyhow::anyhow!("story {i}: {e}"))?;
            Ok(job.request)
        })
        .collect()
}

/// Greedy decoding (the API's default samples).
pub(super) fn greedy() -> Sampling {
    Sampling {
        temperature: Some(0.0),
        ..Sampling::default()
    }
}

/// Submit every request at once; each stream is read on its own thread so
/// that arrivals are stamped as they happen.
fn run_together(engine: &EngineHandle, requests: Vec<GenerateRequest>) -> Result<Vec<Timeline>> {
    let streams: Vec<EventStream> = requests
        .into_iter()
        .map(|request| engine.submit(request))
        .collect::<Result<_, _>>()?;
    std::thread::scope(|scope| {
        let readers: Vec<_> = streams
            .into_iter()
            .map(|stream| scope.spawn(move || read_timeline(stream)))
            .collect();
        readers
            .into_iter()
            .map(|reader| reader.join().unwrap_or_else(|_| bail!("a stream reader panicked")))
            .collect()
    })
}

fn read_timeline(mut stream: EventStream) -> Result<Timeline> {
    let mut timeline = Timeline {
        ids: Vec::new(),
        tokens: Vec::new(),
        speculation: DraftCounts::default(),
    };
    loop {
        match stream.blocking_next() {
            Some(Event::Token { id, origin, step, .. }) => {
                timeline.ids.push(id);
                timeline.tokens.push((Instant::now(), origin, step));
            }
            Some(Event::Finished(completion)) => {
                timeline.speculation = completion.usage.speculation;
                return Ok(timeline);
            }
            Some(Event::Failed(error)) => return Err(error.into()),
            None => bail!("the engine stopped mid-request"),
        }
    }
}

/// The setting without drafts.
const PLAIN: &str = "plain";

/// Rounds of the single-stream measurement per setting.
const SINGLE_ROUNDS: usize = 5;

/// The fastest one-stream rate of plain decoding (no drafts): one read of
/// the weights per token.
fn plain_single_rate(modes: &[ModeResults]) -> f64 {
    let plain = modes.iter().filter(|m| m.name == PLAIN);
    plain.flat_map(|m| m.single_rounds.iter().copied()).fold(0f64, f64::max)
}

/// The timeline of median decode rate among `rounds`.
fn median_rate(mut rounds: Vec<Timeline>) -> Option<Timeline> {
    rounds.sort_by(|a, b| a.decode_rate().total_cmp(&b.decode_rate()));
    let middle = rounds.len() / 2;
    rounds.into_iter().nth(middle)
}

/// Tokens per second of all streams together while every one of them was
/// decoding: from the last stream's first token to the first stream's last.
fn aggregate_rate(timelines: &[Timeline]) -> f64 {
    let first = |t: &Timeline| t.tokens.first().map(|x| x.0);
    let last = |t: &Timeline| t.tokens.last().map(|x| x.0);
    let (Some(start), Some(end)) = (
        timelines.iter().filter_map(first).max(),
        timelines.iter().filter_map(last).min(),
    ) else {
        return 0.0;
    };
    if end <= start {
        return 0.0;
    }
    let inside: usize = timelines
        .iter()
        .map(|t| t.tokens.iter().filter(|x| x.0 > start && x.0 <= end).count())
        .sum();
    inside as f64 / (end - start).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A timeline of (milliseconds, origin, step) entries, on one clock for every timeline.
    fn timeline(entries: &[(u64, TokenOrigin, u64)]) -> Timeline {
        static ZERO: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let zero = *ZERO.get_or_init(Instant::now);
        Timeline {
            ids: entries.iter().map(|e| e.2 as u32).collect(),
            tokens: entries
                .iter()
                .map(|&(ms, origin, step)| (zero + Duration::from_millis(ms), origin, step))
                .collect(),
            speculation: DraftCounts::default(),
        }
    }

    /// A mode whose single-stream rounds decoded at `rates` (tok/s, 11 tokens, 10 gaps each).
    fn mode(name: &'static str, rates: &[f64]) -> ModeResults {
        let rounds: Vec<Timeline> = rates
            .iter()
            .map(|&rate| {
                let gap = (1000.0 / rate) as u64;
                timeline(&(0..11).map(|i| (i * gap, TokenOrigin::Sampled, i)).collect::<Vec<_>>())
            })
            .collect();
        ModeResults {
            name,
            single_rounds: rounds.iter().map(Timeline::decode_rate).collect(),
            single: median_rate(rounds).unwrap(),
            batched: Vec::new(),
            agent: Vec::new(),
        }
    }

    #[test]
    fn the_limit_is_never_below_what_plain_decoding_reached() {
        // Speculation's 100 tok/s reads a weight once for several tokens: not evidence.
        let modes = [mode("speculation", &[100.0]), mode(PLAIN, &[20.0, 50.0, 40.0])];
        let plain = plain_single_rate(&modes);
        assert!((plain - 50.0).abs() < 1e-9, "{plain}");
        let weight_bytes = 1_000_000_000;
        let limit = |read_gb_s| BandwidthLimit {
            read_gb_s,
            plain_decode_gb_s: plain * weight_bytes as f64 / 1e9,
            weight_bytes,
        };
        // `bench memory` read 30 GB/s, plain decoding 50 GB/s of weights: the limit is 50 tok/s.
        assert!((limit(30.0).tokens_per_second() - 50.0).abs() < 1e-9);
        assert!((limit(60.0).tokens_per_second() - 60.0).abs() < 1e-9);
    }

    #[test]
    fn a_steps_time_is_shared_by_its_tokens_and_the_prefill_step_is_left_out() {
        use TokenOrigin::*;
        // Step 1 (prefill) at 100 ms; step 2 at 140 ms: two copied and a sampled token;
        // step 3 at 200 ms: one sampled token.
        let t = timeline(&[
            (100, Sampled, 1),
            (140, Copied, 2),
            (140, Copied, 2),
            (140, Sampled, 2),
            (200, Sampled, 3),
        ]);
        let spans = t.per_origin();
        assert_eq!((spans[0].0, spans[0].1), (Sampled, 2));
        assert!((spans[0].2 - (0.040 / 3.0 + 0.060)).abs() < 1e-9, "{spans:?}");
        assert_eq!((spans[2].0, spans[2].1), (Copied, 2));
        assert!((spans[2].2 - 2.0 * 0.040 / 3.0).abs() < 1e-9);
        assert_eq!(spans[1].1, 0);
        assert!((t.decode_rate() - 4.0 / 0.1).abs() < 1e-6);
    }

    #[test]
    fn the_aggregate_counts_only_while_every_stream_decodes() {
        use TokenOrigin::Sampled;
        // Stream a decodes from 0 to 100 ms, stream b from 50 to 150 ms: the window is 50..100.
        let a = timeline(&[(0, Sampled, 1), (50, Sampled, 2), (75, Sampled, 3), (100, Sampled, 4)]);
        let b = timeline(&[(50, Sampled, 2), (75, Sampled, 3), (100, Sampled, 4), (150, Sampled, 5)]);
        // Inside (50, 100]: a's 75 and 100, b's 75 and 100.
        assert!((aggregate_rate(&[a.clone(), b]) - 4.0 / 0.05).abs() < 1e-6);
        assert_eq!(aggregate_rate(&[]), 0.0);
        let later = timeline(&[(200, Sampled, 1), (300, Sampled, 2)]);
        assert_eq!(aggregate_rate(&[a, later]), 0.0, "no moment when both decode");
    }
}
