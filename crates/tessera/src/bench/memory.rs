//! `tessera bench memory`: the machine's memory read bandwidth on the
//! kernels' own thread pool. Decode reads every weight once per token, so
//! bandwidth / bytes of weights per token is the physical limit of decode
//! tok/s; `scripts/bench-vs-llamacpp.sh` reports both engines against it.
//!
//! Each pass sums a buffer several times the last-level cache in one
//! contiguous slice per thread (u64 adds: far below the core's load
//! throughput, so the pass is bound by DRAM); the fastest pass is reported.

use anyhow::{Context, Result};
use std::hint::black_box;
use std::time::Instant;
use tessera_model::parallel;

/// Options of `tessera bench memory`.
#[derive(Debug, clap::Args)]
pub struct MemoryArgs {
    /// Buffer size in MiB (keep it several times the last-level cache, so that reads come from DRAM).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(64..=65_536))]
    mib: u64,
    /// Timed passes over the buffer; the fastest is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=100))]
    passes: u64,
    /// Print one JSON line `{threads, bytes, passes_gb_s, best_gb_s}` (with `--model`, also
    /// `weight_bytes_per_token` and `limit_tok_s`) instead of the summary.
    #[arg(long)]
    json: bool,
    /// Also give this model's decode limit: the best pass over the bytes of weights one token
    /// reads (a shipped name, fetched on first use, or a .gguf file; as `--model` elsewhere).
    #[arg(long)]
    model: Option<String>,
}

pub fn run(args: MemoryArgs) -> Result<()> {
    // The model first: a name that does not resolve fails before the passes.
    let weights = match &args.model {
        Some(spec) => Some(
            crate::model_files::weight_bytes_per_token_of(spec)?
                .with_context(|| format!("{spec} is a checkpoint folder: the decode limit needs a GGUF file"))?,
        ),
        None => None,
    };
    let (threads, rates) = read_bandwidth(args.mib, args.passes)?;
    let best = best_pass(&rates);
    if args.json {
        println!("{}", report_json(threads, args.mib << 20, &rates, weights));
    } else {
        println!(
            "memory read bandwidth: {best:.1} GB/s ({threads} threads, {} MiB, best of {} passes)",
            args.mib, args.passes
        );
        if let Some(bytes) = weights {
            println!(
                "decode limit: {:.1} tok/s ({:.1} MB of weights per token)",
                limit_tok_s(best, bytes),
                bytes as f64 / 1e6
            );
        }
    }
    Ok(())
}

/// Tokens per second when every token reads `weight_bytes` at `gb_s`.
fn limit_tok_s(gb_s: f64, weight_bytes: u64) -> f64 {
    gb_s * 1e9 / weight_bytes as f64
}

fn best_pass(rates: &[f64]) -> f64 {
    rates.iter().copied().fold(0f64, f64::max)
}

/// The `--json` line.
fn report_json(threads: usize, bytes: u64, rates: &[f64], weights: Option<u64>) -> serde_json::Value {
    let best = best_pass(rates);
    let mut line = serde_json::json!({
        "threads": threads,
        "bytes": bytes,
        "passes_gb_s": rates,
        "best_gb_s": best,
    });
    if let Some(weight_bytes) = weights {
        line["weight_bytes_per_token"] = weight_bytes.into();
        line["limit_tok_s"] = limit_tok_s(best, weight_bytes).into();
    }
    line
}

/// The read bandwidth of each of `passes` passes over a buffer of `mib` MiB,
/// in GB/s, on the kernels' thread pool (and how many threads that is).
pub fn read_bandwidth(mib: u64, passes: u64) -> Result<(usize, Vec<f64>)> {
    let words = usize::try_from(mib * (1 << 20) / 8).context("--mib does not fit this machine's memory")?;
    let mut buffer: Vec<u64> = Vec::new();
    buffer
        .try_reserve_exact(words)
        .with_context(|| format!("allocating {mib} MiB to measure the read bandwidth"))?;
    // Written once so that every page is resident before the timed passes.
    buffer.extend((0..words as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    let threads = parallel::num_threads();
    let slices: Vec<&[u64]> = buffer.chunks(words.div_ceil(threads)).collect();
    let bytes = (words * 8) as f64;
    let rates = (0..passes)
        .map(|_| {
            let start = Instant::now();
            let sums = parallel::map(&slices, |slice| slice.iter().fold(0u64, |acc, &w| acc.wrapping_add(w)));
            black_box(sums);
            bytes / start.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    Ok((threads, rates))
}

#[cfg(test)]
mod tests {
    use super::report_json;

    #[test]
    fn the_json_line_gives_the_limit_from_the_best_pass_only_with_a_model() {
        let plain = report_json(2, 1 << 30, &[40.0, 50.0, 45.0], None);
        assert_eq!(plain["best_gb_s"], 50.0);
        assert!(plain.get("limit_tok_s").is_none() && plain.get("weight_bytes_per_token").is_none());
        let with_model = report_json(2, 1 << 30, &[40.0, 50.0, 45.0], Some(979_517_952));
        assert_eq!(with_model["weight_bytes_per_token"], 979_517_952);
        let limit = with_model["limit_tok_s"].as_f64().unwrap();
        assert!((limit - 50e9 / 979_517_952.0).abs() < 1e-9, "{limit}");
    }
}
