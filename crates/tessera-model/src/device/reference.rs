//! The device kernels' contract, run on the CPU: the same algorithm as
//! `kernels/paged_attention.cu` (one work item per row, KV head and 256-key
//! partition; scores for the group's query heads, max, `exp`, sum and value
//! accumulation per partition; partitions merged by log-sum-exp) and
//! `kernels/cache_write.cu` (rows scattered to their slots, rounded to the
//! pool's element type). It is what the candle ops run on `Device::Cpu`, so the
//! whole device forward is testable here, and the reference the CUDA kernels are
//! checked against on a GPU.

use super::meta::KernelMeta;
use crate::attention::PARTITION_TOKENS;
use crate::kv_cache::KvLayout;
use half::{bf16, f16};

/// An element type a device K/V pool can hold.
pub trait KvElement: Copy + Send + Sync + 'static {
    /// The exact f32 value of a stored element.
    fn widen(self) -> f32;
    /// `x` rounded to nearest even (CUDA's `__float2half_rn` / `__float2bfloat16_rn`).
    fn narrow(x: f32) -> Self;
}

impl KvElement for f32 {
    fn widen(self) -> f32 {
        self
    }
    fn narrow(x: f32) -> Self {
        x
    }
}

impl KvElement for f16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(x: f32) -> Self {
        f16::from_f32(x)
    }
}

impl KvElement for bf16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

/// Head counts and scale of one attention call.
#[derive(Debug, Clone, Copy)]
pub struct HeadShape {
    /// Query heads (a multiple of the layout's KV heads).
    pub num_heads: usize,
    /// Softmax scale.
    pub scale: f32,
}

/// One partition's softmax state per query head of a GQA group.
struct PartialState {
    max: f32,
    sum: f32,
    acc: Vec<f32>,
}

/// Attention of every row of `q` (`[rows, num_heads, head_dim]`) over the pools
/// `[block][kv_head][slot][head_dim]`, reading keys through `meta`'s block tables.
pub fn paged_attention<T: KvElement>(
    shape: HeadShape,
    layout: KvLayout,
    meta: &KernelMeta,
    q: &[f32],
    keys: &[T],
    values: &[T],
) -> Vec<f32> {
    let dim = layout.head_dim;
    let group = shape.num_heads / layout.num_kv_heads;
    let mut out = vec![0f32; meta.rows() * shape.num_heads * dim];
    for row in 0..meta.rows() {
        for kv_head in 0..layout.num_kv_heads {
            let first_head = row * shape.num_heads + kv_head * group;
            let queries = &q[first_head * dim..(first_head + group) * dim];
            let partials: Vec<Vec<PartialState>> = (0..meta.partitions)
                .map(|part| {
                    let block = ThreadBlock { row, kv_head, part };
                    attend_partition(shape.scale, layout, meta, block, queries, (keys, values))
                })
                .collect();
            for g in 0..group {
                let dst = &mut out[(first_head + g) * dim..(first_head + g + 1) * dim];
                merge(partials.iter().map(|states| &states[g]), dst);
            }
        }
    }
    out
}

/// Which work one CUDA thread block does: partition `part` of `row`'s keys for one KV head.
#[derive(Clone, Copy)]
struct ThreadBlock {
    row: usize,
    kv_head: usize,
    part: usize,
}

/// What one CUDA thread block computes.
fn attend_partition<T: KvElement>(
    scale: f32,
    layout: KvLayout,
    meta: &KernelMeta,
    ThreadBlock { row, kv_head, part }: ThreadBlock,
    queries: &[f32],
    (keys, values): (&[T], &[T]),
) -> Vec<PartialState> {
    let dim = layout.head_dim;
    let context = meta.row_pos[row] as usize + 1;
    let start = part * PARTITION_TOKENS;
    let end = (start + PARTITION_TOKENS).min(context);
    let table = meta.table(row);
    let row_at = |key: usize| {
        layout.row_offset(
            tessera_kv::BlockId(table[key / layout.block_size]),
            kv_head,
            key % layout.block_size,
        )
    };
    queries
        .chunks_exact(dim)
        .map(|query| {
            if start >= context {
                return PartialState {
                    max: f32::NEG_INFINITY,
                    sum: 0.0,
                    acc: vec![0.0; dim],
                };
            }
            let scores: Vec<f32> = (start..end)
                .map(|key| {
                    let k = &keys[row_at(key)..][..dim];
                    query.iter().zip(k).map(|(a, b)| a * b.widen()).sum::<f32>() * scale
                })
                .collect();
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let weights: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
            let mut acc = vec![0f32; dim];
            for (key, weight) in (start..end).zip(&weights) {
                let v = &values[row_at(key)..][..dim];
                for (a, x) in acc.iter_mut().zip(v) {
                    *a += weight * x.widen();
                }
            }
            PartialState {
                max,
                sum: weights.iter().sum(),
                acc,
            }
        })
        .collect()
}

/// The reduce kernel: combine a head's partitions by log-sum-exp and normalize into `dst`.
fn merge<'a>(states: impl Iterator<Item = &'a PartialState> + Clone, dst: &mut [f32]) {
    let live = states.filter(|state| state.sum > 0.0);
    let max = live.clone().map(|state| state.max).fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0f32;
    dst.fill(0.0);
    for state in live {
        let weight = (state.max - max).exp();
        total += state.sum * weight;
        for (d, a) in dst.iter_mut().zip(&state.acc) {
            *d += a * weight;
        }
    }
    dst.iter_mut().for_each(|d| *d /= total);
}

/// Scatter each row of `rows` (`[rows, num_kv_heads, head_dim]`) into `pool` at its slot.
pub fn cache_write<T: KvElement>(layout: KvLayout, slot_mapping: &[u32], rows: &[f32], pool: &mut [T]) {
    let width = layout.num_kv_heads * layout.head_dim;
    for (row, &slot) in rows.chunks_exact(width).zip(slot_mapping) {
        let (block, offset) = (slot as usize / layout.block_size, slot as usize % layout.block_size);
        for (head, src) in row.chunks_exact(layout.head_dim).enumerate() {
            let at = layout.row_offset(tessera_kv::BlockId(block as u32), head, offset);
            for (dst, &x) in pool[at..at + layout.head_dim].iter_mut().zip(src) {
                *dst = T::narrow(x);
            }
        }
    }
}
