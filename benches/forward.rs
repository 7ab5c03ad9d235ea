//! Criterion benches of the forward pass on the real model: one decode step
//! (at a 256-token context), one 512-token prefill chunk, and forwards of
//! k = 1, 2, 4, 8, 16 rows, as k sequences of one token each (batched decode)
//! and as one sequence of k tokens (verifying a draft): what a row costs
//! beside the weight read that every forward pays once.
//! Run: `cargo bench --bench forward` (needs models/, see scripts/fetch-model.sh);
//! `TESSERA_BENCH_MODEL=qwen2.5-coder-1.5b` runs it on another shipped model.

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

/// Run `tokens` from position 0 into `table`'s blocks, without logits.
fn prefill(loaded: &LoadedModel, table: &BlockTable, tokens: &[u32], kv: &mut KvCache) {
    let fill = SeqInput {
        tokens,
        start_pos: 0,
        blocks: table.blocks(),
        logits: LogitsFor::None,
    };
    loaded.model.forward(&[fill], kv).expect("prefill");
}

/// Forwards of `k` rows at a 256-token context: `k` sequences of one token
/// (each with logits, as batched decode samples every sequence) and one
/// sequence of `k` tokens (logits for every row, as verification needs).
fn rows(c: &mut Criterion) {
    let loaded = load();
    let (block_size, context, widest) = (16, 256, 16);
    let per_sequence = (context + widest) / block_size + 1;
    let blocks = per_sequence * widest;
    let mut pool = BlockPool::new(blocks, block_size);
    let mut kv = KvCache::new(loaded.model.config(), blocks, block_size, KvDtype::default()).expect("cache");
    let ids = prompt(&loaded, context + widest);
    let tables: Vec<BlockTable> = (0..widest)
        .map(|_| {
            let mut table = BlockTable::new();
            assert!(table.grow(&mut pool, context + widest));
            prefill(&loaded, &table, &ids[..context], &mut kv);
            table
        })
        .collect();
    let mut group = c.benchmark_group("forward_rows");
    group.sample_size(10);
    for k in [1, 2, 4, 8, 16] {
        group.throughput(Throughput::Elements(k as u64));
        group.bench_function(format!("sequences_{k}"), |b| {
            b.iter(|| {
                let steps: Vec<SeqInput> = tables[..k]
                    .iter()
                    .map(|table| SeqInput {
                        tokens: &ids[context..context + 1],
                        start_pos: context,
                        blocks: table.blocks(),
                        logits: LogitsFor::Last,
                    })
                    .collect();
                loaded.model.forward(&steps, &mut kv).expect("decode")
            })
        });
        group.bench_function(format!("tokens_{k}"), |b| {
            b.iter(|| {
                let draft = SeqInput {
                    tokens: &ids[context..context + k],
                    start_pos: context,
                    blocks: tables[0].blocks(),
                    logits: LogitsFor::All,
                };
                loaded.model.forward(&[draft], &mut kv).expect("verify")
            })
        });
    }
    group.finish();
    for mut table in tables {
        table.release(&mut pool).expect("release");
    }
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
    prefill(&loaded, &table, &ids[..context], &mut kv);
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

criterion_group!(benches, forward, rows);
criterion_main!(benches);
