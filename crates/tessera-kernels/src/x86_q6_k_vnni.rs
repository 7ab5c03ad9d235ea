//! The AVX-512 VNNI path of Q6_K (layout in `q6_k.rs`) against super-block
//! activations: sixteen rows (two groups, see `x86_vnni.rs`) per register.
//! For prefill the quants (0–63) are rebuilt once per chunk and pair from
//! one `ql` and one `qh` register per group into a `PairQuants`, and each
//! super-block's scales widened into a table; for few rows (decode, drafts)
//! each tile rebuilds them from the packed bytes. A tile meets register `t`
//! with activation bytes `4t..4t + 4`, broadcast to all lanes, in one
//! `vpdpbusd` per activation row, giving each run of 16 values its exact dot
//! in 32 bits. One `vpmulld` by the run's signed scale adds it to the
//! super-block's `A`, the scales meet the run sums in eight `madd`s (`B`),
//! and each lane takes the AVX2 kernel's float step: integers are exact in
//! any order, so results equal the other paths bit for bit.
//!
//! A run's four weight registers are built first and the rows' dots then
//! taken one after another, so a tile of 8 rows keeps one dot accumulator
//! live, not eight. With eight, the rebuilt values spilled (one thread,
//! 3072×768 in L3, 8 rows: 259 µs as two tiles of 4, 167 µs so).

use crate::q6_k::{qh_at, ql_at, GROUP, SCALES_AT, SUB_BLOCKS};
use crate::x86::{prefetch_ahead, tile_prefetches};
use crate::x86_q6_k::scale_multipliers;
use crate::x86_vnni::{
    broadcast_four, for_each_pair_tile, join_loads, join_ps, join_si, PairQuants, RunSums, TileRows,
};
use crate::{Q6KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// Runs of 16 values per super-block.
const RUNS: usize = 2 * SUB_BLOCKS;

/// One super-block's factors for both groups of a pair, rows of the lower
/// group in lanes 0–7: `d` as f32, each run's signed scale as an i32, and the
/// scales of runs `2j` and `2j + 1` as the two 16-bit halves of each lane
/// (`madd` multipliers for the run sums).
#[derive(Clone, Copy)]
struct PairFactors {
    d: __m512,
    scales: [__m512i; RUNS],
    scale_pairs: [__m512i; SUB_BLOCKS],
}

/// Activation rows from which a product unpacks each pair of row groups
/// once per chunk (see `x86_q4_k_vnni::UNPACK_MIN_ROWS`).
const UNPACK_MIN_ROWS: usize = 16;

/// See `portable::matmul_q6_k`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C, and the arguments
/// meet `dispatch::check` with `rows.start` a multiple of 8, and the
/// activations hold super-blocks (`dispatch::check_quantization`). Soundness
/// rests on `x.blocks() == w.blocks()` (the tiles read the activations'
/// quants and run sums through unchecked pointers); weight groups and
/// outputs go through checked slices.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q6_k(
    w: &Q6KWeights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    if x.rows() < UNPACK_MIN_ROWS {
        // The packed tiles read no unpacked pair (an empty one, never indexed).
        let no_quants = PairQuants::new(0);
        macro_rules! prepare {
            ($pair:expr) => {{}};
        }
        // A tile of `C` activation rows at (`pair`, `j`), read from the packed bytes.
        macro_rules! tile {
            ($c:literal, $pair:expr, $j:expr) => {
                pair_tile::<$c, true>(w, $pair, &no_quants, &[], x, $j)
            };
        }
        for_each_pair_tile!(rows, x, out, stride, prepare, tile);
        return;
    }
    // SAFETY: all-zero bits are valid registers.
    let mut factors: Vec<PairFactors> = vec![unsafe { std::mem::zeroed() }; w.supers()];
    let mut quants = PairQuants::new(w.supers());
    macro_rules! prepare {
        ($pair:expr) => {{
            pair_factors(w, $pair, &mut factors);
            unpack_pair(w, $pair, &mut quants);
        }};
    }
    // A tile of `C` activation rows at (`pair`, `j`), read from the unpacked pair.
    macro_rules! tile {
        ($c:literal, $pair:expr, $j:expr) => {
            pair_tile::<$c, false>(w, $pair, &quants, &factors, x, $j)
        };
    }
    for_each_pair_tile!(rows, x, out, stride, prepare, tile);
}

/// The quants (0–63) of sub-block `k` of chunk `chunk` at register position
/// `t` of both group super-blocks (`x86_q6_k::sub_block_quants`, 16 rows).
///
/// # Safety
/// The CPU has AVX-512 F and BW; `lo` and `hi` each point at a whole Q6_K
/// group super-block, and `chunk < 2`, `t < 8` (the registers at
/// `ql_at(chunk, k % 2, t)` and `qh_at(chunk, t)` are loaded). `k < 4` picks
/// the bits; any `k` is sound.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn sub_block_quants(lo: *const u8, hi: *const u8, chunk: usize, k: usize, t: usize) -> __m512i {
    let nibble = _mm512_set1_epi8(0x0F);
    let bits = _mm512_set1_epi8(0x30);
    let (ql_at, qh_at) = (ql_at(chunk, k % 2, t), qh_at(chunk, t));
    // SAFETY: both registers lie inside both group super-blocks (the caller's contract).
    let (ql, qh) = unsafe {
        (
            join_loads(lo.add(ql_at), hi.add(ql_at)),
            join_loads(lo.add(qh_at), hi.add(qh_at)),
        )
    };
    let low = match k {
        0 | 1 => _mm512_and_si512(ql, nibble),
        _ => _mm512_and_si512(_mm512_srli_epi16::<4>(ql), nibble),
    };
    let high = match k {
        0 => _mm512_slli_epi16::<4>(qh),
        1 => _mm512_slli_epi16::<2>(qh),
        2 => qh,
        _ => _mm512_srli_epi16::<2>(qh),
    };
    _mm512_or_si512(low, _mm512_and_si512(high, bits))
}

/// A pair's quants (0–63) as bytes, for every tile of the pair.
///
/// # Safety
/// The CPU has AVX-512 F and BW. (The groups and `quants`' size are checked:
/// slicing and indexing panic.)
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn unpack_pair(w: &Q6KWeights, [lower, upper]: [usize; 2], quants: &mut PairQuants) {
    for sb in 0..w.supers() {
        let (lo, hi) = (w.group_super(lower, sb).as_ptr(), w.group_super(upper, sb).as_ptr());
        for j in 0..SUB_BLOCKS {
            for t in 0..8 {
                // SAFETY: both are whole group super-blocks (checked slices); j / 4 < 2,
                // t < 8; the features are enabled here.
                quants.set(sb, j, t, unsafe { sub_block_quants(lo, hi, j / 4, j % 4, t) });
            }
        }
    }
}

/// Every super-block's [`PairFactors`] for the pair.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2 and F16C. (Super-blocks are reached through
/// checked slices; `factors` should hold `w.supers()` entries.)
#[target_feature(enable = "avx512f,avx2,f16c")]
#[inline]
unsafe fn pair_factors(w: &Q6KWeights, pair: [usize; 2], factors: &mut [PairFactors]) {
    for (sb, entry) in factors.iter_mut().enumerate() {
        // SAFETY: the features are enabled here.
        *entry = unsafe { super_factors(w, pair, sb) };
    }
}

/// The [`PairFactors`] of super-block `sb` of the pair `[lower, upper]`.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2 and F16C. (Super-blocks are reached through
/// checked slices.)
#[target_feature(enable = "avx512f,avx2,f16c")]
#[inline]
unsafe fn super_factors(w: &Q6KWeights, [lower, upper]: [usize; 2], sb: usize) -> PairFactors {
    let (lo, hi) = (w.group_super(lower, sb).as_ptr(), w.group_super(upper, sb).as_ptr());
    // SAFETY: `lo` and `hi` are whole group super-blocks (checked slices), which start
    // with eight f16 d, then 16 × 8 scale bytes (`i < 16`, `j < 8`); AVX2 is enabled.
    // Filled in loops: a closure does not inherit the target features.
    unsafe {
        let mut factors = PairFactors {
            d: join_ps(
                _mm256_cvtph_ps(_mm_loadu_si128(lo.cast())),
                _mm256_cvtph_ps(_mm_loadu_si128(hi.cast())),
            ),
            scales: [_mm512_setzero_si512(); RUNS],
            scale_pairs: [_mm512_setzero_si512(); SUB_BLOCKS],
        };
        for (i, scale) in factors.scales.iter_mut().enumerate() {
            *scale = join_si(run_scales(lo, i), run_scales(hi, i));
        }
        for (j, pair) in factors.scale_pairs.iter_mut().enumerate() {
            *pair = join_si(scale_multipliers(lo, j).1, scale_multipliers(hi, j).1);
        }
        factors
    }
}

/// Signed scale `i` of a group super-block's eight rows, as i32.
///
/// # Safety
/// The CPU has AVX2; `data` points at a whole Q6_K group super-block and
/// `i < 16` (the 8 bytes at `SCALES_AT + 8i` are loaded).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn run_scales(data: *const u8, i: usize) -> __m256i {
    // SAFETY: the caller's contract: the 8 bytes of scale i lie inside the group super-block.
    unsafe { _mm256_cvtepi8_epi32(_mm_loadl_epi64(data.add(SCALES_AT + i * GROUP).cast())) }
}

/// `acc + (A − 32·B)·(d·D)` lane by lane: `x86_q6_k::accumulate_super_block`
/// sixteen lanes wide.
#[target_feature(enable = "avx512f")]
#[inline]
fn accumulate_super_block(acc: __m512, (a, b): (__m512i, __m512i), d: __m512, dy: f32) -> __m512 {
    let centred = _mm512_sub_epi32(a, _mm512_slli_epi32::<5>(b));
    _mm512_add_ps(
        acc,
        _mm512_mul_ps(_mm512_cvtepi32_ps(centred), _mm512_mul_ps(d, _mm512_set1_ps(dy))),
    )
}

/// The sixteen outputs of the pair `[lower, upper]` against activation rows
/// `j0..j0 + C`: its quants and factors read from the packed bytes
/// (`PACKED`, for few activation rows) or from the pair's unpacked `quants`
/// and `factors` tables (`unpack_pair`, `pair_factors`).
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C; the activations
/// hold super-blocks with `x.blocks() == w.blocks()` (their quants and run
/// sums are read through unchecked pointers). Unless `PACKED`, `quants` and
/// `factors` hold the pair's `w.supers()` super-blocks (checked: indexing
/// panics). The groups and `j0 + C <= x.rows()` are checked (slicing panics).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn pair_tile<const C: usize, const PACKED: bool>(
    w: &Q6KWeights,
    [lower, upper]: [usize; 2],
    quants: &PairQuants,
    factors: &[PairFactors],
    x: &Q8Activations,
    j0: usize,
) -> [__m512; C] {
    let mut acc = [_mm512_setzero_ps(); C];
    let rows = TileRows::<C>::new(x, j0, RunSums::Sixteen);
    // Unpacked tiles read tables filled by one pass over the pair.
    let (group_bytes, prefetch) = (w.group_super(lower, 0).len(), PACKED && tile_prefetches(C, x.rows()));
    for sb in 0..w.supers() {
        let (lo, hi) = (w.group_super(lower, sb).as_ptr(), w.group_super(upper, sb).as_ptr());
        if prefetch {
            prefetch_ahead(lo, group_bytes);
            prefetch_ahead(hi, group_bytes);
        }
        let computed;
        let factors = match PACKED {
            true => {
                // SAFETY: the features are enabled here.
                computed = unsafe { super_factors(w, [lower, upper], sb) };
                &computed
            }
            false => &factors[sb],
        };
        let mut a = [_mm512_setzero_si512(); C];
        for j in 0..SUB_BLOCKS {
            let block = sb * SUB_BLOCKS + j;
            for half in 0..2 {
                // The run's four weight registers first, then each row's dot in turn:
                // one accumulator live rather than one per row (no spills at 8 rows).
                let mut q = [_mm512_setzero_si512(); 4];
                for (i, q) in q.iter_mut().enumerate() {
                    *q = match PACKED {
                        // SAFETY: whole group super-blocks (checked slices); j / 4 < 2,
                        // half·4 + i < 8; the features are enabled here.
                        true => unsafe { sub_block_quants(lo, hi, j / 4, j % 4, half * 4 + i) },
                        false => quants.get(sb, j, half * 4 + i),
                    };
                }
                let scale = factors.scales[2 * j + half];
                for (a, row) in a.iter_mut().zip(rows.quants) {
                    let mut dot = _mm512_setzero_si512();
                    for (i, q) in q.iter().enumerate() {
                        // SAFETY: block `block < 8 · w.supers() == x.blocks()` (the caller's
                        // contract) is 32 bytes of the row's quants, and 4t + 4 <= 32.
                        let y = unsafe { broadcast_four(row.add(block * BLOCK + (half * 4 + i) * 4)) };
                        dot = _mm512_dpbusd_epi32(dot, *q, y);
                    }
                    *a = _mm512_add_epi32(*a, _mm512_mullo_epi32(dot, scale));
                }
            }
        }
        for c in 0..C {
            let mut b = _mm512_setzero_si512();
            for (j, pair) in factors.scale_pairs.iter().enumerate() {
                // SAFETY: run sums `16·sb + 2j + 1 < 16·w.supers()` lie inside the row's
                // `sums16` (one per 16 activation values, `x.blocks() · 2` of them).
                let run_sums = unsafe {
                    _mm512_set1_epi32(
                        rows.sums[c]
                            .add(2 * (sb * SUB_BLOCKS + j))
                            .cast::<i32>()
                            .read_unaligned(),
                    )
                };
                b = _mm512_add_epi32(b, _mm512_madd_epi16(*pair, run_sums));
            }
            acc[c] = accumulate_super_block(acc[c], (a[c], b), factors.d, rows.scales[c][sb]);
        }
    }
    acc
}
