//! `GET /metrics`: the engine's counters and histograms in Prometheus text format.

use std::fmt::Write;
use tessera_engine::{EngineMetrics, Histogram};

/// Prometheus exposition text for `metrics`.
pub fn prometheus(metrics: &EngineMetrics) -> String {
    let mut out = String::new();
    let counters: [(&str, &str, u64); 14] = [
        (
            "tessera_draft_tokens_total",
            "Drafted tokens verified beside a sequence's token (speculative decoding).",
            metrics.draft_tokens,
        ),
        (
            "tessera_draft_accepted_tokens_total",
            "Drafted tokens that sampling kept.",
            metrics.draft_accepted,
        ),
        (
            "tessera_forced_tokens_total",
            "Kept drafted tokens the tool-call constraint forced (grammar fast-forward).",
            metrics.forced_tokens,
        ),
        (
            "tessera_prefix_cache_queried_tokens_total",
            "Prompt tokens looked up in the prefix cache.",
            metrics.prefix_queried_tokens,
        ),
        (
            "tessera_prefix_cache_hit_tokens_total",
            "Prompt tokens whose K/V was reused from the prefix cache.",
            metrics.prefix_hit_tokens,
        ),
        (
            "tessera_kv_evicted_blocks_total",
            "Cached K/V blocks evicted to make room.",
            metrics.evicted_blocks,
        ),
        (
            "tessera_requests_finished_total",
            "Requests that finished normally.",
            metrics.requests_finished,
        ),
        (
            "tessera_requests_cancelled_total",
            "Requests cancelled by their client.",
            metrics.requests_cancelled,
        ),
        (
            "tessera_requests_failed_total",
            "Requests that failed.",
            metrics.requests_failed,
        ),
        (
            "tessera_preemptions_total",
            "Running sequences preempted for lack of K/V blocks.",
            metrics.preemptions,
        ),
        (
            "tessera_deferrals_total",
            "Admissions deferred while a shared prefix was being computed.",
            metrics.deferrals,
        ),
        (
            "tessera_prefill_tokens_total",
            "Prompt tokens run through the model.",
            metrics.prefill_tokens,
        ),
        (
            "tessera_generated_tokens_total",
            "Tokens generated.",
            metrics.generated_tokens,
        ),
        ("tessera_engine_steps_total", "Forward passes run.", metrics.steps),
    ];
    for (name, help, value) in counters {
        metric(&mut out, name, help, "counter", value as f64);
    }
    let gauges: [(&str, &str, usize); 9] = [
        (
            "tessera_kv_blocks_used",
            "K/V blocks referenced by running sequences.",
            metrics.kv_blocks_used,
        ),
        (
            "tessera_kv_blocks_pinned",
            "K/V blocks kept for recently active sessions.",
            metrics.kv_blocks_pinned,
        ),
        (
            "tessera_sessions_pinned",
            "Sessions whose last prefix is kept.",
            metrics.sessions_pinned,
        ),
        (
            "tessera_kv_blocks_cached",
            "Unreferenced K/V blocks kept for prefix hits.",
            metrics.kv_blocks_cached,
        ),
        ("tessera_kv_blocks_free", "Empty K/V blocks.", metrics.kv_blocks_free),
        (
            "tessera_kv_blocks_total",
            "K/V blocks in the pool.",
            metrics.kv_blocks_total,
        ),
        (
            "tessera_kv_block_bytes",
            "Bytes of K/V storage per block.",
            metrics.kv_bytes_per_block,
        ),
        (
            "tessera_requests_running",
            "Sequences running.",
            metrics.requests_running,
        ),
        (
            "tessera_requests_waiting",
            "Requests waiting for admission.",
            metrics.requests_waiting,
        ),
    ];
    for (name, help, value) in gauges {
        metric(&mut out, name, help, "gauge", value as f64);
    }
    histogram(
        &mut out,
        "tessera_time_to_first_token_seconds",
        "Submission to first token.",
        &metrics.time_to_first_token,
    );
    histogram(
        &mut out,
        "tessera_inter_token_seconds",
        "Gap between consecutive tokens of a request.",
        &metrics.inter_token,
    );
    histogram(
        &mut out,
        "tessera_mask_seconds",
        "One allowed-token mask of a constrained sequence.",
        &metrics.mask_time,
    );
    out
}

fn metric(out: &mut String, name: &str, help: &str, kind: &str, value: f64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
}

fn histogram(out: &mut String, name: &str, help: &str, histogram: &Histogram) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    let mut cumulative = 0;
    for (bound, count) in histogram.bounds.iter().zip(&histogram.counts) {
        cumulative += count;
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", histogram.count);
    let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", histogram.sum_s, histogram.count);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn histograms_are_cumulative_and_counters_present() {
        let mut metrics = EngineMetrics {
            prefix_hit_tokens: 7,
            kv_blocks_total: 12,
            ..EngineMetrics::default()
        };
        metrics.time_to_first_token.observe(Duration::from_millis(3));
        metrics.time_to_first_token.observe(Duration::from_millis(30));
        let text = prometheus(&metrics);
        assert!(text.contains("tessera_prefix_cache_hit_tokens_total 7\n"), "{text}");
        assert!(text.contains("tessera_kv_blocks_total 12\n"));
        assert!(text.contains("tessera_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(text.contains("tessera_time_to_first_token_seconds_bucket{le=\"0.05\"} 2\n"));
        assert!(text.contains("tessera_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("tessera_time_to_first_token_seconds_count 2\n"));
    }
}
