//! `bench ttft`'s output: the tables, the JSON report and the SVG plot.

use super::ttft::{Results, SweepRow};
use anyhow::Result;
use serde_json::json;
use std::path::Path;

pub(super) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Token-weighted hit rate of the samples (cached / prompt tokens).
pub(super) fn hit_rate<'s>(samples: impl Iterator<Item = &'s super::ttft::Sample>) -> f64 {
    let (cached, total) = samples.fold((0, 0), |(c, t), s| (c + s.cached_tokens, t + s.prompt_tokens));
    cached as f64 / total.max(1) as f64
}

pub(super) fn print_tables(results: &Results) {
    println!("prefix sweep (+64 new tokens)");
    println!(
        "{:>8} {:>12} {:>12} {:>8} {:>8}",
        "prefix", "cold ms", "warm ms", "cached", "warm/cold"
    );
    for (prefix, cold, warm) in &results.sweep {
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
    for (i, s) in results.replay.iter().enumerate() {
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
        100.0 * hit_rate(results.replay.iter().skip(1))
    );
    println!("\ninterleaved sessions");
    println!(
        "{:>8} {:>5} {:>8} {:>8} {:>10}",
        "session", "turn", "prompt", "cached", "ttft ms"
    );
    for (session, turn, s) in &results.interleaved {
        println!(
            "{session:>8} {turn:>5} {:>8} {:>8} {:>10.1}",
            s.prompt_tokens, s.cached_tokens, s.ttft_ms
        );
    }
    println!(
        "median ttft: {:.1} ms",
        median(results.interleaved.iter().map(|(_, _, s)| s.ttft_ms).collect())
    );
    let r = &results.restart;
    println!(
        "\nrestart ({} tokens): cold {:.1} ms; the warm prompt after a restart from the saved cache {:.1} ms ({} cached), ratio {:.3}",
        r.cold.prompt_tokens,
        r.cold.ttft_ms,
        r.restored.ttft_ms,
        r.restored.cached_tokens,
        r.restored.ttft_ms / r.cold.ttft_ms
    );
    let m = &results.metrics;
    println!(
        "engine: prefix hit rate {:.1}% ({} of {} prompt tokens), {} blocks evicted, {} preemptions",
        100.0 * m.hit_rate(),
        m.prefix_hit_tokens,
        m.prefix_queried_tokens,
        m.evicted_blocks,
        m.preemptions
    );
}

pub(super) fn report_json(results: &Results) -> serde_json::Value {
    let m = &results.metrics;
    let sample = |s: &super::ttft::Sample| json!({"prompt_tokens": s.prompt_tokens, "cached_tokens": s.cached_tokens, "ttft_ms": s.ttft_ms});
    json!({
        "prefix_sweep": results.sweep.iter().map(|(prefix, cold, warm)| json!({
            "prefix_tokens": prefix, "new_tokens": 64, "cold_ttft_ms": cold.ttft_ms,
            "warm_ttft_ms": warm.ttft_ms, "warm_cached_tokens": warm.cached_tokens,
        })).collect::<Vec<_>>(),
        "agent_replay": {
            "turns": results.replay.iter().enumerate().map(|(i, s)| json!({
                "turn": i + 1, "prompt_tokens": s.prompt_tokens, "cached_tokens": s.cached_tokens, "ttft_ms": s.ttft_ms,
            })).collect::<Vec<_>>(),
            "hit_rate_from_turn_2": hit_rate(results.replay.iter().skip(1)),
        },
        "interleaved": {
            "turns": results.interleaved.iter().map(|(session, turn, s)| json!({
                "session": session, "turn": turn, "prompt_tokens": s.prompt_tokens,
                "cached_tokens": s.cached_tokens, "ttft_ms": s.ttft_ms,
            })).collect::<Vec<_>>(),
            "median_ttft_ms": median(results.interleaved.iter().map(|(_, _, s)| s.ttft_ms).collect()),
        },
        "restart": {"cold": sample(&results.restart.cold), "restored": sample(&results.restart.restored)},
        "engine": {
            "prefix_queried_tokens": m.prefix_queried_tokens, "prefix_hit_tokens": m.prefix_hit_tokens,
            "hit_rate": m.hit_rate(), "evicted_blocks": m.evicted_blocks, "preemptions": m.preemptions,
            "kv_blocks_total": m.kv_blocks_total, "steps": m.steps,
        },
    })
}

pub(super) fn plot_sweep(path: &Path, sweep: &[SweepRow]) -> Result<()> {
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
