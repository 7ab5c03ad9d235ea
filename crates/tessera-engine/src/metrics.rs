//! Engine metrics: counters and latency histograms, snapshotted on request.
//! Histograms use fixed upper bounds (Prometheus-style cumulative export is a
//! sum over `counts`), so a snapshot is a plain copy.

use std::time::Duration;

/// Upper bounds, in seconds, of the latency histogram buckets (the last bucket is +inf).
pub const LATENCY_BUCKETS_S: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// A latency histogram over [`LATENCY_BUCKETS_S`].
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Observations per bucket: `counts[i]` fell at or under `LATENCY_BUCKETS_S[i]`
    /// and over the previous bound; the last entry counts those over every bound.
    pub counts: Vec<u64>,
    /// Sum of the observations, in seconds.
    pub sum_s: f64,
    /// Number of observations.
    pub count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: vec![0; LATENCY_BUCKETS_S.len() + 1],
            sum_s: 0.0,
            count: 0,
        }
    }
}

impl Histogram {
    /// Record one latency.
    pub fn observe(&mut self, latency: Duration) {
        let seconds = latency.as_secs_f64();
        let bucket = LATENCY_BUCKETS_S
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(LATENCY_BUCKETS_S.len());
        self.counts[bucket] += 1;
        self.sum_s += seconds;
        self.count += 1;
    }

    /// Mean latency in seconds (0 when empty).
    pub fn mean_s(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_s / self.count as f64
        }
    }
}

/// A snapshot of the engine's state and cumulative counters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EngineMetrics {
    /// Prompt tokens looked up in the prefix cache (first admission of each request).
    pub prefix_queried_tokens: u64,
    /// Of those, tokens whose K/V was reused.
    pub prefix_hit_tokens: u64,
    /// K/V blocks in the pool.
    pub kv_blocks_total: usize,
    /// Blocks referenced by running sequences.
    pub kv_blocks_used: usize,
    /// Unreferenced blocks kept for prefix hits (evictable).
    pub kv_blocks_cached: usize,
    /// Blocks with no content.
    pub kv_blocks_free: usize,
    /// Bytes of K/V storage per block (all layers, K and V).
    pub kv_bytes_per_block: usize,
    /// Cached blocks evicted to make room.
    pub evicted_blocks: u64,
    /// Sequences running (prefilling or decoding).
    pub requests_running: usize,
    /// Requests waiting for admission (preempted ones included).
    pub requests_waiting: usize,
    /// Requests that finished normally.
    pub requests_finished: u64,
    /// Requests whose receiver was dropped before they finished.
    pub requests_cancelled: u64,
    /// Requests that failed.
    pub requests_failed: u64,
    /// Times a running sequence was preempted for lack of blocks.
    pub preemptions: u64,
    /// Times an admission waited for a running sequence to prefill a shared prefix.
    pub deferrals: u64,
    /// Prompt tokens run through the model (cache misses and recomputation).
    pub prefill_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Forward passes run.
    pub steps: u64,
    /// Submission to first token.
    pub time_to_first_token: Histogram,
    /// Gap between consecutive tokens of one request.
    pub inter_token: Histogram,
}

impl EngineMetrics {
    /// Token-weighted prefix-cache hit rate (0 when nothing was queried).
    pub fn hit_rate(&self) -> f64 {
        if self.prefix_queried_tokens == 0 {
            0.0
        } else {
            self.prefix_hit_tokens as f64 / self.prefix_queried_tokens as f64
        }
    }
}
