//! Engine metrics: counters and latency histograms, snapshotted on request.
//! Histograms use fixed upper bounds (Prometheus-style cumulative export is a
//! sum over `counts`), so a snapshot is a plain copy.

use std::time::Duration;

/// Upper bounds, in seconds, of the latency histogram buckets (the last bucket is +inf).
pub const LATENCY_BUCKETS_S: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Upper bounds, in seconds, of the mask-time histogram buckets (10 µs to 10 ms).
pub const MASK_BUCKETS_S: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
];

/// A latency histogram over fixed bucket bounds ([`LATENCY_BUCKETS_S`] by default).
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Upper bounds of the buckets, in seconds (the last bucket is +inf).
    pub bounds: &'static [f64],
    /// Observations per bucket: `counts[i]` fell at or under `bounds[i]`
    /// and over the previous bound; the last entry counts those over every bound.
    pub counts: Vec<u64>,
    /// Sum of the observations, in seconds.
    pub sum_s: f64,
    /// Number of observations.
    pub count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new(LATENCY_BUCKETS_S)
    }
}

impl Histogram {
    /// An empty histogram over `bounds` (ascending, in seconds).
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum_s: 0.0,
            count: 0,
        }
    }

    /// Record one latency.
    pub fn observe(&mut self, latency: Duration) {
        let seconds = latency.as_secs_f64();
        let bucket = self
            .bounds
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(self.bounds.len());
        self.counts[bucket] += 1;
        self.sum_s += seconds;
        self.count += 1;
    }

    /// The upper bound of the bucket holding quantile `q` (0..=1) of the
    /// observations: an upper estimate; `None` when empty or past every bound.
    pub fn quantile_bound_s(&self, q: f64) -> Option<f64> {
        let rank = (q.clamp(0.0, 1.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank && self.count > 0 {
                return self.bounds.get(bucket).copied();
            }
        }
        None
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
#[derive(Debug, Clone, PartialEq)]
pub struct EngineMetrics {
    /// Prompt tokens looked up in the prefix cache (first admission of each request).
    pub prefix_queried_tokens: u64,
    /// Of those, tokens whose K/V was reused.
    pub prefix_hit_tokens: u64,
    /// K/V blocks in the pool.
    pub kv_blocks_total: usize,
    /// Blocks referenced by running sequences.
    pub kv_blocks_used: usize,
    /// Blocks kept referenced for recently active sessions (not evictable).
    pub kv_blocks_pinned: usize,
    /// Sessions whose last prefix is pinned.
    pub sessions_pinned: usize,
    /// Unreferenced blocks kept for prefix hits (evictable).
    pub kv_blocks_cached: usize,
    /// Blocks with no content.
    pub kv_blocks_free: usize,
    /// Bytes of K/V storage per block (all layers, K and V).
    pub kv_bytes_per_block: usize,
    /// Tokens a block holds.
    pub kv_block_tokens: usize,
    /// Most sequences running at once (the configured limit).
    pub max_running: usize,
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
    /// Drafted tokens run through the model for verification.
    pub draft_tokens: u64,
    /// Of those, tokens sampling kept.
    pub draft_accepted: u64,
    /// Of the kept ones, tokens the tool-call constraint forced (fast-forward).
    pub forced_tokens: u64,
    /// Submission to first token.
    pub time_to_first_token: Histogram,
    /// Gap between consecutive tokens of one request.
    pub inter_token: Histogram,
    /// One allowed-token mask of a constrained sequence (cache hits included).
    pub mask_time: Histogram,
}

impl Default for EngineMetrics {
    fn default() -> Self {
        Self {
            prefix_queried_tokens: 0,
            prefix_hit_tokens: 0,
            kv_blocks_total: 0,
            kv_blocks_used: 0,
            kv_blocks_pinned: 0,
            sessions_pinned: 0,
            kv_blocks_cached: 0,
            kv_blocks_free: 0,
            kv_bytes_per_block: 0,
            kv_block_tokens: 0,
            max_running: 0,
            evicted_blocks: 0,
            requests_running: 0,
            requests_waiting: 0,
            requests_finished: 0,
            requests_cancelled: 0,
            requests_failed: 0,
            preemptions: 0,
            deferrals: 0,
            prefill_tokens: 0,
            generated_tokens: 0,
            steps: 0,
            draft_tokens: 0,
            draft_accepted: 0,
            forced_tokens: 0,
            time_to_first_token: Histogram::default(),
            inter_token: Histogram::default(),
            mask_time: Histogram::new(MASK_BUCKETS_S),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_bucket_upper_bounds() {
        let mut histogram = Histogram::new(MASK_BUCKETS_S);
        assert_eq!(histogram.quantile_bound_s(0.5), None);
        for _ in 0..98 {
            histogram.observe(Duration::from_micros(20));
        }
        histogram.observe(Duration::from_micros(300));
        histogram.observe(Duration::from_secs(1));
        assert_eq!(histogram.quantile_bound_s(0.5), Some(0.000025));
        assert_eq!(histogram.quantile_bound_s(0.99), Some(0.0005));
        assert_eq!(histogram.quantile_bound_s(1.0), None, "past every bound");
    }
}
