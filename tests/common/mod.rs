//! Shared helpers for the real-model tests. The model is required: a missing
//! file fails the test with the command that fetches it, never a silent skip.

pub mod reference;
pub mod tiny;

use std::path::PathBuf;
use std::sync::OnceLock;
use tessera_kv::BlockPool;
use tessera_model::{KvCache, LoadOptions, LoadedModel, LogitsFor, Runtime, Sequence};

/// `$TESSERA_MODEL`, else the tests' fast model, SmolLM2 (fetched into
/// `$TESSERA_MODELS_DIR` or `<repo>/models` on first use).
pub fn model_path() -> PathBuf {
    if let Some(path) = std::env::var_os("TESSERA_MODEL") {
        return PathBuf::from(path);
    }
    tessera_fixtures::model(tessera_fixtures::FAST_MODEL)
}

/// The default model, loaded once per test binary (repacked as the runtime does by default).
pub fn model() -> &'static LoadedModel {
    static MODEL: OnceLock<LoadedModel> = OnceLock::new();
    MODEL.get_or_init(|| load(&LoadOptions::default()))
}

/// Load the default model with `options`.
pub fn load(options: &LoadOptions) -> LoadedModel {
    let path = model_path();
    LoadedModel::load(&tessera_model::ModelLocation::Gguf(path), options).expect("loading the default model")
}

/// A pool and cache (default element type) big enough for `tokens` tokens at block size 16.
pub fn cache_for(loaded: &LoadedModel, tokens: usize) -> (BlockPool, KvCache) {
    cache_of(loaded, tokens, tessera_model::KvDtype::default())
}

/// [`cache_for`] with K/V pools of `dtype`.
pub fn cache_of(loaded: &LoadedModel, tokens: usize, dtype: tessera_model::KvDtype) -> (BlockPool, KvCache) {
    let blocks = tokens.div_ceil(16) + 8;
    let kv = loaded.model.new_kv_cache(blocks, 16, dtype).unwrap();
    (BlockPool::new(blocks, 16), kv)
}

/// Greedy continuation of `prompt` for up to `max_new` tokens (stops at a stop token).
pub fn greedy(loaded: &LoadedModel, prompt: &[u32], max_new: usize) -> Vec<u32> {
    greedy_run(loaded, prompt, max_new, true, tessera_model::KvDtype::default())
}

/// [`greedy`] with K/V pools of `dtype`.
pub fn greedy_with(loaded: &LoadedModel, prompt: &[u32], max_new: usize, dtype: tessera_model::KvDtype) -> Vec<u32> {
    greedy_run(loaded, prompt, max_new, true, dtype)
}

/// Greedy continuation of `prompt` for exactly `max_new` tokens, stop tokens included.
pub fn greedy_ignoring_eos(loaded: &LoadedModel, prompt: &[u32], max_new: usize) -> Vec<u32> {
    greedy_run(loaded, prompt, max_new, false, tessera_model::KvDtype::default())
}

fn greedy_run(
    loaded: &LoadedModel,
    prompt: &[u32],
    max_new: usize,
    stop_at_eos: bool,
    dtype: tessera_model::KvDtype,
) -> Vec<u32> {
    let (mut pool, mut kv) = cache_of(loaded, prompt.len() + max_new, dtype);
    let mut seq = Sequence::new();
    let model = &loaded.model;
    let mut logits = seq
        .feed(
            Runtime {
                model,
                pool: &mut pool,
                kv: &mut kv,
            },
            prompt,
            256,
            LogitsFor::Last,
        )
        .unwrap();
    let mut out = Vec::new();
    for _ in 0..max_new {
        let next = tessera_sample::argmax(logits.row(0)).unwrap();
        out.push(next);
        if stop_at_eos && loaded.tokenizer.is_stop(next) {
            break;
        }
        logits = seq
            .feed(
                Runtime {
                    model,
                    pool: &mut pool,
                    kv: &mut kv,
                },
                &[next],
                1,
                LogitsFor::Last,
            )
            .unwrap();
    }
    seq.release(&mut pool);
    assert_eq!(pool.num_allocatable(), pool.num_blocks(), "pool back to baseline");
    out
}

/// The chat prompt used across tests.
pub fn chat_prompt(user: &str) -> String {
    format!("<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
}

/// A ~300-token ChatML prompt mixing prose, code and numbers.
pub fn long_prompt() -> String {
    let user = "I am writing a small tool in Rust that reads a CSV file of orders \
        (columns: id, customer, amount, date) and prints the total amount per customer, \
        sorted from the largest to the smallest. Here is my first attempt:\n\n\
        ```rust\nuse std::collections::HashMap;\n\nfn main() {\n    let text = std::fs::read_to_string(\"orders.csv\").unwrap();\n    \
        let mut totals: HashMap<String, f64> = HashMap::new();\n    for line in text.lines().skip(1) {\n        \
        let fields: Vec<&str> = line.split(',').collect();\n        *totals.entry(fields[1].to_string()).or_insert(0.0) += fields[2].parse::<f64>().unwrap();\n    }\n    \
        let mut rows: Vec<_> = totals.into_iter().collect();\n    rows.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap());\n    \
        for (customer, total) in rows {\n        println!(\"{customer}: {total:.2}\");\n    }\n}\n```\n\n\
        It works on my sample of 1,204 orders, but it panics on the real export of 98,311 orders from 2024-03-17. \
        What could be wrong, and how should I handle errors instead of calling unwrap?";
    chat_prompt(user)
}

/// Largest absolute difference between two equal-length slices.
/// The control tokens of a prompt, in order.
pub fn control_ids(tokenizer: &tessera_model::Tokenizer, prompt: &[u32]) -> Vec<u32> {
    let specials = tokenizer.special_token_texts();
    prompt
        .iter()
        .copied()
        .filter(|&id| tokenizer.id_to_token(id).is_some_and(|text| specials.contains(&text)))
        .collect()
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Index of the largest value.
pub fn argmax(values: &[f32]) -> usize {
    tessera_sample::argmax(values).unwrap() as usize
}

/// Wait until the engine is idle; then no block may be referenced.
pub fn assert_baseline(engine: &tessera_engine::EngineHandle) -> tessera_engine::EngineMetrics {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let m = engine.metrics().wait().unwrap();
        if m.requests_running == 0 && m.requests_waiting == 0 {
            assert_eq!(m.kv_blocks_used, 0, "blocks still referenced: {m:?}");
            assert_eq!(m.kv_blocks_free + m.kv_blocks_cached, m.kv_blocks_total);
            return m;
        }
        assert!(std::time::Instant::now() < deadline, "engine never went idle: {m:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
