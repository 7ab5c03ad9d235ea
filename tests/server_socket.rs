//! The server over a real socket on the real model: a chat completion end to
//! end, a client that disconnects mid-stream (its request is cancelled and
//! its blocks freed), and a graceful shutdown that lets an in-flight stream
//! finish.

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tessera_engine::{EngineConfig, EngineHandle};
use tessera_model::LoadOptions;
use tessera_server::{serve, AppState, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// A server on an ephemeral port; sending on the returned channel shuts it down.
async fn start() -> (
    SocketAddr,
    EngineHandle,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let engine = EngineHandle::start(
        crate::common::load(&LoadOptions::default()),
        EngineConfig::for_tokens(8192),
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let state = AppState::new(engine.clone(), ServerConfig::default());
    let server = tokio::spawn(serve(listener, state, async {
        let _ = stopped.await;
    }));
    (address, engine, stop, server)
}

/// Open a connection and send a POST of `body` to `path`.
async fn open(address: SocketAddr, path: &str, body: &Value) -> TcpStream {
    let mut socket = TcpStream::connect(address).await.unwrap();
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    socket
}

/// The whole response (the connection closes after it).
async fn read_all(mut socket: TcpStream) -> String {
    let mut bytes = Vec::new();
    socket.read_to_end(&mut bytes).await.unwrap();
    String::from_utf8(bytes).unwrap()
}

async fn wait_idle(engine: &EngineHandle) -> tessera_engine::EngineMetrics {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = engine.metrics().recv().await.unwrap();
        if metrics.requests_running == 0 && metrics.requests_waiting == 0 {
            assert_eq!(metrics.kv_blocks_used, 0, "{metrics:?}");
            return metrics;
        }
        assert!(Instant::now() < deadline, "never idle: {metrics:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_completion_over_a_socket() {
    let (address, engine, stop, server) = start().await;
    let body = json!({"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8, "temperature": 0});
    let response = read_all(open(address, "/v1/chat/completions", &body).await).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let json_start = response.find("\r\n\r\n").unwrap() + 4;
    let answer: Value = serde_json::from_str(&response[json_start..]).unwrap();
    assert_eq!(answer["object"], "chat.completion");
    assert!(!answer["choices"][0]["message"]["content"].as_str().unwrap().is_empty());
    wait_idle(&engine).await;
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnected_client_cancels_its_request() {
    let (address, engine, stop, server) = start().await;
    let story = "Write a long story about a lighthouse.";
    // Every protocol's stream: the request, and what its first text event holds.
    let routes = [
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": story}], "max_tokens": 2000, "temperature": 0, "stream": true}),
            "\"content\":\"",
        ),
        (
            "/v1/messages",
            json!({"messages": [{"role": "user", "content": story}], "max_tokens": 2000, "temperature": 0, "stream": true}),
            "text_delta",
        ),
        (
            "/v1/responses",
            json!({"input": story, "max_output_tokens": 2000, "temperature": 0, "stream": true}),
            "response.output_text.delta",
        ),
    ];
    for (cancelled, (path, body, marker)) in routes.iter().enumerate() {
        let mut socket = open(address, path, body).await;
        // Read until the first text event, then hang up.
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains(marker) || seen.len() < 600 {
            let n = socket.read(&mut buffer).await.unwrap();
            assert!(
                n > 0,
                "{path}: the stream ended early: {}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buffer[..n]);
        }
        assert!(engine.metrics().recv().await.unwrap().requests_running == 1, "{path}");
        drop(socket);
        let metrics = wait_idle(&engine).await;
        assert_eq!(metrics.requests_cancelled, cancelled as u64 + 1, "{path}: {metrics:?}");
        assert!(
            metrics.generated_tokens < 2000 * (cancelled as u64 + 1),
            "{path}: generation went on: {metrics:?}"
        );
    }
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_an_in_flight_stream_finish() {
    let (address, engine, stop, server) = start().await;
    let body = json!({"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "stream": true});
    let mut socket = open(address, "/v1/completions", &body).await;
    let mut first = [0u8; 64];
    let n = socket.read(&mut first).await.unwrap();
    assert!(n > 0);
    stop.send(()).unwrap();
    let rest = read_all(socket).await;
    assert!(rest.contains("data: [DONE]"), "the stream was cut: {rest}");
    assert!(rest.contains("\"finish_reason\":\"length\""), "{rest}");
    server.await.unwrap().unwrap();
    // The engine was shut down after the stream: it answers no more.
    assert!(engine.metrics().recv().await.is_err());
    // And the port is closed.
    assert!(TcpStream::connect(address).await.is_err());
}

/// `GET path`, answered whole.
async fn get(address: SocketAddr, path: &str) -> String {
    let mut socket = TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    socket.write_all(request.as_bytes()).await.unwrap();
    read_all(socket).await
}

/// A chat request carrying `count` tools, distinct per `variant` (so each compiles).
fn many_tools(count: usize, variant: usize) -> Value {
    let tools: Vec<Value> = (0..count)
        .map(|i| {
            json!({"type": "function", "function": {
                "name": format!("tool_{i}"), "description": format!("Looks up item {i} (set {variant})."),
                "parameters": {"type": "object", "properties": {
                    "query": {"type": "string", "minLength": 1, "pattern": "^[a-z ]+$"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
                    "required": ["query"]}}})
        })
        .collect();
    json!({"messages": [{"role": "user", "content": "hi"}], "tools": tools, "max_tokens": 1})
}

/// Rendering, tokenizing and compiling 8 concurrent requests of 2,000 tools
/// run on blocking threads: `/health` keeps answering on the async workers.
/// The latency figures (target p99 under 50 ms, measured 14–25 ms) are
/// printed for BENCHMARKS.md, not asserted: a shared CI machine once stretched
/// p99 to 91 ms of a 1.75 s burst. What is asserted has no clock in it: the
/// first probe is answered while all 8 validations are still running, and
/// probes keep being answered through the burst. With validation on the async
/// workers the first probe waited for a validation to end and only two probes
/// fit in the burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_stays_fast_while_large_tool_sets_are_validated() {
    let (address, engine, stop, server) = start().await;
    // Every body is built before the first request starts: built one by one
    // between the spawns, a loaded machine let the first validation finish
    // before the first probe was even sent.
    let bodies: Vec<Value> = (0..8).map(|variant| many_tools(2000, variant)).collect();
    let burst = Instant::now();
    let requests: Vec<_> = bodies
        .into_iter()
        .map(|body| tokio::spawn(async move { read_all(open(address, "/v1/chat/completions", &body).await).await }))
        .collect();
    let mut latencies = Vec::new();
    let mut answered_before_any_finished = false;
    while !requests.iter().all(|request| request.is_finished()) {
        let asked = Instant::now();
        let response = get(address, "/health").await;
        latencies.push(asked.elapsed());
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        if latencies.len() == 1 {
            answered_before_any_finished = !requests.iter().any(|request| request.is_finished());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let burst = burst.elapsed();
    for request in requests {
        let response = request.await.unwrap();
        // 2,000 tools fill the model's context: a 400 naming `messages`, after the work.
        assert!(
            response.starts_with("HTTP/1.1 400"),
            "{}",
            &response[..response.len().min(400)]
        );
        assert!(response.contains("\"param\":\"messages\""), "{response}");
    }
    latencies.sort();
    let quantile = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "/health during 8 × 2,000-tool validations ({burst:?}): {} probes, p50 {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        quantile(0.5),
        quantile(0.99),
        quantile(1.0)
    );
    assert!(
        answered_before_any_finished,
        "the first /health probe waited for a validation to finish"
    );
    assert!(
        latencies.len() >= 5,
        "only {} probes were answered during the burst",
        latencies.len()
    );
    wait_idle(&engine).await;
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
