//! What routers in front of several replicas read.
//!
//! The vLLM-compatible surface that llm-d's scheduler, vllm-router and
//! Dynamo read: `vllm:*` gauges beside Tessera's own metrics, and
//! `POST /v1/chat/completions/render` and `/v1/completions/render`, which
//! validate a request exactly as its endpoint does and return the token ids
//! the engine would prefill (`{"token_ids", "features", "cache_salt"}`, a list
//! of one for completions, as vLLM answers), without running it.
//!
//! `GET /v1/loads` answers SMG's load poll in SGLang's shape (SMG polls it
//! every 10 s, ignoring the query string it sends; it vetoes a replica whose
//! `token_usage` (a 0–1 fraction) reaches 0.8 or whose waiting requests reach
//! 8). A token is "used" when a running sequence or a session pin holds its
//! block; cached blocks are evictable, so they count as free, as in SGLang.
//! `GET /loads` stays a 404 on purpose: SMG tries it first and, on any 200,
//! would poll only it.

use crate::body::parse;
use crate::error::ApiError;
use crate::routes::off_the_runtime;
use crate::AppState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::fmt::Write;
use tessera_api::openai::{chat_request, completion_job, ChatCompletionRequest, CompletionRequest};
use tessera_api::{chat_job, Api, Endpoint, Job, RequestError};
use tessera_engine::EngineMetrics;

/// `GET /kv/blocks`: every full block of the prefix index by the names KV
/// events give it, so a subscriber can check the set it rebuilt.
pub async fn kv_blocks(State(state): State<AppState>) -> Response {
    match state.engine.index_blocks().recv().await {
        Ok(blocks) => Json(json!({
            "block_size": state.engine.block_size(),
            "blocks": blocks
                .into_iter()
                .map(|block| json!({"hash": block.hash, "parent": block.parent, "tokens": block.tokens}))
                .collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(error) => ApiError::engine(&error, None).into_response(),
    }
}

/// `POST /v1/chat/completions/render`.
pub async fn render_chat(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let rendered = match parse::<ChatCompletionRequest>(body, state.config.max_body_bytes) {
        Ok(request) => {
            off_the_runtime(&state, move |api| {
                let (request, _) = chat_request(request, None)?;
                render(api, chat_job(api, Endpoint::Chat, request)?)
            })
            .await
        }
        Err(error) => Err(error),
    };
    match rendered {
        Ok(rendered) => Json(rendered).into_response(),
        Err(error) => error.into_response(),
    }
}

/// `POST /v1/completions/render`.
pub async fn render_completion(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let rendered = match parse::<CompletionRequest>(body, state.config.max_body_bytes) {
        Ok(request) => off_the_runtime(&state, move |api| render(api, completion_job(api, request, None)?.0)).await,
        Err(error) => Err(error),
    };
    match rendered {
        Ok(rendered) => Json(json!([rendered])).into_response(),
        Err(error) => error.into_response(),
    }
}

/// vLLM's render answer for a validated job: what the engine would prefill.
fn render(api: &Api, job: Job) -> Result<Value, RequestError> {
    let max_tokens = job.request.max_tokens;
    let tokens = api
        .engine()
        .render(job.request)
        .map_err(|error| RequestError::engine(error, job.endpoint))?;
    Ok(json!({
        "token_ids": tokens,
        "features": null,
        "cache_salt": null,
        "sampling_params": {"max_tokens": max_tokens},
    }))
}

/// The `vllm:*` metrics llm-d's scorers read, appended to `/metrics`.
pub fn vllm_metrics(metrics: &EngineMetrics, model_name: &str) -> String {
    let model = format!("model_name=\"{}\"", label_value(model_name));
    let usage = fraction(used_blocks(metrics) as u64, metrics.kv_blocks_total as u64);
    let mut out = String::new();
    let gauges: [(&str, &str, f64); 3] = [
        (
            "vllm:num_requests_running",
            "Requests in model execution batches.",
            metrics.requests_running as f64,
        ),
        (
            "vllm:num_requests_waiting",
            "Requests waiting to be processed.",
            metrics.requests_waiting as f64,
        ),
        (
            "vllm:kv_cache_usage_perc",
            "KV-cache usage; 1 means 100 percent.",
            usage,
        ),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{model}}} {value}"
        );
    }
    let counters: [(&str, &str, u64); 2] = [
        (
            "vllm:prefix_cache_queries",
            "Prompt tokens looked up in the prefix cache.",
            metrics.prefix_queried_tokens,
        ),
        (
            "vllm:prefix_cache_hits",
            "Of those, tokens served from the cache.",
            metrics.prefix_hit_tokens,
        ),
    ];
    for (name, help, value) in counters {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name}_total{{{model}}} {value}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP vllm:cache_config_info Information of the KV cache configuration.\n\
         # TYPE vllm:cache_config_info gauge\n\
         vllm:cache_config_info{{block_size=\"{}\",num_gpu_blocks=\"{}\",enable_prefix_caching=\"True\"}} 1",
        metrics.kv_block_tokens, metrics.kv_blocks_total
    );
    out
}

/// A Prometheus label value with its backslashes, quotes and newlines escaped.
fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Blocks a running sequence or a session pin holds (cached blocks are evictable: free).
fn used_blocks(metrics: &EngineMetrics) -> usize {
    metrics.kv_blocks_used + metrics.kv_blocks_pinned
}

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
    let used = used_blocks(metrics) * block;
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

    #[test]
    fn vllm_metrics_carry_the_names_and_labels_llm_d_reads() {
        let metrics = EngineMetrics {
            kv_blocks_total: 200,
            kv_blocks_used: 30,
            kv_blocks_pinned: 20,
            kv_block_tokens: 16,
            requests_running: 4,
            requests_waiting: 1,
            prefix_queried_tokens: 50,
            prefix_hit_tokens: 40,
            ..EngineMetrics::default()
        };
        let text = vllm_metrics(&metrics, "smol \"lm\"");
        let model = "{model_name=\"smol \\\"lm\\\"\"}";
        for line in [
            format!("vllm:num_requests_running{model} 4"),
            format!("vllm:num_requests_waiting{model} 1"),
            format!("vllm:kv_cache_usage_perc{model} 0.25"),
            format!("vllm:prefix_cache_queries_total{model} 50"),
            format!("vllm:prefix_cache_hits_total{model} 40"),
            "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"200\",enable_prefix_caching=\"True\"} 1".into(),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
        assert!(text.contains("# TYPE vllm:kv_cache_usage_perc gauge"));
    }
}
