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

fn vocabulary() -> Vocabulary {
    let path = common::model_path();
    let tokenizer = tessera_model::GgufSource::open(&path)
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
    let vocab = vocabulary();
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
    let mut group = c.benchmark_group("mask");
    for (label, text) in states {
        let mut matcher =
            ToolCallMatcher::new(tools.clone(), &auto, &Envelope::new(CallFormat::Hermes)).expect("matcher");
        assert!(matcher.advance_text(text), "{label}: the prefix is valid");
        group.bench_function(format!("{label} (trie walk)"), |b| {
            b.iter(|| matcher.compute_mask_uncached(&vocab))
        });
        group.bench_function(format!("{label} (cached)"), |b| b.iter(|| matcher.compute_mask(&vocab)));
    }
    group.finish();
}

criterion_group!(benches, masks);
criterion_main!(benches);
