//! `tessera`: a local inference engine for AI agents.
//!
//! Subcommands: `serve` (the OpenAI-compatible server), `generate` (stream a
//! completion from a model), `bench ttft` (time to first token with and
//! without prefix reuse) and `agent` (the offline agent loop).

mod agent;
mod bench;
mod check_device;
mod generate;
mod model_files;
mod serve;
mod speculation_args;
mod tool_args;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Tessera: a local inference engine for AI agents (paged, prefix-sharing KV cache; masked tool calls).
#[derive(Debug, Parser)]
#[command(name = "tessera", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Worker threads for the CPU kernels (default: the cores available to this process).
    #[arg(long, global = true, env = "TESSERA_THREADS")]
    threads: Option<usize>,
    /// Log filter, e.g. `info` or `tessera_model=debug` (also read from RUST_LOG).
    #[arg(long, global = true, default_value = "warn")]
    log: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the model over an OpenAI-compatible HTTP API (chat completions with tools, completions,
    /// models, health, Prometheus metrics) on 127.0.0.1:8080.
    Serve(serve::ServeArgs),
    /// Generate text from a prompt and stream it to stdout; prints prefill/decode speed at the end.
    Generate(generate::GenerateArgs),
    /// Benchmarks on the real model, in process.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Run the offline agent on a workspace: tools jailed to it, a stable cached prefix, masked tool
    /// choice per step, a planner, compaction; writes <workspace>/.tessera/transcript.jsonl.
    Agent(agent::AgentArgs),
    /// Check the device path on this machine: Tessera's GPU kernels against their CPU contract on
    /// random odd shapes (f32, f16, bf16 K/V), then the model on `--device` against the CPU path
    /// (logits at every position of a 400-token prompt, a greedy continuation). Exits non-zero on
    /// any failure.
    CheckDevice(check_device::CheckDeviceArgs),
}

fn main() -> ExitCode {
    pin_candle();
    let cli = Cli::parse();
    init_logging(&cli.log);
    if let Some(threads) = cli.threads {
        if threads == 0 {
            eprintln!("error: --threads must be at least 1");
            return ExitCode::from(2);
        }
        tessera_model::parallel::set_num_threads(threads);
    }
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Bench(command) => bench::run(command),
        Command::Agent(args) => agent::run_agent(args),
        Command::CheckDevice(args) => check_device::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Keep candle's own thread pool on one thread (see `tessera_model::parallel`:
/// candle reads the variable at its first use, and the library only checks
/// it). First thing in `main`, while this is the only thread, so no other
/// thread can read the environment during the write. An explicit setting wins.
fn pin_candle() {
    let (name, value) = tessera_model::parallel::CANDLE_PIN;
    if std::env::var_os(name).is_none() {
        std::env::set_var(name, value);
    }
}

/// Logs go to stderr, colored only on a terminal (a log file or a pipe gets
/// plain text, not escape codes around every field).
fn init_logging(filter: &str) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(filter))
        .unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
