//! Criterion benches of paged attention alone, on random f16 K/V, in the
//! shapes of the shipped models (SmolLM2: 9 query heads over 3 KV heads of
//! 64; Qwen2.5-1.5B: 12 over 2 of 128): a warm turn's 64 new queries over a
//! 4,096-token cached prefix (what an agent's TTFT waits on), and one decode
//! query at a 2,048-token context. Layer count not included: one layer.
//! Run: `cargo bench --bench attention`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use half::f16;
use tessera_kv::BlockId;
use tessera_model::attention::{paged_attention, AttentionPlan, AttentionSeq, AttentionShape};
use tessera_model::{KvLayout, LayerKv};

const BLOCK: usize = 16;

/// Deterministic values in [-1, 1).
fn noise(seed: u64, len: usize) -> impl Iterator<Item = f32> {
    let mut state = seed | 1;
    (0..len).map(move |_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    })
}

fn bench_shape(c: &mut Criterion, name: &str, num_heads: usize, num_kv_heads: usize, head_dim: usize) {
    let context: usize = 4096 + 64;
    let layout = KvLayout {
        num_blocks: context.div_ceil(BLOCK),
        block_size: BLOCK,
        num_kv_heads,
        head_dim,
    };
    let len = layout.num_blocks * layout.block_len();
    let kv = LayerKv::F16 {
        keys: noise(1, len).map(f16::from_f32).collect(),
        values: noise(2, len).map(f16::from_f32).collect(),
    };
    let blocks: Vec<BlockId> = (0..layout.num_blocks as u32).map(BlockId).collect();
    let shape = AttentionShape {
        num_heads,
        scale: 1.0 / (head_dim as f32).sqrt(),
    };
    let mut group = c.benchmark_group(format!("attention/{name}"));
    for (label, first_pos, num_queries) in [("warm 64 over 4096", 4096, 64), ("decode at 2048", 2047, 1)] {
        let seq = AttentionSeq {
            first_row: 0,
            num_queries,
            first_pos,
            blocks: &blocks,
        };
        let plan = AttentionPlan::new(vec![seq], num_kv_heads);
        let q: Vec<f32> = noise(3, num_queries * num_heads * head_dim).collect();
        let mut out = vec![0f32; q.len()];
        group.throughput(Throughput::Elements((num_queries * (first_pos + 1)) as u64));
        group.bench_function(label, |b| {
            b.iter(|| paged_attention(shape, layout, &plan, &q, &kv, &mut out))
        });
    }
    group.finish();
}

fn attention(c: &mut Criterion) {
    bench_shape(c, "smollm2", 9, 3, 64);
    bench_shape(c, "qwen2.5-1.5b", 12, 2, 128);
}

criterion_group!(benches, attention);
criterion_main!(benches);
