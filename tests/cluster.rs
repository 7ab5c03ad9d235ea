//! What a router in front of several replicas needs from one (issue 22):
//! SMG's load poll, its routing key taken as the session, and the forms of
//! `tool_choice` that pass its validation (the flat allowed set; a family
//! carried in `x_tessera_tool_choice`); the vLLM-compatible surface (`vllm:*`
//! metrics, the render endpoints).

use crate::server_api::{engine, post, send, state, tools, user, wait_for_baseline};
use axum::http::StatusCode;
use serde_json::{json, Value};
use tessera_api::openai::{chat_job, completion_job};
use tessera_api::{Api as OpenAi, ApiConfig as OpenAiConfig};
use tessera_engine::EngineConfig;
use tessera_server::{AppState, ServerConfig};

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_answer_smgs_poll_from_the_engines_counters() {
    let state = state(ServerConfig::default());
    // SMG appends a query string; it is ignored.
    let (status, text) = send(&state, "GET", "/v1/loads?include=core,disagg,queues,memory", "", &[]).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["dp_rank_count"], 1);
    let load = &body["loads"][0];
    assert_eq!(load["num_running_reqs"], 0);
    assert_eq!(load["num_waiting_reqs"], 0);
    assert_eq!(load["max_total_num_tokens"], 8192);
    assert_eq!(load["max_running_requests"], 16);
    assert_eq!(load["token_usage"], 0.0);
    // SMG tries `/loads` first and would poll only it if it answered.
    let (status, _) = send(&state, "GET", "/loads?model=tessera", "", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let body = json!({"messages": user("Hello"), "max_tokens": 4, "temperature": 0});
    let (status, _) = post(&state, body.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = post(&state, body).await;
    assert_eq!(status, StatusCode::OK);
    let (_, text) = send(&state, "GET", "/v1/loads", "", &[]).await;
    let load = serde_json::from_str::<Value>(&text).unwrap()["loads"][0].clone();
    let rate = load["cache_hit_rate"].as_f64().unwrap();
    assert!(
        rate > 0.3 && rate < 1.0,
        "the second request hit the first one's prefix: {load}"
    );
    wait_for_baseline(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smgs_routing_key_names_the_session() {
    let state = state(ServerConfig::default());
    let body = json!({"messages": user("Hello"), "max_tokens": 2, "temperature": 0}).to_string();
    let (status, _) = send(
        &state,
        "POST",
        "/v1/chat/completions",
        &body,
        &[("X-SMG-Routing-Key", "agent-7")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let text = wait_for_baseline(&state).await;
    assert_eq!(
        metric(&text, "tessera_sessions_pinned"),
        1.0,
        "the routing key pinned a session"
    );
    // X-Session-Id wins when both are sent: one more session, not two.
    let headers = [("X-Session-Id", "agent-8"), ("X-SMG-Routing-Key", "agent-7")];
    let (status, _) = send(&state, "POST", "/v1/chat/completions", &body, &headers).await;
    assert_eq!(status, StatusCode::OK);
    let text = wait_for_baseline(&state).await;
    assert_eq!(metric(&text, "tessera_sessions_pinned"), 2.0);
}

/// The called tool's name, checked to be one of `names`.
fn called(answer: &Value, names: &[&str]) -> String {
    let calls = answer["choices"][0]["message"]["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(calls.len(), 1, "{answer}");
    let name = calls[0]["function"]["name"].as_str().unwrap().to_string();
    assert!(names.contains(&name.as_str()), "called {name}, allowed {names:?}");
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_forms_of_tool_choice_are_obeyed() {
    let state = state(ServerConfig::default());
    let ask = user("What is the weather in Paris? Use a tool.");
    let request = |extra: Value| {
        let mut body = json!({"messages": ask, "tools": tools(), "temperature": 0, "max_tokens": 64, "parallel_tool_calls": false});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    // The flat allowed set (Responses API, SMG).
    let flat = json!({"tool_choice": {"type": "allowed_tools", "mode": "required",
        "tools": [{"type": "function", "name": "browser_find"}]}});
    let (status, answer) = post(&state, request(flat)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    called(&answer, &["browser_find"]);
    // A family through SMG: `tool_choice` says required (SMG checks it), the extension narrows it.
    let family = json!({"tool_choice": "required", "x_tessera_tool_choice": {"type": "allowed_tools",
        "mode": "required", "tools": [{"type": "function", "name": "browser_*"}]}});
    let (status, answer) = post(&state, request(family)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    called(&answer, &["browser_open", "browser_find"]);
    // The extension's own mistakes name it.
    let wrong = json!({"x_tessera_tool_choice": {"type": "allowed_tools", "mode": "none", "tools": ["browser_*"]}});
    let (status, answer) = post(&state, request(wrong)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["param"], "x_tessera_tool_choice.mode", "{answer}");
    wait_for_baseline(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_returns_the_prompt_the_engine_prefills() {
    let engine = engine(EngineConfig::for_tokens(8192));
    let state = AppState::new(engine.clone(), ServerConfig::default());
    let reference = OpenAi::new(engine, OpenAiConfig::default());
    // Outside text that spells a control token, tools, a family: every step of validation shows.
    let chat = json!({"messages": [{"role": "system", "content": "Be brief. <|im_end|>"},
        {"role": "user", "content": "Open the docs."}], "tools": tools(),
        "tool_choice": {"type": "function", "function": {"name": "browser_*"}}, "max_tokens": 40});
    let (status, text) = send(&state, "POST", "/v1/chat/completions/render", &chat.to_string(), &[]).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let rendered: Value = serde_json::from_str(&text).unwrap();
    let (job, _) = chat_job(&reference, serde_json::from_value(chat.clone()).unwrap(), None).unwrap();
    let expected = reference.engine().render(job.request.clone()).unwrap();
    assert!(
        expected.len() > job.request.prompt.len() && expected.starts_with(&job.request.prompt),
        "the forced call's opening is prefilled after the prompt"
    );
    assert_eq!(rendered["token_ids"], json!(expected));
    assert_eq!(rendered["sampling_params"]["max_tokens"], 40);
    let (status, answer) = post(&state, chat).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        answer["usage"]["prompt_tokens"],
        json!(expected.len()),
        "what the engine ran"
    );

    let completion = json!({"prompt": "One, two, three,", "max_tokens": 3});
    let (status, text) = send(&state, "POST", "/v1/completions/render", &completion.to_string(), &[]).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let rendered: Value = serde_json::from_str(&text).unwrap();
    let (expected, _) = completion_job(&reference, serde_json::from_value(completion).unwrap(), None).unwrap();
    assert_eq!(
        rendered,
        json!([{"token_ids": expected.request.prompt, "features": null, "cache_salt": null,
        "sampling_params": {"max_tokens": 3}}])
    );

    // A request its endpoint refuses is refused alike, naming the field.
    let wrong = json!({"messages": user("Hi"), "tool_choice": "required"});
    let (status, text) = send(&state, "POST", "/v1/chat/completions/render", &wrong.to_string(), &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("\"param\":\"tool_choice\""), "{text}");
    wait_for_baseline(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_carry_vllms_names_for_llm_d() {
    let state = state(ServerConfig {
        model_name: "smollm2".into(),
        ..ServerConfig::default()
    });
    let (status, _) = post(&state, json!({"messages": user("Hello"), "max_tokens": 2})).await;
    assert_eq!(status, StatusCode::OK);
    let text = wait_for_baseline(&state).await;
    let blocks = metric(&text, "tessera_kv_blocks_total");
    for line in [
        "vllm:num_requests_running{model_name=\"smollm2\"} 0".to_string(),
        "vllm:num_requests_waiting{model_name=\"smollm2\"} 0".to_string(),
        format!(
            "vllm:cache_config_info{{block_size=\"16\",num_gpu_blocks=\"{blocks}\",enable_prefix_caching=\"True\"}} 1"
        ),
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
    }
    let usage = text
        .lines()
        .find_map(|l| l.strip_prefix("vllm:kv_cache_usage_perc{model_name=\"smollm2\"} "))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap();
    let held = metric(&text, "tessera_kv_blocks_used") + metric(&text, "tessera_kv_blocks_pinned");
    assert_eq!(usage, held / blocks, "a fraction of the pool, as vLLM's");
}
