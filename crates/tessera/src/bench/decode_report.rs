//! `bench decode`'s output: the tables, the JSON report and the SVG plot.

use super::decode::{ModeResults, Results, Timeline};
use super::report::median;
use anyhow::Result;
use serde_json::json;
use std::path::Path;
use tessera_engine::TokenOrigin;

/// Every stream of `mode`'s run, in a fixed order (to compare two settings' outputs).
fn all_ids(mode: &ModeResults) -> Vec<&[u32]> {
    let batched = mode.batched.iter().flat_map(|b| b.timelines.iter());
    std::iter::once(&mode.single)
        .chain(batched)
        .chain(mode.agent.iter().map(|(_, t)| t))
        .map(|t| t.ids.as_slice())
        .collect()
}

/// Whether the two settings' greedy outputs are token for token the same.
fn identical(results: &Results) -> Option<bool> {
    match results.modes.as_slice() {
        [a, b] => {
            let (x, y) = (all_ids(a), all_ids(b));
            for (i, (p, q)) in x.iter().zip(&y).enumerate() {
                if p != q {
                    let at = p.iter().zip(q.iter()).take_while(|(u, v)| u == v).count();
                    eprintln!("bench: stream {i} differs between the settings at token {at}");
                }
            }
            Some(x == y)
        }
        _ => None,
    }
}

/// Tokens and seconds per origin over all of a mode's agent turns.
fn agent_spans(mode: &ModeResults) -> [(TokenOrigin, usize, f64); 3] {
    let mut total = [
        (TokenOrigin::Sampled, 0, 0.0),
        (TokenOrigin::Forced, 0, 0.0),
        (TokenOrigin::Copied, 0, 0.0),
    ];
    for (_, timeline) in &mode.agent {
        for (slot, (_, tokens, seconds)) in total.iter_mut().zip(timeline.per_origin()) {
            slot.1 += tokens;
            slot.2 += seconds;
        }
    }
    total
}

/// Decode tokens (after each turn's first) over decode seconds, all turns.
fn agent_rate(mode: &ModeResults) -> f64 {
    let (tokens, seconds) = mode.agent.iter().fold((0usize, 0f64), |(n, s), (_, t)| {
        let rate = t.decode_rate();
        let decode_tokens = t.tokens.len().saturating_sub(1);
        (
            n + decode_tokens,
            s + if rate > 0.0 { decode_tokens as f64 / rate } else { 0.0 },
        )
    });
    tokens as f64 / seconds.max(1e-9)
}

/// One setting's single-stream rates over another's, round by round. A
/// round runs both settings back to back, so its ratio cancels the drift
/// of a shared VM between rounds, which a ratio of the two medians keeps.
fn round_ratios(first: &[f64], second: &[f64]) -> Vec<f64> {
    first.iter().zip(second).map(|(a, b)| a / b.max(1e-9)).collect()
}

/// With two settings, the free-text stream's [`round_ratios`] of the first
/// over the second and their median.
fn free_text_ratios(modes: &[ModeResults]) -> Option<(Vec<f64>, f64)> {
    let [first, second] = modes else { return None };
    let ratios = round_ratios(&first.single_rounds, &second.single_rounds);
    let middle = median(ratios.clone());
    Some((ratios, middle))
}

fn rate(tokens: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        tokens as f64 / seconds
    } else {
        0.0
    }
}

pub(super) fn print_tables(results: &Results) {
    let modes = &results.modes;
    let header: Vec<String> = modes.iter().map(|m| format!("{:>14}", m.name)).collect();
    println!("one stream, free text ({} tokens): decode tok/s", 2 * results.tokens);
    println!("{}", header.join(""));
    let singles: Vec<String> = modes
        .iter()
        .map(|m| format!("{:>14.2}", m.single.decode_rate()))
        .collect();
    println!("{}", singles.join(""));
    if let Some((ratios, middle)) = free_text_ratios(modes) {
        let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
        println!(
            "{} / {}, round by round: {} (median {middle:.3})",
            modes[0].name,
            modes[1].name,
            shown.join(" ")
        );
    }
    println!(
        "\nbatched, free text ({} tokens per stream): aggregate tok/s while every stream decodes",
        results.tokens
    );
    println!("{:>8}{}{:>14}", "streams", header.join(""), "× one stream");
    let rows = modes.first().map_or(0, |m| m.batched.len());
    for i in 0..rows {
        let cells: Vec<String> = modes
            .iter()
            .map(|m| format!("{:>14.2}", m.batched[i].aggregate))
            .collect();
        let first = &modes[0].batched;
        let scale = first[i].aggregate / first[0].aggregate.max(1e-9);
        println!("{:>8}{}{:>14.2}", first[i].streams, cells.join(""), scale);
    }
    println!("\nagent turns (tool_choice auto, greedy): decode tok/s");
    println!(
        "{:>8}{:>8}{}{:>10}{:>8}{:>8}",
        "turn",
        "tokens",
        header.join(""),
        "speedup",
        "forced",
        "copied"
    );
    let turns = modes.first().map_or(0, |m| m.agent.len());
    for i in 0..turns {
        let cells: Vec<String> = modes
            .iter()
            .map(|m| format!("{:>14.2}", m.agent[i].1.decode_rate()))
            .collect();
        let (name, first) = &modes[0].agent[i];
        let speedup = first.decode_rate() / modes.last().map_or(1.0, |m| m.agent[i].1.decode_rate()).max(1e-9);
        let spec = first.speculation;
        let copied = spec.accepted - spec.forced;
        println!(
            "{name:>8}{:>8}{}{speedup:>10.2}{:>8}{copied:>8}",
            first.ids.len(),
            cells.join(""),
            spec.forced
        );
    }
    if let Some(mode) = modes.first() {
        println!("\nagent turns, {} setting, per span kind", mode.name);
        println!("{:>10}{:>8}{:>12}", "kind", "tokens", "tok/s");
        for (origin, tokens, seconds) in agent_spans(mode) {
            println!("{:>10}{tokens:>8}{:>12.2}", origin.name(), rate(tokens, seconds));
        }
        let (drafted, accepted) = totals(mode);
        println!(
            "all turns: {:.2} tok/s; drafts {accepted} of {drafted} tokens kept ({:.0}%)",
            agent_rate(mode),
            100.0 * accepted as f64 / drafted.max(1) as f64
        );
    }
    if let Some(limit) = &results.limit {
        let bound = limit.tokens_per_second();
        println!(
            "\nbandwidth limit: {bound:.1} tok/s at {:.1} GB/s ({:.1} MB of weights per token; the larger of {:.1} GB/s \
             read by `bench memory` and {:.1} GB/s of weights read by plain one-stream decoding)",
            limit.bandwidth_gb_s(),
            limit.weight_bytes as f64 / 1e6,
            limit.read_gb_s,
            limit.plain_decode_gb_s,
        );
        for m in modes {
            println!(
                "agent turns' tool-call tokens, {}: {:.2} tok/s, {:.2}x the limit",
                m.name,
                agent_rate(m),
                agent_rate(m) / bound.max(1e-9)
            );
        }
    }
    match identical(results) {
        Some(true) => println!("\ngreedy outputs with and without speculation: token for token identical"),
        Some(false) => println!("\ngreedy outputs with and without speculation: DIFFERENT (a bug: report it)"),
        None => {}
    }
}

/// Drafted and accepted tokens over every request of `mode`.
fn totals(mode: &ModeResults) -> (usize, usize) {
    let batched = mode.batched.iter().flat_map(|b| b.timelines.iter());
    std::iter::once(&mode.single)
        .chain(batched)
        .chain(mode.agent.iter().map(|(_, t)| t))
        .fold((0, 0), |(d, a), t| {
            (d + t.speculation.drafted, a + t.speculation.accepted)
        })
}

fn timeline_json(t: &Timeline) -> serde_json::Value {
    let spans: Vec<_> = t
        .per_origin()
        .iter()
        .map(|(origin, tokens, seconds)| {
            json!({"kind": origin.name(), "tokens": tokens, "seconds": seconds, "tok_s": rate(*tokens, *seconds)})
        })
        .collect();
    json!({
        "tokens": t.ids.len(), "decode_tok_s": t.decode_rate(), "spans": spans,
        "drafted": t.speculation.drafted, "accepted": t.speculation.accepted, "forced": t.speculation.forced,
    })
}

pub(super) fn report_json(results: &Results) -> serde_json::Value {
    let modes: Vec<_> = results
        .modes
        .iter()
        .map(|m| {
            let (drafted, accepted) = totals(m);
            json!({
                "setting": m.name,
                "single": timeline_json(&m.single),
                "single_rounds_tok_s": m.single_rounds,
                "batched": m.batched.iter().map(|b| json!({
                    "streams": b.streams, "aggregate_tok_s": b.aggregate,
                    "per_stream_tok_s": b.timelines.iter().map(Timeline::decode_rate).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "agent": m.agent.iter().map(|(name, t)| json!({"turn": name, "result": timeline_json(t)})).collect::<Vec<_>>(),
                "agent_tok_s": agent_rate(m),
                "agent_spans": agent_spans(m).iter().map(|(o, n, s)| json!({"kind": o.name(), "tokens": n, "seconds": s, "tok_s": rate(*n, *s)})).collect::<Vec<_>>(),
                "drafted": drafted, "accepted": accepted,
            })
        })
        .collect();
    let free_text_ratio =
        free_text_ratios(&results.modes).map(|(rounds, middle)| json!({"rounds": rounds, "median": middle}));
    json!({
        "tokens_per_stream": results.tokens,
        "free_text_ratio": free_text_ratio,
        "settings": modes,
        "greedy_identical": identical(results),
        "cpu_kernels": tessera_model::simd::kernels_in_use(),
        "bandwidth_limit": results.limit.map(|l| json!({
            "read_gb_s": l.read_gb_s, "plain_decode_gb_s": l.plain_decode_gb_s,
            "bandwidth_gb_s": l.bandwidth_gb_s(), "weight_bytes_per_token": l.weight_bytes,
            "tok_s": l.tokens_per_second(),
        })),
    })
}

pub(super) fn plot_batched(path: &Path, results: &Results) -> Result<()> {
    use plotters::prelude::*;
    let points = |m: &ModeResults| {
        m.batched
            .iter()
            .map(|b| (b.streams as f64, b.aggregate))
            .collect::<Vec<_>>()
    };
    let max_x = results
        .modes
        .iter()
        .flat_map(|m| m.batched.iter().map(|b| b.streams))
        .max()
        .unwrap_or(1) as f64;
    let max_y = results
        .modes
        .iter()
        .flat_map(|m| m.batched.iter().map(|b| b.aggregate))
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    let draw = |e: &dyn std::fmt::Display| anyhow::anyhow!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| draw(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Tessera decode: aggregate tok/s by concurrent streams",
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max_x * 1.05, 0f64..max_y)
        .map_err(|e| draw(&e))?;
    chart
        .configure_mesh()
        .x_desc("streams")
        .y_desc("aggregate tok/s")
        .draw()
        .map_err(|e| draw(&e))?;
    for (mode, color) in results.modes.iter().zip([RED, BLUE]) {
        chart
            .draw_series(LineSeries::new(points(mode), color))
            .map_err(|e| draw(&e))?
            .label(mode.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|e| draw(&e))?;
    root.present().map_err(|e| draw(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_text_is_compared_round_by_round() {
        // The VM slowed down between rounds: each round's pair still compares like with like.
        let ratios = round_ratios(&[10.0, 5.0, 9.9], &[10.0, 5.5, 9.0]);
        let expected = [1.0, 5.0 / 5.5, 1.1];
        assert!(
            ratios.iter().zip(expected).all(|(r, e)| (r - e).abs() < 1e-12),
            "{ratios:?}"
        );
        assert!((median(ratios) - 1.0).abs() < 1e-12);
        assert!((median(vec![1.0, 0.9, 1.2, 1.1]) - 1.05).abs() < 1e-12);
        assert_eq!(median(Vec::new()), 0.0);
    }
}
