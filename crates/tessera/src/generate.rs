//! `tessera generate`: one prompt, one streamed completion, speed figures at the end.
//! It runs through the engine, so `--kv-cache-dir` makes a repeated prompt prefix
//! (a system prompt, an earlier turn) warm across invocations.

use crate::model_files::{fingerprint_for_cache, load_model, ModelArgs};
use crate::tool_args::{choice_spec, load_tools};
use anyhow::{bail, Context, Result};
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tessera_api::openai::convert::{parse_choice, tool_defs};
use tessera_api::openai::ToolSpec;
use tessera_api::{
    chat_job, raw_job, start, Answer, Api, ApiConfig, ChatRequest, Collected, Delta, Endpoint, Message, RawRequest,
    RequestError, Sampling, Step,
};
use tessera_engine::{EngineConfig, EngineHandle};

/// Arguments of `tessera generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    speculation: crate::speculation_args::SpeculationArgs,
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
    /// Tokens after the first: what the decode time produced (drafts that were
    /// kept came several per forward pass).
    decode_tokens: usize,
    decode: Duration,
    /// Drafted, kept and forced tokens.
    speculation: tessera_engine::DraftCounts,
}

pub fn run(args: GenerateArgs) -> Result<()> {
    if args.max_tokens == 0 {
        bail!("--max-tokens must be at least 1");
    }
    if args.prefill_chunk == 0 {
        bail!("--prefill-chunk must be at least 1");
    }
    let tools = args.tools.as_deref().map(load_tools).transpose()?;
    let prompt_text = read_prompt(args.prompt.as_deref())?;
    let loaded = load_model(&args.model)?;
    let context = loaded.model.config().max_context;
    let prompt_bound = prompt_bound(&args, &prompt_text, tools.as_deref());
    let engine = EngineHandle::start(loaded, engine_config(&args, prompt_bound, context)?)?;
    let api = Api::new(engine.clone(), ApiConfig::default());
    let outcome = submit(&api, &args, prompt_text, tools).and_then(|answer| stream(answer, args.tools.is_some()));
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

/// The request, through the same typed core as the server's: a chat (with
/// `--chat`, `--system` or `--tools`: the prompt, the system text and the
/// tools are outside text, never control tokens) or a raw prompt (the
/// caller's own text: `<|im_start|>` in it is the control token).
fn submit(api: &Api, args: &GenerateArgs, prompt: String, tools: Option<Vec<ToolSpec>>) -> Result<Answer> {
    let sampling = Sampling {
        temperature: Some(args.temperature),
        top_p: Some(args.top_p),
        top_k: Some(args.top_k),
        min_p: Some(args.min_p),
        repetition_penalty: Some(args.repeat_penalty),
        seed: Some(args.seed),
    };
    let max_tokens = Some(args.max_tokens as u64);
    let job = if args.chat || args.system.is_some() || tools.is_some() {
        let mut messages: Vec<Message> = args.system.iter().cloned().map(Message::System).collect();
        messages.push(Message::User(prompt));
        let choice = match &tools {
            Some(_) => Some(parse_choice(&choice_spec(&args.tool_choice), "--tool-choice").map_err(refused)?),
            None => None,
        };
        let request = ChatRequest {
            parallel_tool_calls: Some(args.parallel_tool_calls),
            sampling,
            max_tokens,
            ignore_eos: args.ignore_eos,
            ..ChatRequest::new(messages).with_tools(tool_defs(tools.as_deref().unwrap_or_default()), choice)
        };
        chat_job(api, Endpoint::Cli, request)
    } else {
        let request = RawRequest {
            prompt,
            sampling,
            max_tokens,
            ignore_eos: args.ignore_eos,
            ..RawRequest::default()
        };
        raw_job(api, Endpoint::Cli, request)
    }
    .map_err(refused)?;
    for warning in &job.schema_warnings {
        eprintln!("warning: {warning}");
    }
    start(api, job).map_err(refused)
}

/// A refused request as one line, its field in the CLI's words.
fn refused(error: RequestError) -> anyhow::Error {
    let text = error
        .to_string()
        .replace("tools[", "--tools: tools[")
        .replace("max_tokens", "--max-tokens");
    anyhow::anyhow!(text)
}

/// Template text around the messages, in tokens at most (generous: ChatML
/// spends about ten).
const TEMPLATE_TOKENS: usize = 256;

/// At least as many tokens as the prompt will have (a token spells at least
/// one byte), known before the model's tokenizer is: it sizes the K/V pool.
fn prompt_bound(args: &GenerateArgs, prompt: &str, tools: Option<&[ToolSpec]>) -> usize {
    let tools = tools.map_or(0, |tools| serde_json::to_string(tools).map_or(0, |text| 2 * text.len()));
    let system = args.system.as_ref().map_or(0, String::len);
    prompt.len() + system + tools + TEMPLATE_TOKENS
}

fn engine_config(args: &GenerateArgs, prompt_bound: usize, context: usize) -> Result<EngineConfig> {
    let budget = (prompt_bound + args.max_tokens).min(context);
    let floor = if args.kv_cache_dir.is_some() { 8192 } else { 0 };
    let kv_tokens = args.kv_cache_tokens.unwrap_or(floor).max(budget);
    let model_fingerprint = fingerprint_for_cache(&args.model, args.kv_cache_dir.as_deref())?;
    Ok(EngineConfig {
        max_batch_tokens: args.prefill_chunk,
        max_running: 1,
        kv_cache_dir: args.kv_cache_dir.clone(),
        model_fingerprint,
        kv_dtype: args.model.kv_dtype,
        speculation: args.speculation.config(),
        ..EngineConfig::for_tokens(kv_tokens)
    })
}

/// Read the answer, print it (text as it streams; with tools, the text and
/// then the calls as one JSON line), and time it.
fn stream(mut answer: Answer, tools: bool) -> Result<Timing> {
    let prompt_tokens = answer.header().prompt_tokens;
    let started = Instant::now();
    let mut stdout = std::io::stdout().lock();
    let mut collected = Collected::default();
    let (mut first, mut last) = (None, None);
    loop {
        match answer.blocking_next() {
            Some(Step::Deltas(deltas)) => {
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
                for delta in deltas {
                    if let (false, Delta::Content(text)) = (tools, &delta) {
                        stdout.write_all(text.as_bytes())?;
                        stdout.flush()?;
                    }
                    collected.push(delta);
                }
            }
            Some(Step::Finished(ending)) => {
                match tools {
                    true => print_calls(&mut stdout, &collected)?,
                    false => writeln!(stdout)?,
                }
                let first = first.unwrap_or_else(Instant::now);
                let generated = ending.usage.completion_tokens;
                return Ok(Timing {
                    prompt_tokens,
                    cached_tokens: ending.usage.cached_tokens,
                    prefill: first - started,
                    generated,
                    decode_tokens: generated.saturating_sub(1),
                    decode: last.map(|last| last - first).unwrap_or_default(),
                    speculation: ending.usage.speculation,
                });
            }
            Some(Step::Failed(error)) => return Err(refused(error)),
            None => bail!("the engine stopped before the answer ended"),
        }
    }
}

/// The free text (if any), then the calls as one JSON line.
fn print_calls(out: &mut impl Write, collected: &Collected) -> Result<()> {
    if !collected.content.is_empty() {
        writeln!(out, "{}", collected.content)?;
    }
    let calls: Vec<serde_json::Value> = collected
        .calls
        .iter()
        .map(|call| {
            let arguments: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
            serde_json::json!({"name": call.name, "arguments": arguments})
        })
        .collect();
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

fn report_json(timing: &Timing) {
    let stats = serde_json::json!({
        "prompt_tokens": timing.prompt_tokens,
        "cached_tokens": timing.cached_tokens,
        "prefill_s": timing.prefill.as_secs_f64(),
        "generated": timing.generated,
        "decode_tokens": timing.decode_tokens,
        "decode_s": timing.decode.as_secs_f64(),
        "drafted": timing.speculation.drafted,
        "accepted": timing.speculation.accepted,
        "forced": timing.speculation.forced,
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
    let drafts = match timing.speculation {
        counts if counts.drafted == 0 => String::new(),
        counts => format!(
            " · drafts: {} of {} kept ({} forced by the tool-call constraint)",
            counts.accepted, counts.drafted, counts.forced
        ),
    };
    eprintln!(
        "prefill: {} tokens{reused} in {:.2}s ({:.1} tok/s) · decode: {} tokens in {:.2}s ({:.1} tok/s){drafts}",
        timing.prompt_tokens,
        timing.prefill.as_secs_f64(),
        rate(computed, timing.prefill),
        timing.generated,
        timing.decode.as_secs_f64(),
        rate(timing.decode_tokens, timing.decode),
    );
}
