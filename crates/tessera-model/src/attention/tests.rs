//! The paged kernel against a naive dense attention on random data, for both
//! K/V element types (the reference sees the rows as the cache stores them).

use super::*;
use crate::kv_cache::KvDtype;
use crate::simd;

use crate::noise::noise;

struct Case {
    layout: KvLayout,
    num_heads: usize,
    /// (first_pos, num_queries) per sequence; each sequence's keys are 0..first_pos+num_queries.
    seqs: Vec<(usize, usize)>,
}

/// Dense per-sequence K/V `[pos][kv_head][dim]` and the paged copy with a shuffled block order.
struct Fixture {
    dense_k: Vec<Vec<f32>>,
    dense_v: Vec<Vec<f32>>,
    tables: Vec<Vec<BlockId>>,
    kv: LayerKv,
    q: Vec<f32>,
}

/// Pools of `len` elements holding NaN (to catch out-of-context reads).
fn nan_pools(dtype: KvDtype, len: usize) -> LayerKv {
    match dtype {
        KvDtype::F16 => LayerKv::F16 {
            keys: vec![half::f16::NAN; len],
            values: vec![half::f16::NAN; len],
        },
        KvDtype::F32 => LayerKv::F32 {
            keys: vec![f32::NAN; len],
            values: vec![f32::NAN; len],
        },
    }
}

/// `values` as the cache stores them.
fn stored(dtype: KvDtype, values: Vec<f32>) -> Vec<f32> {
    match dtype {
        KvDtype::F16 => values.into_iter().map(|x| half::f16::from_f32(x).to_f32()).collect(),
        KvDtype::F32 => values,
    }
}

fn fixture(case: &Case, dtype: KvDtype) -> Fixture {
    let l = case.layout;
    let row = l.num_kv_heads * l.head_dim;
    let total_blocks: usize = case.seqs.iter().map(|&(p, n)| (p + n).div_ceil(l.block_size)).sum();
    assert!(total_blocks <= l.num_blocks);
    // Hand out blocks in a scrambled order so tables are not contiguous.
    let mut order: Vec<u32> = (0..l.num_blocks as u32).collect();
    order.sort_by_key(|b| (b.wrapping_mul(2654435761)) % 1009);
    let mut next = order.into_iter().map(BlockId);
    let mut kv = nan_pools(dtype, l.num_blocks * l.block_len());
    let (mut dense_k, mut dense_v, mut tables) = (vec![], vec![], vec![]);
    for (s, &(first, n)) in case.seqs.iter().enumerate() {
        let len = first + n;
        let table: Vec<BlockId> = (0..len.div_ceil(l.block_size)).map(|_| next.next().unwrap()).collect();
        let k = stored(dtype, noise(100 + s as u64, len * row));
        let v = stored(dtype, noise(200 + s as u64, len * row));
        for pos in 0..len {
            for h in 0..l.num_kv_heads {
                let at = l.row_offset(table[pos / l.block_size], h, pos % l.block_size);
                let src = pos * row + h * l.head_dim;
                kv.write(at, &k[src..src + l.head_dim], &v[src..src + l.head_dim]);
            }
        }
        dense_k.push(k);
        dense_v.push(v);
        tables.push(table);
    }
    let rows: usize = case.seqs.iter().map(|s| s.1).sum();
    let q = noise(7, rows * case.num_heads * l.head_dim);
    Fixture {
        dense_k,
        dense_v,
        tables,
        kv,
        q,
    }
}

fn naive(case: &Case, f: &Fixture) -> Vec<f32> {
    let l = case.layout;
    let (dim, group, row) = (l.head_dim, case.num_heads / l.num_kv_heads, l.num_kv_heads * l.head_dim);
    let scale = 1.0 / (dim as f32).sqrt();
    let mut out = vec![0f32; f.q.len()];
    let mut r = 0;
    for (s, &(first, n)) in case.seqs.iter().enumerate() {
        for i in 0..n {
            for h in 0..case.num_heads {
                let kvh = h / group;
                let qv = &f.q[(r * case.num_heads + h) * dim..][..dim];
                let scores: Vec<f32> = (0..=first + i)
                    .map(|p| {
                        qv.iter()
                            .zip(&f.dense_k[s][p * row + kvh * dim..][..dim])
                            .map(|(a, b)| a * b)
                            .sum::<f32>()
                            * scale
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let weights: Vec<f32> = scores.iter().map(|x| (x - max).exp()).collect();
                let sum: f32 = weights.iter().sum();
                let dst = &mut out[(r * case.num_heads + h) * dim..][..dim];
                for (p, w) in weights.iter().enumerate() {
                    let v_row = &f.dense_v[s][p * row + kvh * dim..][..dim];
                    for (out_value, v) in dst.iter_mut().zip(v_row) {
                        *out_value += w / sum * v;
                    }
                }
            }
            r += 1;
        }
    }
    out
}

/// The case's sequences over block tables `tables`, rows in order.
fn seqs_of<'t>(case: &Case, tables: &'t [Vec<BlockId>]) -> Vec<AttentionSeq<'t>> {
    let mut first_row = 0;
    case.seqs
        .iter()
        .zip(tables)
        .map(|(&(first_pos, num_queries), blocks)| {
            let seq = AttentionSeq {
                first_row,
                num_queries,
                first_pos,
                blocks,
            };
            first_row += num_queries;
            seq
        })
        .collect()
}

fn paged(case: &Case, f: &Fixture, tables: &[Vec<BlockId>]) -> Vec<f32> {
    paged_on(Builds::Detected, case, f, tables)
}

fn paged_on(builds: Builds, case: &Case, f: &Fixture, tables: &[Vec<BlockId>]) -> Vec<f32> {
    let seqs = seqs_of(case, tables);
    let shape = AttentionShape {
        num_heads: case.num_heads,
        scale: 1.0 / (case.layout.head_dim as f32).sqrt(),
    };
    let mut out = vec![0f32; f.q.len()];
    let plan = AttentionPlan::new(seqs, case.layout.num_kv_heads);
    paged_attention_on(builds, shape, case.layout, &plan, &f.q, &f.kv, &mut out);
    out
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn cases() -> Vec<Case> {
    let layout = |num_kv_heads, head_dim, block_size| KvLayout {
        num_blocks: 96,
        block_size,
        num_kv_heads,
        head_dim,
    };
    vec![
        // one decode token deep in a context: partitioned path
        Case {
            layout: layout(3, 64, 16),
            num_heads: 9,
            seqs: vec![(700, 1)],
        },
        // a ragged batch: prefill chunk mid-block, decode, prefill from 0
        Case {
            layout: layout(2, 24, 16),
            num_heads: 8,
            seqs: vec![(5, 30), (40, 1), (0, 17)],
        },
        // odd block size and head_dim, no GQA
        Case {
            layout: layout(4, 20, 5),
            num_heads: 4,
            seqs: vec![(3, 9), (0, 1)],
        },
        // block size larger than the score tile
        Case {
            layout: layout(1, 8, 100),
            num_heads: 2,
            seqs: vec![(150, 3)],
        },
    ]
}

/// A query's result is the same bits whether it runs with the other rows of
/// its prefill chunk (one work item per run of rows) or alone, as a decode
/// step at its position would.
#[test]
fn a_row_gives_the_same_bits_alone_as_in_its_chunk() {
    let case = Case {
        layout: KvLayout {
            num_blocks: 96,
            block_size: 16,
            num_kv_heads: 3,
            head_dim: 64,
        },
        num_heads: 9,
        seqs: vec![(300, 29)],
    };
    for dtype in [KvDtype::F32, KvDtype::F16] {
        let f = fixture(&case, dtype);
        let whole = paged(&case, &f, &f.tables);
        let row_len = case.num_heads * case.layout.head_dim;
        for i in 0..29 {
            let alone = AttentionSeq {
                first_row: i,
                num_queries: 1,
                first_pos: 300 + i,
                blocks: &f.tables[0],
            };
            let plan = AttentionPlan::new(vec![alone], case.layout.num_kv_heads);
            let shape = AttentionShape {
                num_heads: case.num_heads,
                scale: 1.0 / (case.layout.head_dim as f32).sqrt(),
            };
            let mut out = vec![0f32; f.q.len()];
            paged_attention(shape, case.layout, &plan, &f.q, &f.kv, &mut out);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let row = i * row_len..(i + 1) * row_len;
            assert_eq!(bits(&out[row.clone()]), bits(&whole[row]), "{dtype} row {i}");
        }
    }
}

/// Attending run by run (a prefill chunk's tasks, each run's partitions in
/// a scratch its thread reuses) and item by item (decode's tasks) give the
/// same bits, on every build, a reused scratch included.
#[test]
fn runs_and_items_give_the_same_bits() {
    let mut all = cases();
    all.push(Case {
        layout: KvLayout {
            num_blocks: 96,
            block_size: 16,
            num_kv_heads: 2,
            head_dim: 128,
        },
        num_heads: 12,
        seqs: vec![(600, 21), (0, 40), (700, 1)],
    });
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for dtype in [KvDtype::F32, KvDtype::F16] {
        for (index, case) in all.iter().enumerate() {
            let f = fixture(case, dtype);
            let plan = AttentionPlan::new(seqs_of(case, &f.tables), case.layout.num_kv_heads);
            let shape = AttentionShape {
                num_heads: case.num_heads,
                scale: 1.0 / (case.layout.head_dim as f32).sqrt(),
            };
            for builds in [Builds::Detected, Builds::Portable] {
                let job = Job::new(builds, shape, case.layout, &plan, &f.q, &f.kv);
                let mut by_items = vec![0f32; f.q.len()];
                attend_by_items(&job, &mut by_items);
                for pass in 0..2 {
                    let mut by_runs = vec![f32::NAN; f.q.len()];
                    attend_by_runs(&job, &mut by_runs);
                    assert_eq!(
                        bits(&by_runs),
                        bits(&by_items),
                        "{dtype} case {index} {builds:?} pass {pass}"
                    );
                }
            }
        }
    }
}

#[test]
fn paged_matches_naive_and_the_builds_match_bit_for_bit() {
    for dtype in [KvDtype::F32, KvDtype::F16] {
        for (index, case) in cases().iter().enumerate() {
            let f = fixture(case, dtype);
            let want = naive(case, &f);
            let mut outputs = vec![];
            for builds in [Builds::Detected, Builds::Portable] {
                let got = paged_on(builds, case, &f, &f.tables);
                let diff = max_diff(&got, &want);
                assert!(diff < 1e-4, "{dtype} case {index} {builds:?}: max diff {diff}");
                outputs.push(got.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            }
            // The same arithmetic in every build (where `f32::exp` is glibc's
            // x86-64 `expf`, the vector `exp`'s reference: `tile::tests`;
            // elsewhere a rare last bit of `exp` may differ).
            if cfg!(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu")) {
                assert_eq!(outputs[0], outputs[1], "{dtype} case {index}: the builds' bits differ");
            }
        }
    }
}

#[test]
fn f16_pools_hold_the_rows_rounded_to_nearest() {
    let case = &cases()[0];
    let f16 = fixture(case, KvDtype::F16);
    let f32 = fixture(case, KvDtype::F32);
    let (got, want) = (paged(case, &f16, &f16.tables), naive(case, &f32));
    let diff = max_diff(&got, &want);
    // Rounding K/V to 11 significant bits moves the output, but only a little.
    assert!(diff > 0.0 && diff < 1e-2, "f16 against f32 rows: max diff {diff}");
}

#[test]
fn shuffled_block_tables_change_the_output() {
    // The kernel must read through the table: a permuted table is a different context.
    for case in cases()
        .iter()
        .filter(|c| c.seqs.iter().any(|&(p, n)| (p + n) > c.layout.block_size))
    {
        let mut f = fixture(case, KvDtype::F32);
        // Unused slots hold NaN (to catch out-of-context reads); zero them so a
        // permuted table reads defined values.
        if let LayerKv::F32 { keys, values } = &mut f.kv {
            keys.iter_mut()
                .chain(values.iter_mut())
                .filter(|v| v.is_nan())
                .for_each(|v| *v = 0.0);
        }
        let shuffled: Vec<Vec<BlockId>> = f.tables.iter().map(|t| t.iter().rev().copied().collect()).collect();
        let diff = max_diff(&paged(case, &f, &shuffled), &naive(case, &f));
        assert!(diff > 1e-3, "reversed tables gave the same output (diff {diff})");
    }
}

/// The kernel metadata of a case's batch.
fn kernel_meta(case: &Case, tables: &[Vec<BlockId>]) -> crate::device::KernelMeta {
    let tokens = vec![0u32; case.seqs.iter().map(|s| s.1).sum()];
    let batch: Vec<crate::batch::SeqInput> = case
        .seqs
        .iter()
        .zip(tables)
        .map(|(&(start_pos, n), blocks)| crate::batch::SeqInput {
            tokens: &tokens[..n],
            start_pos,
            blocks,
            logits: crate::batch::LogitsFor::None,
        })
        .collect();
    crate::device::KernelMeta::new(&batch, case.layout).unwrap()
}

/// The device kernels' contract (`device::reference`, what CUDA is checked
/// against) on the same cases: one work item per row, KV head and partition.
fn device_contract(case: &Case, f: &Fixture) -> Vec<f32> {
    use crate::device::reference::{self, HeadShape};
    let meta = kernel_meta(case, &f.tables);
    let shape = HeadShape {
        num_heads: case.num_heads,
        scale: 1.0 / (case.layout.head_dim as f32).sqrt(),
    };
    match &f.kv {
        LayerKv::F16 { keys, values } => reference::paged_attention(shape, case.layout, &meta, &f.q, keys, values),
        LayerKv::F32 { keys, values } => reference::paged_attention(shape, case.layout, &meta, &f.q, keys, values),
    }
}

#[test]
fn the_device_contract_matches_naive_and_the_cpu_kernel() {
    for dtype in [KvDtype::F32, KvDtype::F16] {
        for (index, case) in cases().iter().enumerate() {
            let f = fixture(case, dtype);
            let got = device_contract(case, &f);
            let naive_diff = max_diff(&got, &naive(case, &f));
            let cpu_diff = max_diff(&got, &paged(case, &f, &f.tables));
            assert!(naive_diff < 1e-4, "{dtype} case {index}: {naive_diff} from naive");
            assert!(cpu_diff < 1e-5, "{dtype} case {index}: {cpu_diff} from the CPU kernel");
        }
    }
}

#[test]
fn the_device_contract_reads_bf16_pools_exactly() {
    use crate::device::reference::{self, HeadShape};
    // bf16 values widen exactly, so bf16 pools must give what f32 pools holding
    // the same values give, bit for bit.
    let case = &cases()[1];
    let f = fixture(case, KvDtype::F32);
    let LayerKv::F32 { keys, values } = &f.kv else {
        unreachable!("an f32 fixture")
    };
    let to_bf16 = |v: &[f32]| -> Vec<half::bf16> { v.iter().map(|&x| half::bf16::from_f32(x)).collect() };
    let (k16, v16) = (to_bf16(keys), to_bf16(values));
    let widen = |v: &[half::bf16]| -> Vec<f32> { v.iter().map(|x| x.to_f32()).collect() };
    let (k32, v32) = (widen(&k16), widen(&v16));
    let meta = kernel_meta(case, &f.tables);
    let shape = HeadShape {
        num_heads: case.num_heads,
        scale: 0.2,
    };
    let from_bf16 = reference::paged_attention(shape, case.layout, &meta, &f.q, &k16, &v16);
    let from_f32 = reference::paged_attention(shape, case.layout, &meta, &f.q, &k32, &v32);
    assert!(from_bf16.iter().all(|x| x.is_finite()));
    assert_eq!(from_bf16, from_f32);
}

/// The phased builds for f16 K/V (up to three heads of a group per pass;
/// AVX2 and, where the CPU has it, AVX-512) give the AVX2 build's bits for
/// every work item: heads of 64 and 128,
/// groups of 1, 2, 3, 4 (two pairs), 6 (two threes) and 7 (Qwen2.5-0.5B's:
/// threes and a single head), partial tiles at both ends, a decode row,
/// blocks of 24 and of 100 keys.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_phased_builds_equal_the_avx2_build_bit_for_bit() {
    assert!(
        simd::use_avx2(),
        "this CPU has no AVX2: the phased builds cannot run here"
    );
    if !simd::use_avx512() {
        eprintln!("this CPU has no AVX-512 F: only the AVX2 phased build is checked");
    }
    let case = |num_kv_heads, num_heads, head_dim, seqs| Case {
        layout: KvLayout {
            num_blocks: 96,
            block_size: 16,
            num_kv_heads,
            head_dim,
        },
        num_heads,
        seqs,
    };
    // Tiles that start mid-block, blocks longer than a tile (64 keys), and
    // blocks whose length is not a multiple of 16.
    let blocks = |block_size, seqs| Case {
        layout: KvLayout {
            num_blocks: 40,
            block_size,
            num_kv_heads: 2,
            head_dim: 128,
        },
        num_heads: 12,
        seqs,
    };
    for case in [
        blocks(100, vec![(130, 19), (250, 1)]),
        blocks(24, vec![(37, 21), (301, 1)]),
        case(3, 9, 64, vec![(300, 29), (517, 1)]),
        case(2, 12, 128, vec![(291, 21), (0, 13)]),
        case(1, 1, 128, vec![(40, 9)]),
        case(2, 14, 64, vec![(97, 18), (33, 1)]),
        case(1, 4, 128, vec![(60, 17)]),
        case(2, 4, 64, vec![(45, 3)]),
    ] {
        let f = fixture(&case, KvDtype::F16);
        let LayerKv::F16 { keys, values } = &f.kv else {
            unreachable!("an f16 fixture")
        };
        let seqs = seqs_of(&case, &f.tables);
        let plan = AttentionPlan::new(seqs, case.layout.num_kv_heads);
        let (dim, group) = (case.layout.head_dim, case.num_heads / case.layout.num_kv_heads);
        let row_len = case.num_heads * dim;
        let scale = 1.0 / (dim as f32).sqrt();
        for item in &plan.items {
            let seq = &plan.seqs[item.seq];
            let first_row = seq.first_row + item.rows.0;
            let q = &f.q[first_row * row_len..(first_row + item.rows.1) * row_len];
            let len = item.rows.1 * group * (dim + 2);
            let (mut want, mut got, mut got_avx2) = (vec![0f32; len], vec![0f32; len], vec![0f32; len]);
            let at = AttendItem {
                scale,
                layout: case.layout,
                seq,
                item: *item,
                q,
            };
            // SAFETY: the CPU has AVX2, FMA and F16C (checked above).
            unsafe {
                attend_f16_avx2(&at, keys, values, &mut want);
                pairs::avx2::attend_f16(&at, keys, values, &mut got_avx2);
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got_avx2),
                bits(&want),
                "AVX2: dim {dim}, group {group}, item {item:?}"
            );
            if simd::use_avx512() {
                // SAFETY: the CPU has AVX-512 F (checked).
                unsafe { pairs::attend_f16(&at, keys, values, &mut got) };
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "AVX-512: dim {dim}, group {group}, item {item:?}"
                );
            }
        }
    }
}
