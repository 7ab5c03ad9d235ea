//! End-to-end cost of the tool-call constraint: the same greedy generation of
//! a story through the engine, without a constraint and under `auto` (free
//! text, a mask computed and applied every step; the greedy tokens are the
//! same). Run: `cargo bench --bench constrained_decode`.

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::sync::Arc;
use tessera_api::tools_prompt;
use tessera_constrain::{CallFormat, CallMode, CompiledTools, ToolChoice, ToolDef};
use tessera_engine::{Constraint, EngineConfig, EngineHandle, GenerateRequest, ToolConstraint};
use tessera_model::{ChatMessage, ChatRole, LoadOptions, LoadedModel, ModelLocation};

const TOKENS: usize = 32;

fn decode(c: &mut Criterion) {
    let loaded = LoadedModel::load(&ModelLocation::Gguf(common::model_path()), &LoadOptions::default())
        .expect("loading the model");
    let tools = vec![ToolDef {
        name: "get_weather".into(),
        description: "Current weather in a city.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }];
    let messages = [
        ChatMessage::new(ChatRole::System, tools_prompt(&tools, CallFormat::Hermes)),
        ChatMessage::new(
            ChatRole::User,
            "Write a long story about a lighthouse keeper and the weather.",
        ),
    ];
    let text = loaded.template.render(&messages, true).expect("template");
    let prompt = loaded.tokenizer.encode(&text).expect("tokenizing");
    let compiled = Arc::new(CompiledTools::compile(&tools).expect("tools"));
    let engine = EngineHandle::start(loaded, EngineConfig::for_tokens(4096)).expect("engine");
    let constraint = |mode| {
        Some(Constraint::Tools(ToolConstraint {
            tools: compiled.clone(),
            choice: ToolChoice {
                mode,
                allowed: None,
                parallel: false,
            },
        }))
    };
    let mut group = c.benchmark_group(format!("generate {TOKENS} tokens"));
    group.sample_size(10);
    for (label, masks) in [("unconstrained", None), ("auto", constraint(CallMode::Auto))] {
        group.bench_function(label, |b| {
            b.iter(|| {
                let request = GenerateRequest {
                    constraint: masks.clone(),
                    ..GenerateRequest::greedy(prompt.clone(), TOKENS)
                };
                let output = engine.submit(request).expect("submit").wait().expect("generation");
                assert_eq!(
                    output.completion.usage.completion_tokens, TOKENS,
                    "the story ended early"
                );
            })
        });
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
