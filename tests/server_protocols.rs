//! Anthropic's Messages and OpenAI's Responses routes on the real model,
//! through `Router::oneshot`: bad input is a 400 in the protocol's own error
//! shape naming the field (the chat route's hostile cases carried over:
//! malformed bodies, wrong types, deep schemas, what the models cannot do);
//! answers and streams have the shapes the SDKs read; a Responses
//! conversation continues through `previous_response_id` and reuses the
//! previous turn's reply from the cache; the pool ends at baseline.

use crate::server_api::{nested_arrays, send, state, wait_for_baseline};
use axum::http::StatusCode;
use serde_json::{json, Value};
use tessera_server::ServerConfig;

fn anthropic_tools() -> Value {
    json!([{"name": "get_weather", "description": "Weather for a city.", "input_schema": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}])
}

fn responses_tools() -> Value {
    json!([{"type": "function", "name": "get_weather", "description": "Weather for a city.", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}])
}

async fn post_to(state: &tessera_server::AppState, path: &str, body: &str) -> (StatusCode, Value) {
    let (status, text) = send(state, "POST", path, body, &[]).await;
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_are_anthropic_shaped_400s_naming_the_field() {
    let state = state(ServerConfig {
        max_body_bytes: 64 * 1024,
        ..ServerConfig::default()
    });
    let user = json!([{"role": "user", "content": "hi"}]);
    let deep = format!("tools[0].input_schema.properties.list{}", ".items".repeat(63));
    let cases: Vec<(String, &str, &str)> = vec![
        ("{\"messages\": [".into(), "", "not valid JSON"),
        (json!({"messages": user}).to_string(), "max_tokens", "required"),
        (json!({"max_tokens": 8, "messages": user, "temperature": "hot"}).to_string(), "temperature", "invalid type"),
        (json!({"max_tokens": 8, "messages": user, "temperature": 1.5}).to_string(), "temperature", "outside [0, 1]"),
        (json!({"max_tokens": 8, "messages": [{"role": "robot", "content": "x"}]}).to_string(), "messages[0].role", "unknown role"),
        (json!({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}).to_string(),
            "messages[0].content[0]", "images"),
        (json!({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "video"}]}]}).to_string(),
            "messages[0].content[0]", "unknown variant `video`"),
        (json!({"max_tokens": 8, "messages": user, "thinking": {"type": "enabled", "budget_tokens": 2048}}).to_string(),
            "thinking", "not supported"),
        (json!({"max_tokens": 8, "messages": user, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}).to_string(),
            "tools[0].type", "server tool"),
        (json!({"max_tokens": 8, "messages": user, "tools": [{"name": "t", "input_schema": nested_arrays(70)}],
            "tool_choice": {"type": "any"}}).to_string(), deep.as_str(), "nest more than 64 deep"),
        (json!({"max_tokens": 8, "messages": user, "tools": anthropic_tools(), "tool_choice": {"type": "tool", "name": "nope"}}).to_string(),
            "tool_choice", "`nope`"),
        (json!({"max_tokens": 8, "messages": user, "tool_choice": {"type": "any"}}).to_string(), "tool_choice", "needs `tools`"),
        (json!({"max_tokens": 8, "messages": user, "thinking": {"type": "enabled", "budget_tokens": 1024}}).to_string(),
            "thinking", "adaptive"),
        (json!({"max_tokens": 8, "messages": user, "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}}).to_string(),
            "context_management.edits[0].type", "not supported"),
        (json!({"max_tokens": 8, "messages": user, "output_config": {"format": {"type": "json_schema", "schema": {"type": "string"}}}}).to_string(),
            "output_config.format.schema", "object schema"),
        (json!({"max_tokens": 8, "messages": user, "stop_sequences": ["a", "b", "c", "d", "e"]}).to_string(), "stop_sequences", "limit of 4"),
        (json!({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "{"}]}).to_string(),
            "messages[1]", "prefill"),
    ];
    for (body, field, needle) in &cases {
        let (status, answer) = post_to(&state, "/v1/messages", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["type"], "error", "Anthropic's shape: {answer}");
        assert_eq!(answer["error"]["type"], "invalid_request_error", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(field) && message.contains(needle),
            "{field:?} / {needle:?} not in {message:?}"
        );
    }
    // What Claude Code sends beside its conversation is accepted: a max_tokens over the room left
    // (cut to fit), adaptive thinking, clearing thinking blocks, an effort hint, a system turn.
    let claude_code = json!({"max_tokens": 100000, "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}, "temperature": 0,
        "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": [{"type": "text", "text": "Say yes.", "cache_control": {"type": "ephemeral"}}]}]});
    let (status, answer) = post_to(&state, "/v1/messages?beta=true", &claude_code.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, answer) = post_to(&state, "/v1/messages/nope", "{}").await;
    assert_eq!(
        (status, &answer["error"]["type"]),
        (StatusCode::NOT_FOUND, &json!("not_found_error"))
    );
    wait_for_baseline(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_responses_requests_are_400s_naming_the_field() {
    let state = state(ServerConfig::default());
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({}), "", "missing field `input`"),
        (json!({"input": 7}), "input", "a string or a list of input items"),
        (
            json!({"input": [{"type": "reasoning", "summary": []}]}),
            "input[0].type",
            "reasoning items",
        ),
        (
            json!({"input": [{"type": "computer_call"}]}),
            "input[0].type",
            "unknown item type `computer_call`",
        ),
        (
            json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}),
            "input[0].content[0].type",
            "images",
        ),
        (
            json!({"input": [{"type": "function_call", "name": "f"}]}),
            "input[0].arguments",
            "needs `arguments`",
        ),
        (
            json!({"input": "hi", "tools": [{"type": "web_search"}]}),
            "tools[0].type",
            "only `function` tools",
        ),
        (
            json!({"input": "hi", "tools": responses_tools(), "tool_choice": {"type": "function", "name": "nope"}}),
            "tool_choice",
            "`nope`",
        ),
        (
            json!({"input": "hi", "previous_response_id": "resp_gone"}),
            "previous_response_id",
            "no stored response",
        ),
        (
            json!({"input": "hi", "reasoning": {"effort": "high"}}),
            "reasoning.effort",
            "not supported",
        ),
        (
            json!({"input": "hi", "max_output_tokens": 0}),
            "max_output_tokens",
            "at least 1",
        ),
        (
            json!({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object",
            "properties": {"a": {"not": {}}}}}}}),
            "text.format.schema.properties.a.not",
            "keyword `not`",
        ),
        (
            json!({"input": "hi", "tools": [{"type": "function", "name": "t", "parameters": nested_arrays(70)}], "tool_choice": "required"}),
            "tools[0].parameters.properties.list",
            "nest more than 64 deep",
        ),
    ];
    for (body, field, needle) in &cases {
        let (status, answer) = post_to(&state, "/v1/responses", &body.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        let error = &answer["error"];
        let param = error["param"].as_str().unwrap_or_default();
        assert!(param.starts_with(field), "{body}: param {param:?}, expected {field:?}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{needle:?} not in {message:?}");
    }
    wait_for_baseline(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_answers_with_a_tool_use_and_streams_the_sdk_sequence() {
    let keyed = state(ServerConfig {
        api_key: Some("k".into()),
        ..ServerConfig::default()
    });
    let body = json!({"max_tokens": 48, "temperature": 0, "tools": anthropic_tools(),
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "messages": [{"role": "user", "content": "Weather in Lima?"}]});
    let (status, text) = send(
        &keyed,
        "POST",
        "/v1/messages",
        &body.to_string(),
        &[("x-api-key", "no")],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(text.contains("authentication_error"), "{text}");
    let (status, _) = send(
        &keyed,
        "POST",
        "/v1/messages/count_tokens",
        &body.to_string(),
        &[("x-api-key", "k")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "x-api-key is accepted");
    let (status, _) = send(&keyed, "GET", "/v1/models", "", &[("authorization", "Bearer k")]).await;
    assert_eq!(status, StatusCode::OK, "so is a bearer token");
    let state = state(ServerConfig::default());
    let (status, text) = send(&state, "POST", "/v1/messages", &body.to_string(), &[]).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let message: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (&message["type"], &message["role"]),
        (&json!("message"), &json!("assistant"))
    );
    assert_eq!(message["stop_reason"], "tool_use", "{message}");
    let call = message["content"].as_array().unwrap().last().unwrap();
    assert_eq!(call["type"], "tool_use");
    assert!(
        call["id"].as_str().unwrap().starts_with("toolu_") && call["input"]["city"].is_string(),
        "{call}"
    );
    let usage = &message["usage"];
    assert!(
        usage["input_tokens"].as_u64().unwrap() > 0 && usage["cache_read_input_tokens"].is_u64(),
        "{usage}"
    );

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let (status, text) = send(&state, "POST", "/v1/messages", &streamed.to_string(), &[]).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let events: Vec<(&str, Value)> = text
        .split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let name = frame
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .expect("every event is named");
            let data = frame
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .expect("every event has data");
            (name, serde_json::from_str(data).unwrap())
        })
        .collect();
    let names: Vec<&str> = events.iter().map(|(name, _)| *name).collect();
    assert_eq!(names[..2], ["message_start", "ping"], "{names:?}");
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"], "{names:?}");
    assert!(
        events.iter().all(|(name, data)| data["type"] == *name),
        "the type is the event's name"
    );
    let partial: String = events
        .iter()
        .filter(|(_, data)| data["delta"]["type"] == "input_json_delta")
        .map(|(_, data)| data["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        call["input"],
        "the stream's call is the answer's"
    );
    assert_eq!(events[names.len() - 2].1["delta"]["stop_reason"], "tool_use");
    wait_for_baseline(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_continues_through_previous_response_id_from_the_cache() {
    let state = state(ServerConfig::default());
    let body = json!({"input": "Weather in Lima?", "instructions": "You are a weather assistant.", "temperature": 0,
        "tools": responses_tools(), "tool_choice": "required", "parallel_tool_calls": false, "max_output_tokens": 48});
    let (status, first) = post_to(&state, "/v1/responses", &body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(
        (&first["object"], &first["status"]),
        (&json!("response"), &json!("completed")),
        "{first}"
    );
    let call = first["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "function_call")
        .unwrap()
        .clone();
    assert!(call["call_id"].is_string() && serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).is_ok());
    let next = json!({"previous_response_id": first["id"], "instructions": "You are a weather assistant.",
        "temperature": 0, "tools": responses_tools(), "max_output_tokens": 16, "stream": true,
        "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "{\"temp_c\": 19}"}]});
    let (status, text) = send(&state, "POST", "/v1/responses", &next.to_string(), &[]).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let numbers: Vec<u64> = events.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
    assert_eq!(
        numbers,
        (0..events.len() as u64).collect::<Vec<_>>(),
        "sequence numbers count up"
    );
    assert_eq!(events[0]["type"], "response.created");
    let last = events.last().unwrap();
    assert!(
        matches!(
            last["type"].as_str(),
            Some("response.completed" | "response.incomplete")
        ),
        "{last}"
    );
    let usage = &last["response"]["usage"];
    let before = first["usage"]["input_tokens"].as_u64().unwrap() + first["usage"]["output_tokens"].as_u64().unwrap();
    let cached = usage["input_tokens_details"]["cached_tokens"].as_u64().unwrap();
    assert!(
        cached + 16 > before,
        "reused {cached} of turn 1's {before} prompt and reply tokens"
    );
    wait_for_baseline(&state).await;
}
