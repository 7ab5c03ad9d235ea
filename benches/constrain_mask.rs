//! Criterion bench of one allowed-token mask on the real 49,152-token
//! vocabulary, in typical states: auto free text, right after the opener, in
//! the name, inside a string argument, inside a number argument; and the slow
//! case, a free-form object key.
//! Run: `cargo bench --bench constrain_mask` (needs models/, see scripts/fetch-model.sh).

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::sync::Arc;
use tessera_constrain::{
    CallFormat, CallMode, CompiledTools, Envelope, ToolCallMatcher, ToolChoice, ToolDef, Vocabulary,
};

/// The vocabulary of a shipped model's GGUF (fetched when missing).
fn vocabulary(path: &std::path::Path) -> Vocabulary {
    let tokenizer = tessera_model::GgufSource::open(path)
        .and_then(|gguf| gguf.tokenizer())
        .expect("reading the tokenizer");
    Vocabulary::new(&tokenizer.token_bytes(), tokenizer.stop_ids())
}

fn tools() -> Arc<CompiledTools> {
    let schema = json!({"type": "object", "properties": {
        "path": {"type": "string"}, "offset": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}}
    }, "required": ["path"], "additionalProperties": false});
    let mut tools: Vec<ToolDef> = ["file_read", "file_write", "browser_open", "shell_run"]
        .iter()
        .map(|name| ToolDef {
            name: name.to_string(),
            description: String::new(),
            parameters: schema.clone(),
        })
        .collect();
    tools.push(ToolDef {
        name: "web_find".into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "additionalProperties": true}),
    });
    Arc::new(CompiledTools::compile(&tools).expect("compiling tools"))
}

fn masks(c: &mut Criterion) {
    // SmolLM2's 49,152 tokens, and Qwen2.5's 151,936 (issue 18: at most twice the time).
    let smollm2 = vocabulary(&common::model_path());
    run_states(c, "mask", &smollm2);
    let qwen = vocabulary(&tessera_fixtures::model("qwen2.5-coder-1.5b"));
    run_states(c, "mask-qwen-152k", &qwen);
}

/// Masks in typical states: the trie walk, the cache, and the budget filter
/// on a fresh matcher and on a warm one.
fn run_states(c: &mut Criterion, group_name: &str, vocab: &Vocabulary) {
    let vocab = vocab.clone();
    let tools = tools();
    let auto = ToolChoice {
        mode: CallMode::Auto,
        allowed: None,
        parallel: false,
    };
    let states = [
        ("auto free text", "Let me check the file first. "),
        // At the reply's start a bare call may begin: every token is walked.
        ("auto reply start", ""),
        ("in a bare call's name", "{\"name\": \"file_"),
        ("after the opener", "<tool_call>\n{\"name\": \""),
        ("in the name", "<tool_call>\n{\"name\": \"file_"),
        (
            "inside a string",
            "<tool_call>\n{\"name\": \"file_read\", \"arguments\": {\"path\": \"src/ma",
        ),
        (
            "inside a number",
            "<tool_call>\n{\"name\": \"file_read\", \"arguments\": {\"path\": \"a\", \"offset\": 12",
        ),
        // Free-form keys (additionalProperties) allow almost any token: plain ones are taken wholesale.
        (
            "inside a free-form key",
            "<tool_call>\n{\"name\": \"file_read\", \"arguments\": {\"path\": \"a\", \"env\": {\"PA",
        ),
        (
            "inside a declared key of an open object",
            "<tool_call>\n{\"name\": \"web_find\", \"arguments\": {\"que",
        ),
    ];
    let mut group = c.benchmark_group(group_name);
    for (label, text) in states {
        let mut matcher =
            ToolCallMatcher::new(tools.clone(), &auto, &Envelope::new(CallFormat::Hermes)).expect("matcher");
        assert!(matcher.advance_text(text), "{label}: the prefix is valid");
        group.bench_function(format!("{label} (trie walk)"), |b| {
            b.iter(|| matcher.compute_mask_uncached(&vocab))
        });
        group.bench_function(format!("{label} (cached)"), |b| b.iter(|| matcher.compute_mask(&vocab)));
        // Budget-aware closing: each allowed token's next state priced by its completion.
        group.bench_function(format!("{label} (within 64 tokens, first time)"), |b| {
            b.iter_batched(
                || {
                    let mut fresh = ToolCallMatcher::new(tools.clone(), &auto, &Envelope::new(CallFormat::Hermes))
                        .expect("matcher");
                    assert!(fresh.advance_text(text));
                    fresh
                },
                |mut fresh| fresh.compute_mask_within(&vocab, 64),
                criterion::BatchSize::LargeInput,
            )
        });
        group.bench_function(format!("{label} (within 64 tokens, again)"), |b| {
            b.iter(|| matcher.compute_mask_within(&vocab, 64))
        });
    }
    group.finish();
}

/// Compiling a 50-tool set (each tool a distinct schema with the common
/// keywords), and finding it again in the cache by content.
fn compile(c: &mut Criterion) {
    let tools: Vec<ToolDef> = (0..50)
        .map(|i| ToolDef {
            name: format!("tool_{i}"),
            description: format!("Tool number {i}."),
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string", "minLength": 1, "maxLength": 256},
                "due": {"type": "string", "format": "date"},
                "id": {"type": "string", "pattern": format!("^[a-z]{{{}}}-[0-9]+$", 1 + i % 5)},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100 + i},
                "mode": {"enum": ["read", "write", format!("mode_{i}")]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
                "options": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"force": {"type": "boolean"}}}]}
            }, "required": ["path"], "additionalProperties": false}),
        })
        .collect();
    let mut group = c.benchmark_group("compile");
    group.bench_function("50 tools", |b| {
        b.iter(|| CompiledTools::compile(&tools).expect("compiles"))
    });
    // A set the cache has not seen, whose patterns it has (the server's path for a
    // new tool list): two lists alternate through a cache that holds one set.
    let other: Vec<ToolDef> = tools
        .iter()
        .map(|tool| ToolDef {
            description: format!("{} Again.", tool.description),
            ..tool.clone()
        })
        .collect();
    let one_set = tessera_constrain::ToolSetCache::new(1);
    let mut flip = false;
    group.bench_function("50 tools, a new set through a tool-set cache", |b| {
        b.iter(|| {
            flip = !flip;
            one_set
                .get_or_compile(if flip { &tools } else { &other })
                .expect("compiles")
        })
    });
    let cache = tessera_constrain::ToolSetCache::new(8);
    cache.get_or_compile(&tools).expect("compiles");
    group.bench_function("50 tools, cached by content", |b| {
        b.iter(|| cache.get_or_compile(&tools).expect("cached"))
    });
    group.finish();
}

criterion_group!(benches, masks, compile);
criterion_main!(benches);
