//! `tessera generate`: one prompt, one streamed completion, speed figures at the end.
//! It runs through the engine, so `--kv-cache-dir` makes a repeated prompt prefix
//! (a system prompt, an earlier turn) warm across invocations.

use crate::model_files::{fingerprint_for_cache, load_model, ModelArgs};
use crate::tool_args::{constraint, load_tools, parse_choice};
use anyhow::{bail, Context, Result};
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tessera_constrain::{tools_prompt, CallFormat, ToolDef};
use tessera_engine::{Constraint, EngineConfig, EngineHandle, Event, GenerateRequest};
use tessera_model::{ChatMessage, ChatRole, LoadedModel, Protected};
use tessera_sample::SamplingParams;

/// Arguments of `tessera generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The prompt; read from stdin when absent. Raw, it is your own text:
    /// control-token text such as `<|im_start|>` is that control token.
    #[arg(long, short)]
    prompt: Option<String>,
    /// Wrap the prompt in the model's chat template as a user message. Then
    /// the prompt, --system and --tools are outside text: only the template
    /// emits control tokens, and `<|im_end|>` in them is plain text.
    #[arg(long)]
    chat: bool,
    /// A system message (implies --chat).
    #[arg(long)]
    system: Option<String>,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Sampling temperature; 0 (or anything under 1e-4) = greedy (deterministic).
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
    /// Persist the prefix cache in this folder: restored at start, saved at exit, so a
    /// prompt that repeats an earlier one's prefix skips recomputing it.
    #[arg(long, value_name = "DIR", env = "TESSERA_KV_CACHE_DIR")]
    kv_cache_dir: Option<PathBuf>,
    /// K/V pool size in tokens [default: prompt + --max-tokens; at least 8192 with --kv-cache-dir].
    #[arg(long, value_name = "TOKENS")]
    kv_cache_tokens: Option<usize>,
    /// Tools the model may call: a JSON array of `{"type": "function", "function": {"name",
    /// "description", "parameters"}}` (or the bare function objects). Implies --chat; the tools are
    /// described in the system prompt and every call is valid by construction (token masking).
    /// Prints the free text, then the calls as one JSON line `[{"name": …, "arguments": {…}}]`.
    #[arg(long, value_name = "FILE.json")]
    tools: Option<PathBuf>,
    /// none | auto | required | NAME | PREFIX* (a family, e.g. browser_*) | a comma-separated list.
    #[arg(long, value_name = "CHOICE", default_value = "auto", requires = "tools")]
    tool_choice: String,
    /// Allow several calls in one response.
    #[arg(long, requires = "tools")]
    parallel_tool_calls: bool,
}

/// Timing of one generation.
struct Timing {
    prompt_tokens: usize,
    /// Prompt tokens whose K/V came from the prefix cache.
    cached_tokens: usize,
    /// Submission to the first token.
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
    params.validate()?;
    if args.max_tokens == 0 {
        bail!("--max-tokens must be at least 1");
    }
    if args.prefill_chunk == 0 {
        bail!("--prefill-chunk must be at least 1");
    }
    let tool_defs = args.tools.as_deref().map(load_tools).transpose()?;
    let constraint = tool_defs
        .as_deref()
        .map(|tools| constraint(tools, parse_choice(&args.tool_choice, args.parallel_tool_calls)))
        .transpose()?;
    let prompt_text = read_prompt(args.prompt.as_deref())?;
    let loaded = load_model(&args.model)?;
    let prompt = prompt_tokens(
        &loaded,
        &prompt_text,
        args.chat,
        args.system.as_deref(),
        tool_defs.as_deref(),
    )?;
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
    let engine = EngineHandle::start(loaded, engine_config(&args, prompt.len(), context)?)?;
    let request = GenerateRequest {
        prompt,
        sampling: params,
        max_tokens: args.max_tokens,
        stop_at_eos: !args.ignore_eos,
        constraint: constraint.map(Constraint::Tools),
        ..GenerateRequest::greedy(Vec::new(), 1)
    };
    let outcome = stream(&engine, request);
    // Saves the prefix cache when --kv-cache-dir is set.
    let shutdown = engine.shutdown().wait();
    let timing = outcome?;
    shutdown.context("saving the prefix cache")?;
    if args.json_stats {
        report_json(&timing);
    } else {
        report(&timing);
    }
    Ok(())
}

fn engine_config(args: &GenerateArgs, prompt_tokens: usize, context: usize) -> Result<EngineConfig> {
    let budget = (prompt_tokens + args.max_tokens).min(context);
    let floor = if args.kv_cache_dir.is_some() { 8192 } else { 0 };
    let kv_tokens = args.kv_cache_tokens.unwrap_or(floor).max(budget);
    let model_fingerprint = fingerprint_for_cache(&args.model, args.kv_cache_dir.as_deref())?;
    Ok(EngineConfig {
        max_batch_tokens: args.prefill_chunk,
        max_running: 1,
        kv_cache_dir: args.kv_cache_dir.clone(),
        model_fingerprint,
        kv_dtype: args.model.kv_dtype,
        ..EngineConfig::for_tokens(kv_tokens)
    })
}

/// Submit, print the text as it streams, and time it.
fn stream(engine: &EngineHandle, request: GenerateRequest) -> Result<Timing> {
    let prompt_tokens = request.prompt.len();
    let echo = request.constraint.is_none();
    let started = Instant::now();
    let mut events = engine.submit(request)?;
    let mut stdout = std::io::stdout().lock();
    let (mut first, mut last) = (None, None);
    loop {
        match events.blocking_next() {
            Some(Event::Token { text, .. }) => {
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
                if echo {
                    stdout.write_all(text.as_bytes())?;
                    stdout.flush()?;
                }
            }
            Some(Event::Finished(completion)) => {
                if let Some(output) = &completion.tool_output {
                    print_tool_output(&mut stdout, output)?;
                } else {
                    writeln!(stdout)?;
                }
                let first = first.unwrap_or_else(Instant::now);
                let generated = completion.usage.completion_tokens;
                return Ok(Timing {
                    prompt_tokens,
                    cached_tokens: completion.usage.cached_tokens,
                    prefill: first - started,
                    generated,
                    decode_steps: generated.saturating_sub(1),
                    decode: last.map(|last| last - first).unwrap_or_default(),
                });
            }
            Some(Event::Failed(error)) => return Err(error.into()),
            None => bail!("the engine stopped before the answer ended"),
        }
    }
}

/// The free text (if any), then the calls as one JSON line.
fn print_tool_output(out: &mut impl Write, output: &tessera_engine::ToolOutput) -> Result<()> {
    if !output.parsed.content.is_empty() {
        writeln!(out, "{}", output.parsed.content)?;
    }
    let calls: Vec<serde_json::Value> = output.parsed.calls.iter().map(|call| call.to_json()).collect();
    writeln!(out, "{}", serde_json::Value::Array(calls))?;
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

/// The prompt's tokens. A raw prompt (no `--chat`, `--system` or `--tools`)
/// is the caller's own text and keeps special-token parsing (`<|im_start|>`
/// is the control token); in a chat, the prompt, the system text and the
/// tools are outside the template and never become control tokens.
fn prompt_tokens(
    loaded: &LoadedModel,
    prompt: &str,
    chat: bool,
    system: Option<&str>,
    tools: Option<&[ToolDef]>,
) -> Result<Vec<u32>> {
    if !chat && system.is_none() && tools.is_none() {
        return Ok(loaded.tokenizer.encode(prompt)?);
    }
    let mut protected = Protected::new(&loaded.tokenizer);
    let format = CallFormat::detect(loaded.template.source());
    let section = tools.map(|tools| {
        let tools: Vec<ToolDef> = tools
            .iter()
            .map(|t| t.map_text(|text| protected.protect(text)))
            .collect();
        tools_prompt(&tools, format)
    });
    let system = match (system.map(|text| protected.protect(text)), section) {
        (Some(system), Some(section)) => Some(format!("{system}\n\n{section}")),
        (system, section) => system.or(section),
    };
    let mut messages = Vec::new();
    if let Some(system) = system {
        messages.push(ChatMessage::new(ChatRole::System, system));
    }
    messages.push(ChatMessage::new(ChatRole::User, protected.protect(prompt)));
    let text = loaded.template.render(&messages, true)?;
    Ok(loaded.tokenizer.encode_protected(&text, &protected)?)
}

fn report_json(timing: &Timing) {
    let stats = serde_json::json!({
        "prompt_tokens": timing.prompt_tokens,
        "cached_tokens": timing.cached_tokens,
        "prefill_s": timing.prefill.as_secs_f64(),
        "generated": timing.generated,
        "decode_steps": timing.decode_steps,
        "decode_s": timing.decode.as_secs_f64(),
    });
    eprintln!("{stats}");
}

fn report(timing: &Timing) {
    let rate = |tokens: usize, time: Duration| tokens as f64 / time.as_secs_f64().max(1e-9);
    let computed = timing.prompt_tokens - timing.cached_tokens;
    let reused = match timing.cached_tokens {
        0 => String::new(),
        cached => format!(" ({cached} reused from the prefix cache)"),
    };
    eprintln!(
        "prefill: {} tokens{reused} in {:.2}s ({:.1} tok/s) · decode: {} tokens in {:.2}s ({:.1} tok/s)",
        timing.prompt_tokens,
        timing.prefill.as_secs_f64(),
        rate(computed, timing.prefill),
        timing.generated,
        timing.decode.as_secs_f64(),
        rate(timing.decode_steps, timing.decode),
    );
}
