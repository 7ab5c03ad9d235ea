//! Criterion benches of the forward pass on the real model: one decode step
//! (at a 256-token context) and one 512-token prefill chunk.
//! Run: `cargo bench --bench forward` (needs models/, see scripts/fetch-model.sh).

mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tessera_kv::{BlockPool, BlockTable};
use tessera_model::{KvCache, KvDtype, LoadOptions, LoadedModel, LogitsFor, ModelLocation, SeqInput};

fn load() -> LoadedModel {
    let path = common::model_path();
    LoadedModel::load(&ModelLocation::Gguf(path), &LoadOptions::default()).expect("loading the model")
}

fn prompt(loaded: &LoadedModel, tokens: usize) -> Vec<u32> {
    let text =
        "The quick brown fox jumps over the lazy dog while the committee reviews the report. ".repeat(tokens / 10 + 1);
    let mut ids = loaded.tokenizer.encode(&text).expect("tokenizing");
    ids.truncate(tokens);
    ids
}

fn forward(c: &mut Criterion) {
    let loaded = load();
    let blocks = 64;
    let mut pool = BlockPool::new(blocks, 16);
    let mut kv = KvCache::new(loaded.model.config(), blocks, 16, KvDtype::default()).expect("cache");
    let mut table = BlockTable::new();
    assert!(table.grow(&mut pool, 768));
    let ids = prompt(&loaded, 512);

    let context = 256;
    let fill = SeqInput {
        tokens: &ids[..context],
        start_pos: 0,
        blocks: table.blocks(),
        logits: LogitsFor::None,
    };
    loaded.model.forward(&[fill], &mut kv).expect("prefill");
    let mut group = c.benchmark_group("forward");
    group.sample_size(20);
    group.throughput(Throughput::Elements(1));
    group.bench_function("decode_step_ctx256", |b| {
        b.iter(|| {
            let step = SeqInput {
                tokens: &ids[context..context + 1],
                start_pos: context,
                blocks: table.blocks(),
                logits: LogitsFor::Last,
            };
            loaded.model.forward(&[step], &mut kv).expect("decode")
        })
    });
    group.sample_size(10);
    group.throughput(Throughput::Elements(512));
    group.bench_function("prefill_512", |b| {
        b.iter(|| {
            let chunk = SeqInput {
                tokens: &ids,
                start_pos: 0,
                blocks: table.blocks(),
                logits: LogitsFor::Last,
            };
            loaded.model.forward(&[chunk], &mut kv).expect("prefill")
        })
    });
    group.finish();
    table.release(&mut pool).expect("release");
}

criterion_group!(benches, forward);
criterion_main!(benches);
