//! `tessera generate`: one prompt, one streamed completion, speed figures at the end.

use crate::model_files::{load_model, ModelArgs};
use anyhow::{bail, Context, Result};
use std::io::{IsTerminal, Read, Write};
use std::time::{Duration, Instant};
use tessera_kv::{BlockPool, DEFAULT_BLOCK_SIZE};
use tessera_model::{ChatMessage, KvCache, LoadedModel, Logits, LogitsFor, Runtime, Sequence, TextStream};
use tessera_sample::{Sampler, SamplingParams};

/// Arguments of `tessera generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The prompt; read from stdin when absent.
    #[arg(long, short)]
    prompt: Option<String>,
    /// Wrap the prompt in the model's chat template as a user message.
    #[arg(long)]
    chat: bool,
    /// A system message (implies --chat).
    #[arg(long)]
    system: Option<String>,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Sampling temperature; 0 = greedy (deterministic).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Nucleus sampling: keep the smallest set of tokens with this much probability (1 = off).
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Keep only the k most likely tokens (0 = off).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Drop tokens less likely than min-p × the most likely one (0 = off).
    #[arg(long, default_value_t = 0.0)]
    min_p: f32,
    /// Repetition penalty for tokens already present (1 = off).
    #[arg(long, default_value_t = 1.0)]
    repeat_penalty: f32,
    /// Random seed for sampling.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Prompt tokens per forward pass during prefill.
    #[arg(long, default_value_t = 512)]
    prefill_chunk: usize,
    /// Keep generating past end-of-turn tokens until --max-tokens (benchmarks).
    #[arg(long)]
    ignore_eos: bool,
    /// End with the timing as one JSON line on stderr instead of the human summary.
    #[arg(long)]
    json_stats: bool,
}

/// Timing of one generation.
struct Timing {
    prompt_tokens: usize,
    prefill: Duration,
    generated: usize,
    /// Forward passes after the prefill (one per generated token but the last).
    decode_steps: usize,
    decode: Duration,
}

pub fn run(args: GenerateArgs) -> Result<()> {
    let params = SamplingParams {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        repetition_penalty: args.repeat_penalty,
        seed: args.seed,
    };
    let mut sampler = Sampler::new(params)?;
    if args.max_tokens == 0 {
        bail!("--max-tokens must be at least 1");
    }
    let prompt_text = read_prompt(args.prompt.as_deref())?;
    let loaded = load_model(&args.model)?;
    let text = render_prompt(&loaded, &prompt_text, args.chat, args.system.as_deref())?;
    let prompt = loaded.tokenizer.encode(&text)?;
    if prompt.is_empty() {
        bail!("the prompt is empty");
    }
    let context = loaded.model.config().max_context;
    if prompt.len() >= context {
        bail!(
            "the prompt is {} tokens, over the model's context of {context} tokens (one is needed to generate)",
            prompt.len()
        );
    }
    let budget = (prompt.len() + args.max_tokens).min(context);
    let blocks = budget.div_ceil(DEFAULT_BLOCK_SIZE);
    let mut generation = Generation {
        loaded: &loaded,
        sampler: &mut sampler,
        seq: Sequence::new(),
        pool: BlockPool::new(blocks, DEFAULT_BLOCK_SIZE),
        kv: KvCache::new(loaded.model.config(), blocks, DEFAULT_BLOCK_SIZE)?,
    };
    let outcome = generation.stream(&prompt, budget, args.prefill_chunk, args.ignore_eos);
    generation.seq.release(&mut generation.pool);
    let timing = outcome?;
    if args.json_stats {
        report_json(&timing);
    } else {
        report(&timing);
    }
    Ok(())
}

fn read_prompt(given: Option<&str>) -> Result<String> {
    if let Some(prompt) = given {
        return Ok(prompt.to_string());
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        bail!("no prompt: pass --prompt \"…\" or pipe text on stdin");
    }
    let mut text = String::new();
    stdin
        .lock()
        .read_to_string(&mut text)
        .context("reading the prompt from stdin")?;
    Ok(text)
}

fn render_prompt(loaded: &LoadedModel, prompt: &str, chat: bool, system: Option<&str>) -> Result<String> {
    if !chat && system.is_none() {
        return Ok(prompt.to_string());
    }
    let mut messages = Vec::new();
    if let Some(system) = system {
        messages.push(ChatMessage::new("system", system));
    }
    messages.push(ChatMessage::new("user", prompt));
    Ok(loaded.template.render(&messages, true)?)
}

/// One sequence's run: the model, the sampler and the cache it writes.
struct Generation<'a> {
    loaded: &'a LoadedModel,
    sampler: &'a mut Sampler,
    seq: Sequence,
    pool: BlockPool,
    kv: KvCache,
}

impl Generation<'_> {
    /// Prefill, then sample and print tokens until a stop token or the budget.
    fn stream(&mut self, prompt: &[u32], budget: usize, chunk: usize, ignore_eos: bool) -> Result<Timing> {
        let started = Instant::now();
        let mut logits = self.feed(prompt, chunk)?;
        let prefill = started.elapsed();
        let decode_start = Instant::now();
        let mut text = TextStream::new();
        let mut history = prompt.to_vec();
        let mut stdout = std::io::stdout().lock();
        let (mut generated, mut decode_steps) = (0, 0);
        while self.seq.len() < budget {
            let next = self.sampler.sample(logits.row_mut(0), &history)?;
            generated += 1;
            if self.loaded.tokenizer.is_stop(next) && !ignore_eos {
                break;
            }
            history.push(next);
            if let Some(piece) = text.push(&self.loaded.tokenizer, next)? {
                stdout.write_all(piece.as_bytes())?;
                stdout.flush()?;
            }
            if self.seq.len() + 1 > budget {
                break;
            }
            logits = self.feed(&[next], 1)?;
            decode_steps += 1;
        }
        writeln!(stdout)?;
        Ok(Timing {
            prompt_tokens: prompt.len(),
            prefill,
            generated,
            decode_steps,
            decode: decode_start.elapsed(),
        })
    }

    fn feed(&mut self, tokens: &[u32], chunk: usize) -> Result<Logits> {
        let runtime = Runtime {
            model: &self.loaded.model,
            pool: &mut self.pool,
            kv: &mut self.kv,
        };
        Ok(self.seq.feed(runtime, tokens, chunk, LogitsFor::Last)?)
    }
}

fn report_json(timing: &Timing) {
    let stats = serde_json::json!({
        "prompt_tokens": timing.prompt_tokens,
        "prefill_s": timing.prefill.as_secs_f64(),
        "generated": timing.generated,
        "decode_steps": timing.decode_steps,
        "decode_s": timing.decode.as_secs_f64(),
    });
    eprintln!("{stats}");
}

fn report(timing: &Timing) {
    let rate = |tokens: usize, time: Duration| tokens as f64 / time.as_secs_f64().max(1e-9);
    eprintln!(
        "prefill: {} tokens in {:.2}s ({:.1} tok/s) · decode: {} tokens in {:.2}s ({:.1} tok/s)",
        timing.prompt_tokens,
        timing.prefill.as_secs_f64(),
        rate(timing.prompt_tokens, timing.prefill),
        timing.generated,
        timing.decode.as_secs_f64(),
        rate(timing.decode_steps, timing.decode),
    );
}
