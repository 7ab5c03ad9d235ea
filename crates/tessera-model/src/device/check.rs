//! The device kernels against their CPU contract on random inputs of odd
//! shapes (`tessera check-device` runs this on a GPU): every K/V element type,
//! ragged batches of prefill chunks and decode rows, contexts split into
//! several partitions, scrambled block tables, GQA groups of 1 to 7 heads.

use super::meta::KernelMeta;
use super::ops::{CacheWrite, DeviceMeta, PagedAttention};
use super::reference::{self, HeadShape, KvElement};
use crate::batch::{LogitsFor, SeqInput};
use crate::kv_cache::KvLayout;
use crate::noise::noise;
use candle_core::{DType, Device, Tensor, WithDType};
use half::{bf16, f16};
use tessera_kv::BlockId;

/// One comparison of a device kernel with the CPU contract.
#[derive(Debug, Clone)]
pub struct KernelCheck {
    /// `cache_write` or `paged_attention`.
    pub kernel: &'static str,
    /// The pools' element type.
    pub dtype: DType,
    /// The shape, in words.
    pub case: String,
    /// max |device − reference| / max |reference|.
    pub relative_error: f32,
    /// The largest relative error accepted.
    pub tolerance: f32,
}

impl KernelCheck {
    /// Whether the device agreed with the reference.
    pub fn passed(&self) -> bool {
        self.relative_error <= self.tolerance
    }
}

/// A random case: the pool shape, query heads, and (first position, rows) per sequence.
struct Case {
    layout: KvLayout,
    num_heads: usize,
    seqs: Vec<(usize, usize)>,
}

fn cases() -> Vec<Case> {
    let layout = |num_kv_heads, head_dim, block_size, num_blocks| KvLayout {
        num_blocks,
        block_size,
        num_kv_heads,
        head_dim,
    };
    vec![
        // SmolLM2's shape: one decode row three partitions deep.
        Case {
            layout: layout(3, 64, 16, 64),
            num_heads: 9,
            seqs: vec![(700, 1)],
        },
        // A ragged batch: a prefill chunk mid-block, a decode row, a prefill from 0.
        Case {
            layout: layout(2, 40, 5, 48),
            num_heads: 8,
            seqs: vec![(5, 30), (40, 1), (0, 17)],
        },
        // Llama-3-like heads, a chunk straddling a partition boundary.
        Case {
            layout: layout(4, 128, 32, 24),
            num_heads: 16,
            seqs: vec![(250, 12)],
        },
        // An odd group of 7, a one-token sequence beside a 257-token one.
        Case {
            layout: layout(1, 72, 16, 24),
            num_heads: 7,
            seqs: vec![(0, 1), (255, 2)],
        },
    ]
}

/// `noise` in [-2, 2).
fn wide_noise(seed: u64, n: usize) -> Vec<f32> {
    noise(seed, n).into_iter().map(|x| 2.0 * x).collect()
}

/// Run every case for every element type on `device`.
pub fn check_kernels(device: &Device) -> candle_core::Result<Vec<KernelCheck>> {
    let mut checks = Vec::new();
    for (index, case) in cases().iter().enumerate() {
        checks.extend(check_case::<f32>(device, case, index)?);
        checks.extend(check_case::<f16>(device, case, index)?);
        checks.extend(check_case::<bf16>(device, case, index)?);
    }
    Ok(checks)
}

fn describe(case: &Case) -> String {
    let l = case.layout;
    format!(
        "{} heads / {} KV heads × {}, block {}, (start, rows) {:?}",
        case.num_heads, l.num_kv_heads, l.head_dim, l.block_size, case.seqs
    )
}

fn relative_error(got: &[f32], want: &[f32]) -> f32 {
    let scale = want.iter().fold(0f32, |m, x| m.max(x.abs())).max(f32::MIN_POSITIVE);
    let worst = got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    if got.len() != want.len() || got.iter().any(|x| !x.is_finite()) {
        return f32::INFINITY;
    }
    worst / scale
}

fn check_case<T: KvElement + WithDType>(
    device: &Device,
    case: &Case,
    index: usize,
) -> candle_core::Result<Vec<KernelCheck>> {
    let l = case.layout;
    let pool_len = l.num_blocks * l.block_len();
    // Scrambled block tables, one per sequence, covering its context.
    let mut order: Vec<u32> = (0..l.num_blocks as u32).collect();
    order.sort_by_key(|b| b.wrapping_mul(2_654_435_761) % 1009);
    let mut next = order.into_iter().map(BlockId);
    let tables: Vec<Vec<BlockId>> = case
        .seqs
        .iter()
        .map(|&(first, n)| {
            (0..(first + n).div_ceil(l.block_size))
                .filter_map(|_| next.next())
                .collect()
        })
        .collect();
    let rows: usize = case.seqs.iter().map(|s| s.1).sum();
    let tokens = vec![0u32; rows];
    let batch: Vec<SeqInput> = case
        .seqs
        .iter()
        .zip(&tables)
        .map(|(&(start_pos, n), blocks)| SeqInput {
            tokens: &tokens[..n],
            start_pos,
            blocks,
            logits: LogitsFor::None,
        })
        .collect();
    let meta = KernelMeta::new(&batch, l).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
    // Pools full of earlier context, then this batch's rows written by the kernel.
    let seed = 1000 * index as u64 + T::DTYPE.size_in_bytes() as u64 * 10 + u64::from(T::DTYPE == DType::BF16);
    let mut keys: Vec<T> = wide_noise(seed, pool_len).into_iter().map(T::narrow).collect();
    let mut values: Vec<T> = wide_noise(seed + 1, pool_len).into_iter().map(T::narrow).collect();
    let new_keys = wide_noise(seed + 2, rows * l.num_kv_heads * l.head_dim);
    let new_values = wide_noise(seed + 3, rows * l.num_kv_heads * l.head_dim);
    let q = wide_noise(seed + 4, rows * case.num_heads * l.head_dim);
    let shape4 = (l.num_blocks, l.num_kv_heads, l.block_size, l.head_dim);
    let device_keys = Tensor::from_slice(&keys, shape4, device)?;
    let device_values = Tensor::from_slice(&values, shape4, device)?;
    let rows3 = (rows, l.num_kv_heads, l.head_dim);
    let device_meta = DeviceMeta::upload(meta.clone(), device)?;
    let write = CacheWrite { meta: &device_meta };
    device_keys.inplace_op2(&Tensor::from_slice(&new_keys, rows3, device)?, &write)?;
    device_values.inplace_op2(&Tensor::from_slice(&new_values, rows3, device)?, &write)?;
    reference::cache_write(l, &meta.slot_mapping, &new_keys, &mut keys);
    reference::cache_write(l, &meta.slot_mapping, &new_values, &mut values);
    let widen = |v: &[T]| -> Vec<f32> { v.iter().map(|x| x.widen()).collect() };
    let written: Vec<T> = device_keys.flatten_all()?.to_vec1()?;
    let shape = HeadShape {
        num_heads: case.num_heads,
        scale: 1.0 / (l.head_dim as f32).sqrt(),
    };
    let attention =
        Tensor::from_slice(&q, (rows, case.num_heads, l.head_dim), device)?.apply_op1_no_bwd(&PagedAttention {
            shape,
            keys: &device_keys,
            values: &device_values,
            meta: &device_meta,
        })?;
    let want = reference::paged_attention(shape, l, &meta, &q, &keys, &values);
    let dtype = T::DTYPE;
    Ok(vec![
        KernelCheck {
            kernel: "cache_write",
            dtype,
            case: describe(case),
            relative_error: relative_error(&widen(&written), &widen(&keys)),
            tolerance: 0.0,
        },
        KernelCheck {
            kernel: "paged_attention",
            dtype,
            case: describe(case),
            relative_error: relative_error(&attention.flatten_all()?.to_vec1()?, &want),
            tolerance: 1e-4,
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_passes_on_the_cpu_and_the_comparison_can_fail() {
        let checks = check_kernels(&Device::Cpu).unwrap();
        assert_eq!(checks.len(), cases().len() * 3 * 2);
        for check in &checks {
            assert!(check.passed(), "{check:?}");
        }
        // The comparison can fail: a reversed row order is far from the reference.
        let want = [1.0, 2.0, 3.0];
        assert!(relative_error(&[3.0, 2.0, 1.0], &want) > 0.5);
        assert!(relative_error(&[1.0, f32::NAN, 3.0], &want).is_infinite());
    }
}
