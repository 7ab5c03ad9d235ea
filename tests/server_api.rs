//! The OpenAI-compatible server's handlers on the real model, through
//! `Router::oneshot`: every bad input gets its status, OpenAI error shape and
//! the field it names; tools are called in every mode, streamed and not;
//! repeated conversations hit the prefix cache; the pool ends at baseline.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tessera_engine::{EngineConfig, EngineHandle, GenerateRequest};
use tessera_model::LoadOptions;
use tessera_server::{router, AppState, ServerConfig};
use tower::ServiceExt;

pub(crate) fn engine(config: EngineConfig) -> EngineHandle {
    EngineHandle::start(crate::common::load(&LoadOptions::default()), config).expect("starting the engine")
}

pub(crate) fn state(config: ServerConfig) -> AppState {
    AppState::new(engine(EngineConfig::for_tokens(8192)), config)
}

/// Send `body` to `path` and read the status and the whole body.
pub(crate) async fn send(
    state: &AppState,
    method: &str,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = router(state.clone())
        .oneshot(request.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

pub(crate) async fn post(state: &AppState, body: Value) -> (StatusCode, Value) {
    let (status, text) = send(state, "POST", "/v1/chat/completions", &body.to_string(), &[]).await;
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, value)
}

/// Assert an OpenAI error body with `status` naming `param`.
fn assert_error(status: StatusCode, body: &Value, expected: StatusCode, param: Option<&str>, needle: &str) {
    assert_eq!(status, expected, "{body}");
    let error = &body["error"];
    assert!(
        error["type"].is_string() && error.get("code").is_some(),
        "OpenAI shape: {body}"
    );
    assert_eq!(error["param"].as_str(), param, "{body}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{needle:?} not in {message:?}");
}

pub(crate) fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "browser_open", "description": "Open a URL.",
            "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "browser_find", "description": "Find text on the page.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false}}},
    ])
}

/// An object whose required `list` nests `depth` arrays: deeper than a value may
/// nest (arrays, since serde_json refuses a body nested over 128 levels and
/// each object schema takes two).
pub(crate) fn nested_arrays(depth: usize) -> Value {
    let list = (0..depth).fold(
        json!({"type": "integer"}),
        |inner, _| json!({"type": "array", "items": inner, "minItems": 1}),
    );
    json!({"type": "object", "properties": {"list": list}, "required": ["list"]})
}

pub(crate) fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

pub(crate) async fn wait_for_baseline(state: &AppState) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, text) = send(state, "GET", "/metrics", "", &[]).await;
        let value = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(-1.0)
        };
        if value("tessera_requests_running") == 0.0 && value("tessera_requests_waiting") == 0.0 {
            assert_eq!(value("tessera_kv_blocks_used"), 0.0, "{text}");
            return text;
        }
        assert!(Instant::now() < deadline, "never idle: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_their_status_and_name_the_field() {
    let state = state(ServerConfig {
        max_body_bytes: 64 * 1024,
        ..ServerConfig::default()
    });
    let ok = StatusCode::BAD_REQUEST;
    let (status, text) = send(&state, "POST", "/v1/chat/completions", "{\"messages\": [", &[]).await;
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_error(status, &body, ok, None, "not valid JSON");
    // A 400 for a schema names the field down to the keyword.
    let deep_param = format!("tools[0].function.parameters.properties.list{}", ".items".repeat(63));
    let mut not_in_third_tool = tools();
    not_in_third_tool[2] = json!({"type": "function", "function": {"name": "todo_add",
        "parameters": {"type": "object", "properties": {"due": {"type": "string", "not": {"const": ""}}}}}});
    let cases: Vec<(Value, Option<&str>, &str)> = vec![
        (
            json!({"messages": user("hi"), "temperature": "hot"}),
            Some("temperature"),
            "invalid type",
        ),
        (
            json!({"messages": [{"role": "robot", "content": "x"}]}),
            Some("messages[0].role"),
            "unknown role",
        ),
        (
            json!({"messages": user("hi"), "tools": tools(), "tool_choice": "sometimes"}),
            Some("tool_choice"),
            "unknown mode `sometimes`",
        ),
        (
            json!({"messages": user("hi"), "tools": tools(), "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "often", "tools": []}}}),
            Some("tool_choice.allowed_tools.mode"),
            "unknown mode `often`",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
            Some("messages[0].content[0].type"),
            "unknown content part type `image_url`",
        ),
        (
            json!({"messages": user("hi"), "tools": [{"type": "retrieval", "function": {"name": "t"}}]}),
            Some("tools[0].type"),
            "unknown tool type `retrieval`",
        ),
        (
            json!({"messages": user("hi"), "response_format": {"type": "yaml"}}),
            Some("response_format.type"),
            "unknown response format `yaml`",
        ),
        (json!({"messages": []}), Some("messages"), "at least one"),
        (
            json!({"messages": user("hi"), "temperature": 3.5}),
            Some("temperature"),
            "outside [0, 2]",
        ),
        (json!({"messages": user("hi"), "top_p": 0.0}), Some("top_p"), "(0, 1]"),
        (
            json!({"messages": user("hi"), "max_tokens": 0}),
            Some("max_tokens"),
            "at least 1",
        ),
        (
            json!({"messages": user("hi"), "max_tokens": 100000}),
            Some("max_tokens"),
            "context",
        ),
        (json!({"messages": user("hi"), "n": 2}), Some("n"), "n = 1"),
        (
            json!({"messages": user("hi"), "stop": ["a", "b", "c", "d", "e"]}),
            Some("stop"),
            "limit of 4",
        ),
        (
            json!({"messages": user("hi"), "tools": tools(), "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            Some("tool_choice"),
            "`nope`",
        ),
        (
            json!({"messages": user("hi"), "tools": tools(), "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": ["shell_*"]}}}),
            Some("tool_choice"),
            "shell_",
        ),
        (
            json!({"messages": user("hi"), "tools": [{"type": "function", "function": {"name": "t", "parameters": {"type": "strin"}}}]}),
            Some("tools[0].function.parameters.type"),
            "unknown type `strin`",
        ),
        (
            json!({"messages": user("hi"), "tools": [{"type": "function", "function": {"name": "t", "parameters": nested_arrays(70)}}], "tool_choice": "required"}),
            Some(deep_param.as_str()),
            "nest more than 64 deep",
        ),
        (
            json!({"messages": user("hi"), "tools": not_in_third_tool, "tool_choice": "required"}),
            Some("tools[2].function.parameters.properties.due.not"),
            "keyword `not` is not supported",
        ),
        (
            json!({"messages": user("hi"), "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"uniqueItems": true}]}}}}}}),
            Some("response_format.json_schema.schema.properties.a.anyOf[1].uniqueItems"),
            "keyword `uniqueItems` is not supported",
        ),
        (
            json!({"messages": user("hi"), "tools": [{"type": "function", "function": {"name": "t"}}, {"type": "function", "function": {"name": "t"}}]}),
            Some("tools"),
            "defined twice",
        ),
        (
            json!({"messages": user("hi"), "tool_choice": "required"}),
            Some("tool_choice"),
            "needs `tools`",
        ),
        (
            json!({"messages": user("hi"), "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string"}}}}),
            Some("response_format.json_schema.schema"),
            "object schema",
        ),
        (
            json!({"messages": user("hi"), "tools": tools(), "tool_choice": "auto", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}}),
            Some("response_format"),
            "cannot be combined with tools",
        ),
        (
            // Budget-aware closing: a forced call that cannot be complete within max_tokens is refused.
            json!({"messages": user("hi"), "tools": tools(), "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "max_tokens": 3}),
            Some("max_tokens"),
            "the shortest complete tool call needs",
        ),
        (
            json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]}),
            Some("messages[0].tool_calls[0].function.arguments"),
            "not valid JSON",
        ),
    ];
    for (body, param, needle) in cases {
        let (status, answer) = post(&state, body.clone()).await;
        assert_error(status, &answer, ok, param, needle);
    }
    let long = "word ".repeat(9000);
    let (status, answer) = post(&state, json!({"messages": user(&long)})).await;
    assert_error(status, &answer, ok, Some("messages"), "context");
    let huge = json!({"messages": user(&"x".repeat(70 * 1024))}).to_string();
    let (status, text) = send(&state, "POST", "/v1/chat/completions", &huge, &[]).await;
    assert_error(
        status,
        &serde_json::from_str(&text).unwrap(),
        StatusCode::PAYLOAD_TOO_LARGE,
        None,
        "over the limit",
    );
    let (status, text) = send(&state, "GET", "/v1/nothing", "", &[]).await;
    assert_error(
        status,
        &serde_json::from_str(&text).unwrap(),
        StatusCode::NOT_FOUND,
        None,
        "/v1/nothing",
    );
    let (status, text) = send(&state, "POST", "/v1/completions", r#"{"prompt": ["a", "b"]}"#, &[]).await;
    assert_error(
        status,
        &serde_json::from_str(&text).unwrap(),
        ok,
        Some("prompt"),
        "one prompt",
    );
    for (body, param) in [
        (r#"{"prompt": "a", "echo": true}"#, "echo"),
        (r#"{"prompt": "a", "logprobs": 2}"#, "logprobs"),
        (r#"{"prompt": "a", "best_of": 3}"#, "best_of"),
    ] {
        let (status, text) = send(&state, "POST", "/v1/completions", body, &[]).await;
        assert_error(
            status,
            &serde_json::from_str(&text).unwrap(),
            ok,
            Some(param),
            "supported",
        );
    }
    let long_prompt = json!({"prompt": "word ".repeat(9000), "max_tokens": 1}).to_string();
    let (status, text) = send(&state, "POST", "/v1/completions", &long_prompt, &[]).await;
    assert_error(
        status,
        &serde_json::from_str(&text).unwrap(),
        ok,
        Some("prompt"),
        "context",
    );
    let (status, text) = send(&state, "GET", "/v1/chat/completions", "", &[]).await;
    let body = serde_json::from_str(&text).unwrap();
    assert_error(status, &body, StatusCode::METHOD_NOT_ALLOWED, None, "GET");
    // A call without arguments may come back as "" in the history: read as {}.
    let history = json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}]},
        {"role": "user", "content": "ok"}], "max_tokens": 1});
    let (status, answer) = post(&state, history).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    wait_for_baseline(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lenient_server_ignores_what_it_cannot_enforce_and_says_so() {
    let state = state(ServerConfig {
        lenient_schemas: true,
        ..ServerConfig::default()
    });
    let tool = json!([{"type": "function", "function": {"name": "todo_add", "parameters": {"type": "object",
        "properties": {"title": {"type": "string", "not": {"const": ""}}}, "required": ["title"], "additionalProperties": false}}}]);
    let body = json!({"messages": user("Add a todo: buy milk"), "tools": tool, "tool_choice": "required", "temperature": 0, "max_tokens": 32});
    let request = Request::builder()
        .method("POST")
        .uri("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = router(state.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let warning = response
        .headers()
        .get("x-tessera-schema-warnings")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        warning.contains("`todo_add` at /properties/title/not ignored"),
        "{warning}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_guards_everything_but_health() {
    let state = state(ServerConfig {
        api_key: Some("sekret".into()),
        ..ServerConfig::default()
    });
    let (status, text) = send(&state, "GET", "/v1/models", "", &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
    let (status, _) = send(&state, "GET", "/v1/models", "", &[("authorization", "Bearer wrong")]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, text) = send(&state, "GET", "/v1/models", "", &[("authorization", "Bearer sekret")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["data"][0]["object"],
        "model"
    );
    let (status, _) = send(&state, "GET", "/health", "", &[]).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_429() {
    let handle = engine(EngineConfig {
        max_running: 1,
        max_waiting: 1,
        ..EngineConfig::for_tokens(4096)
    });
    let state = AppState::new(handle.clone(), ServerConfig::default());
    let prompt = handle.tokenizer().encode("Count: one two three").unwrap();
    let long = GenerateRequest {
        stop_at_eos: false,
        ..GenerateRequest::greedy(prompt.clone(), 400)
    };
    let running = handle.submit(long.clone()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while handle.metrics().recv().await.unwrap().requests_running == 0 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let queued = handle.submit(long).unwrap();
    let (status, body) = post(&state, json!({"messages": user("hi"), "max_tokens": 1})).await;
    assert_error(status, &body, StatusCode::TOO_MANY_REQUESTS, None, "queue is full");
    drop((running, queued));
    wait_for_baseline(&state).await;
}

/// Every tool-choice mode, not streamed: calls parse and obey the mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_choice_modes_are_obeyed() {
    let state = state(ServerConfig::default());
    let ask = user("What is the weather in Paris? Use a tool.");
    let choices = [
        (json!("none"), None),
        (json!("auto"), None),
        (
            json!("required"),
            Some(vec!["get_weather", "browser_open", "browser_find"]),
        ),
        (
            json!({"type": "function", "function": {"name": "get_weather"}}),
            Some(vec!["get_weather"]),
        ),
        (
            json!({"type": "function", "function": {"name": "browser_*"}}),
            Some(vec!["browser_open", "browser_find"]),
        ),
        (
            json!({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "browser_find"}}]}}),
            Some(vec!["browser_find"]),
        ),
    ];
    for (choice, must_call) in choices {
        let body = json!({"messages": ask, "tools": tools(), "tool_choice": choice, "temperature": 0, "max_tokens": 64, "parallel_tool_calls": false});
        let (status, answer) = post(&state, body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let message = &answer["choices"][0]["message"];
        let calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
        let finish = answer["choices"][0]["finish_reason"].as_str().unwrap();
        match &must_call {
            None if choice == "none" => assert!(calls.is_empty(), "none made a call: {answer}"),
            None => {}
            Some(names) => {
                assert_eq!(calls.len(), 1, "{choice}: {answer}");
                let name = calls[0]["function"]["name"].as_str().unwrap();
                assert!(names.contains(&name), "{choice}: called {name}");
                let arguments = calls[0]["function"]["arguments"].as_str().unwrap();
                // A call cut by max_tokens comes back partial, with finish reason `length`.
                match finish {
                    "tool_calls" => assert!(serde_json::from_str::<Value>(arguments).unwrap().is_object()),
                    _ => assert!(finish == "length" && arguments.starts_with('{'), "{answer}"),
                }
                assert_eq!(calls[0]["type"], "function");
                assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
            }
        }
        let usage = &answer["usage"];
        assert!(usage["prompt_tokens_details"]["cached_tokens"].is_u64(), "{usage}");
    }
    wait_for_baseline(&state).await;
}

/// Streamed: the deltas assemble into the same call the JSON answer holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_calls_assemble_from_deltas_and_usage_comes_last() {
    let state = state(ServerConfig::default());
    let body = json!({"messages": user("Weather in Oslo?"), "tools": tools(), "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "temperature": 0, "max_tokens": 48, "parallel_tool_calls": false, "stream": true, "stream_options": {"include_usage": true}});
    let (status, text) = send(&state, "POST", "/v1/chat/completions", &body.to_string(), &[]).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let events: Vec<&str> = text.lines().filter_map(|line| line.strip_prefix("data: ")).collect();
    assert_eq!(events.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let (mut name, mut arguments, mut finish) = (String::new(), String::new(), None);
    for chunk in &chunks[..chunks.len() - 1] {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        let choice = &chunk["choices"][0];
        if let Some(calls) = choice["delta"]["tool_calls"].as_array() {
            name.push_str(calls[0]["function"]["name"].as_str().unwrap_or_default());
            arguments.push_str(calls[0]["function"]["arguments"].as_str().unwrap_or_default());
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = Some(reason.to_string());
        }
    }
    assert_eq!(name, "get_weather");
    let args: Value = serde_json::from_str(&arguments).unwrap_or_else(|e| panic!("{e}: {arguments}"));
    assert!(args["city"].is_string(), "{args}");
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    let usage = &chunks.last().unwrap()["usage"];
    assert!(chunks.last().unwrap()["choices"].as_array().unwrap().is_empty());
    assert!(usage["completion_tokens"].as_u64().unwrap() > 0, "{usage}");
    let plain = json!({"messages": body["messages"], "tools": body["tools"], "tool_choice": body["tool_choice"], "temperature": 0, "max_tokens": 48, "parallel_tool_calls": false});
    let (_, answer) = post(&state, plain).await;
    let call = &answer["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).unwrap(),
        args
    );
    wait_for_baseline(&state).await;
}

/// Turn n+1 of a conversation reuses turn n's prompt and reply from the cache:
/// the call is sent back as the server returned it (arguments as generated)
/// and runs the very tokens the engine generated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_turn_hits_the_previous_turns_prefix() {
    let state = state(ServerConfig::default());
    let mut messages = vec![
        json!({"role": "system", "content": "You are a weather assistant."}),
        json!({"role": "user", "content": "Weather in Lima?"}),
    ];
    // A named choice: the test is about the cache, not about which tool a 135M model picks.
    let choice = json!({"type": "function", "function": {"name": "get_weather"}});
    let request = |messages: &Vec<Value>| json!({"messages": messages, "tools": tools(), "tool_choice": choice, "temperature": 0, "max_tokens": 64, "parallel_tool_calls": false});
    let (_, first) = post(&state, request(&messages)).await;
    let first_prompt = first["usage"]["prompt_tokens"].as_u64().unwrap();
    let first_reply = first["usage"]["completion_tokens"].as_u64().unwrap();
    let call = first["choices"][0]["message"]["tool_calls"][0].clone();
    assert_eq!(first["choices"][0]["finish_reason"], "tool_calls", "{first}");
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call.clone()]}));
    messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "{\"temp_c\": 19}"}));
    messages.push(json!({"role": "user", "content": "And in Quito?"}));
    let (_, second) = post(&state, request(&messages)).await;
    let cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    // Turn n's prompt and reply are reused up to the last whole block (16 tokens) of them.
    assert!(
        cached + 16 > first_prompt + first_reply,
        "cached {cached} of turn n's {first_prompt} prompt and {first_reply} reply tokens"
    );
    // The same request again renders to the same tokens: all but the last are reused.
    let (_, again) = post(&state, request(&messages)).await;
    let usage = &again["usage"];
    assert_eq!(
        usage["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap() + 1,
        usage["prompt_tokens"].as_u64().unwrap(),
        "{usage}"
    );
    wait_for_baseline(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_formats_completions_and_stop_strings() {
    let state = state(ServerConfig::default());
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"], "additionalProperties": false});
    let body = json!({"messages": user("Invent a person."), "temperature": 0, "max_tokens": 80,
        "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}});
    let (status, answer) = post(&state, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let content = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(answer["choices"][0]["finish_reason"], "stop", "{answer}");
    let person: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content}"));
    assert!(person["name"].is_string() && person["age"].is_i64(), "{person}");
    let (status, text) = send(
        &state,
        "POST",
        "/v1/completions",
        r#"{"prompt": "One, two, three,", "max_tokens": 8, "temperature": 0}"#,
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["object"], "text_completion");
    let free = answer["choices"][0]["text"].as_str().unwrap().to_string();
    assert_eq!(answer["usage"]["completion_tokens"], 8);
    // A stop string taken from the free text cuts the answer before it.
    let stop: String = free.trim_start().chars().take(3).collect();
    let body = json!({"prompt": "One, two, three,", "max_tokens": 8, "temperature": 0, "stop": stop});
    let (_, text) = send(&state, "POST", "/v1/completions", &body.to_string(), &[]).await;
    let answer: Value = serde_json::from_str(&text).unwrap();
    let cut = answer["choices"][0]["text"].as_str().unwrap();
    assert_eq!(answer["choices"][0]["finish_reason"], "stop", "{answer}");
    assert_eq!(cut, &free[..free.find(&stop).unwrap()]);
    wait_for_baseline(&state).await;
}
