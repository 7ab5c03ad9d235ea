//! What routers in front of several replicas read.
//!
//! `GET /v1/loads` answers SMG's load poll in SGLang's shape (SMG polls it
//! every 10 s, ignoring the query string it sends; it vetoes a replica whose
//! `token_usage` (a 0–1 fraction) reaches 0.8 or whose waiting requests reach
//! 8). A token is "used" when a running sequence or a session pin holds its
//! block; cached blocks are evictable, so they count as free, as in SGLang.
//! `GET /loads` stays a 404 on purpose: SMG tries it first and, on any 200,
//! would poll only it.

use crate::error::ApiError;
use crate::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tessera_engine::EngineMetrics;

/// `GET /v1/loads`.
pub async fn loads(State(state): State<AppState>) -> Response {
    match state.engine.metrics().recv().await {
        Ok(metrics) => Json(loads_body(&metrics)).into_response(),
        Err(error) => ApiError::engine(&error, None).into_response(),
    }
}

/// SGLang's load report for one data-parallel rank, from the engine's counters.
pub fn loads_body(metrics: &EngineMetrics) -> Value {
    let block = metrics.kv_block_tokens;
    let total = metrics.kv_blocks_total * block;
    let used = (metrics.kv_blocks_used + metrics.kv_blocks_pinned) * block;
    json!({
        "dp_rank_count": 1,
        "loads": [{
            "dp_rank": 0,
            "num_running_reqs": metrics.requests_running,
            "num_waiting_reqs": metrics.requests_waiting,
            "num_used_tokens": used,
            "max_total_num_tokens": total,
            "token_usage": fraction(used as u64, total as u64),
            "cache_hit_rate": fraction(metrics.prefix_hit_tokens, metrics.prefix_queried_tokens),
            "max_running_requests": metrics.max_running,
        }],
    })
}

fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_report_tokens_and_fractions_from_the_counters() {
        let metrics = EngineMetrics {
            kv_blocks_total: 100,
            kv_blocks_used: 10,
            kv_blocks_pinned: 15,
            kv_blocks_cached: 50,
            kv_block_tokens: 16,
            requests_running: 3,
            requests_waiting: 2,
            prefix_queried_tokens: 1000,
            prefix_hit_tokens: 900,
            max_running: 16,
            ..EngineMetrics::default()
        };
        let body = loads_body(&metrics);
        let load = &body["loads"][0];
        assert_eq!(body["dp_rank_count"], 1);
        assert_eq!(load["num_running_reqs"], 3);
        assert_eq!(load["num_waiting_reqs"], 2);
        assert_eq!(load["num_used_tokens"], 400);
        assert_eq!(load["max_total_num_tokens"], 1600);
        assert_eq!(load["token_usage"], 0.25);
        assert_eq!(load["cache_hit_rate"], 0.9);
        assert_eq!(load["max_running_requests"], 16);
        assert_eq!(loads_body(&EngineMetrics::default())["loads"][0]["token_usage"], 0.0);
    }
}
