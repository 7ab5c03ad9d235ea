//! The AVX-512 VNNI path of Q4_K and Q5_K (layout in `q4_k.rs`) against
//! super-block activations, for prefill: sixteen rows (two groups, see
//! `x86_vnni.rs`) per register. Once per chunk and pair the nibbles (with
//! Q5_K's fifth bits) are unpacked into a `PairQuants` and each super-block's
//! factors into a table; a tile then meets register `t` of a sub-block with
//! activation bytes `4t..4t + 4`, broadcast to all lanes, in one `vpdpbusd`
//! per activation row, giving each row's exact sub-block dot in 32 bits
//! (|Σ| ≤ 32·31·127). One `vpmulld` by the sub-block's scale adds it to the
//! super-block's `A`, the mins meet the run sums in four `madd`s (`B`), and
//! each lane takes the AVX2 kernel's float step: integers are exact in any
//! order, so results equal the other paths bit for bit.

use crate::q4::GROUP;
use crate::q4_k::{nibbles_at, PAIR_BYTES, QH_AT, SUB_BLOCKS};
use crate::x86::{prefetch_ahead, tile_prefetches};
use crate::x86_q4_k::super_block_factors;
use crate::x86_vnni::{
    broadcast_four, for_each_pair_tile, join_loads, join_ps, join_si, PairQuants, RunSums, TileRows,
};
use crate::{Q4KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// One super-block's factors for both groups of a pair, rows of the lower
/// group in lanes 0–7: `d` and `dmin` as f32, each sub-block's 6-bit scale as
/// an i32, and the mins of sub-blocks `2k` and `2k + 1` as the two 16-bit
/// halves of each lane (`madd` multipliers for the run sums).
#[derive(Clone, Copy)]
struct PairFactors {
    d: __m512,
    dmin: __m512,
    scales: [__m512i; SUB_BLOCKS],
    min_pairs: [__m512i; SUB_BLOCKS / 2],
}

/// Activation rows from which a product unpacks each pair of row groups
/// once per chunk for all its tiles; fewer rows read the packed bytes in
/// each tile (decode, drafts: one tile, so unpacking is only a second pass).
const UNPACK_MIN_ROWS: usize = 16;

/// See `portable::matmul_q4_k`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C, and the arguments
/// meet `dispatch::check` with `rows.start` a multiple of 8, and the
/// activations hold super-blocks (`dispatch::check_quantization`). Soundness
/// rests on `x.blocks() == w.blocks()` (the tiles read the activations'
/// quants and run sums through unchecked pointers); weight groups and
/// outputs go through checked slices.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q4_k(
    w: &Q4KWeights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    if w.five_bit() {
        // SAFETY: the caller's contract, and `FIVE == w.five_bit()`.
        unsafe { matmul_groups::<true>(w, rows, x, out, stride) }
    } else {
        // SAFETY: as above.
        unsafe { matmul_groups::<false>(w, rows, x, out, stride) }
    }
}

/// [`matmul_q4_k`] for Q4_K (`FIVE` false) or Q5_K.
///
/// # Safety
/// As [`matmul_q4_k`], and `FIVE == w.five_bit()` (see [`unpack_pair`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
unsafe fn matmul_groups<const FIVE: bool>(
    w: &Q4KWeights,
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
                pair_tile::<$c, FIVE, true>(w, $pair, &no_quants, &[], x, $j)
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
            unpack_pair::<FIVE>(w, $pair, &mut quants);
        }};
    }
    // A tile of `C` activation rows at (`pair`, `j`), read from the unpacked pair.
    macro_rules! tile {
        ($c:literal, $pair:expr, $j:expr) => {
            pair_tile::<$c, FIVE, false>(w, $pair, &quants, &factors, x, $j)
        };
    }
    for_each_pair_tile!(rows, x, out, stride, prepare, tile);
}

/// Bit `bit` of every byte of `qh`, moved to bit 4 (see `x86_q4_k::fifth_bits`).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
pub(crate) fn fifth_bits(qh: __m512i, bit: usize) -> __m512i {
    let moved = if bit <= 4 {
        _mm512_sll_epi16(qh, _mm_cvtsi32_si128(4 - bit as i32))
    } else {
        _mm512_srl_epi16(qh, _mm_cvtsi32_si128(bit as i32 - 4))
    };
    _mm512_and_si512(moved, _mm512_set1_epi8(0x10))
}

/// Every super-block's [`PairFactors`] for the pair.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2, FMA and F16C. (Super-blocks are reached
/// through checked slices; `factors` should hold `w.supers()` entries.)
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
#[inline]
unsafe fn pair_factors(w: &Q4KWeights, pair: [usize; 2], factors: &mut [PairFactors]) {
    for (sb, entry) in factors.iter_mut().enumerate() {
        // SAFETY: the features are enabled here.
        *entry = unsafe { super_factors(w, pair, sb) };
    }
}

/// The [`PairFactors`] of super-block `sb` of the pair `[lower, upper]`.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2, FMA and F16C. (Super-blocks are reached
/// through checked slices.)
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
#[inline]
unsafe fn super_factors(w: &Q4KWeights, [lower, upper]: [usize; 2], sb: usize) -> PairFactors {
    // The AVX2 factors carry each scale in both 16-bit halves of its lane.
    let low_half = _mm256_set1_epi32(0xFFFF);
    let (lo, hi) = (w.group_super(lower, sb).as_ptr(), w.group_super(upper, sb).as_ptr());
    // SAFETY: both are whole group super-blocks (checked slices), longer than their
    // factors; the features are enabled here.
    let (lo, hi) = unsafe { (super_block_factors(lo), super_block_factors(hi)) };
    // Filled in loops: a closure does not inherit the target features.
    let mut factors = PairFactors {
        d: join_ps(lo.d, hi.d),
        dmin: join_ps(lo.dmin, hi.dmin),
        scales: [_mm512_setzero_si512(); SUB_BLOCKS],
        min_pairs: [_mm512_setzero_si512(); SUB_BLOCKS / 2],
    };
    for (j, scale) in factors.scales.iter_mut().enumerate() {
        *scale = join_si(
            _mm256_and_si256(lo.scales[j], low_half),
            _mm256_and_si256(hi.scales[j], low_half),
        );
    }
    for (k, pair) in factors.min_pairs.iter_mut().enumerate() {
        *pair = join_si(lo.min_pairs[k], hi.min_pairs[k]);
    }
    factors
}

/// Register `t` of sub-block `j` of the pair's group super-blocks at `lo`
/// and `hi` (lane `r`: row `r`'s values `4t..4t + 4`, 0–15 or 0–31 for Q5_K),
/// from their packed bytes.
///
/// # Safety
/// The CPU has AVX-512 F and BW; `lo` and `hi` point at whole group
/// super-blocks of `w` with `FIVE == w.five_bit()` (Q5_K's nibbles start 256
/// bytes later, so `FIVE` on a Q4_K matrix would read past them), `j < 8`
/// and `t < 8`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn packed_values<const FIVE: bool>(lo: *const u8, hi: *const u8, j: usize, t: usize) -> __m512i {
    let at = nibbles_at(FIVE) + (j / 2) * PAIR_BYTES + t * 32;
    // SAFETY: pair `j / 2 < 4` holds eight 32-byte registers after the nibbles' start,
    // inside both group super-blocks of this kind (the caller's contract).
    let packed = unsafe { join_loads(lo.add(at), hi.add(at)) };
    let shifted = match j % 2 {
        0 => packed,
        _ => _mm512_srli_epi16::<4>(packed),
    };
    let values = _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F));
    if !FIVE {
        return values;
    }
    // SAFETY: Q5_K's eight qh registers lie after QH_AT, inside both blocks.
    let qh = unsafe { join_loads(lo.add(QH_AT + t * 32), hi.add(QH_AT + t * 32)) };
    _mm512_or_si512(values, fifth_bits(qh, j))
}

/// A pair's values (0–15, or 0–31 for Q5_K) as bytes, for every tile of the pair.
///
/// # Safety
/// The CPU has AVX-512 F and BW, and `FIVE == w.five_bit()`: Q5_K's nibbles
/// start 256 bytes later, so `FIVE` on a Q4_K matrix would read past its
/// group super-blocks. (The groups and `quants`' size are checked: slicing
/// and indexing panic.)
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn unpack_pair<const FIVE: bool>(w: &Q4KWeights, [lower, upper]: [usize; 2], quants: &mut PairQuants) {
    for sb in 0..w.supers() {
        let (lo, hi) = (w.group_super(lower, sb).as_ptr(), w.group_super(upper, sb).as_ptr());
        for j in 0..SUB_BLOCKS {
            for t in 0..8 {
                // SAFETY: whole group super-blocks (checked slices) of this kind (`FIVE`
                // matches `w`), j, t < 8; the features are enabled here.
                quants.set(sb, j, t, unsafe { packed_values::<FIVE>(lo, hi, j, t) });
            }
        }
    }
}

/// `acc + (A·(d·D) − B·(dmin·D))` lane by lane, unfused, in that order:
/// `x86_q4_k::accumulate_super_block` sixteen lanes wide.
#[target_feature(enable = "avx512f")]
#[inline]
fn accumulate_super_block(acc: __m512, (a, b): (__m512i, __m512i), factors: &PairFactors, dy: f32) -> __m512 {
    let dy = _mm512_set1_ps(dy);
    let scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(a), _mm512_mul_ps(factors.d, dy));
    let shifted = _mm512_mul_ps(_mm512_cvtepi32_ps(b), _mm512_mul_ps(factors.dmin, dy));
    _mm512_add_ps(acc, _mm512_sub_ps(scaled, shifted))
}

/// The sixteen outputs of the pair `[lower, upper]` against activation rows
/// `j0..j0 + C`: its values and factors read from the packed bytes
/// (`PACKED`, for few activation rows) or from the pair's unpacked `quants`
/// and `factors` tables (`unpack_pair`, `pair_factors`).
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C; `FIVE ==
/// w.five_bit()` (see [`packed_values`]); the activations hold super-blocks
/// with `x.blocks() == w.blocks()` (their quants and run sums are read
/// through unchecked pointers). Unless `PACKED`, `quants` and `factors` hold
/// the pair's `w.supers()` super-blocks (checked: indexing panics). The
/// groups and `j0 + C <= x.rows()` are checked (slicing panics).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn pair_tile<const C: usize, const FIVE: bool, const PACKED: bool>(
    w: &Q4KWeights,
    [lower, upper]: [usize; 2],
    quants: &PairQuants,
    factors: &[PairFactors],
    x: &Q8Activations,
    j0: usize,
) -> [__m512; C] {
    let mut acc = [_mm512_setzero_ps(); C];
    let rows = TileRows::<C>::new(x, j0, RunSums::ThirtyTwo);
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
            // The sub-block's eight weight registers first, then each row's dot in
            // turn: one accumulator live rather than one per row.
            let mut q = [_mm512_setzero_si512(); 8];
            for (t, q) in q.iter_mut().enumerate() {
                *q = match PACKED {
                    // SAFETY: whole group super-blocks (checked slices) of this kind (the
                    // caller's contract), j, t < 8; the features are enabled here.
                    true => unsafe { packed_values::<FIVE>(lo, hi, j, t) },
                    false => quants.get(sb, j, t),
                };
            }
            for (a, row) in a.iter_mut().zip(rows.quants) {
                let mut dot = _mm512_setzero_si512();
                for (t, q) in q.iter().enumerate() {
                    // SAFETY: block `block < 8 · w.supers() == x.blocks()` (the caller's
                    // contract) is 32 bytes of the row's quants, and 4t + 4 <= 32.
                    let y = unsafe { broadcast_four(row.add(block * BLOCK + t * 4)) };
                    dot = _mm512_dpbusd_epi32(dot, *q, y);
                }
                *a = _mm512_add_epi32(*a, _mm512_mullo_epi32(dot, factors.scales[j]));
            }
        }
        for c in 0..C {
            let mut b = _mm512_setzero_si512();
            for (k, pair) in factors.min_pairs.iter().enumerate() {
                // SAFETY: run sums `8·sb + 2k + 1 < 8·w.supers() == x.blocks()` lie
                // inside the row's `sums32` (one per 32 activation values).
                let run_sums = unsafe {
                    _mm512_set1_epi32(rows.sums[c].add(sb * SUB_BLOCKS + 2 * k).cast::<i32>().read_unaligned())
                };
                b = _mm512_add_epi32(b, _mm512_madd_epi16(*pair, run_sums));
            }
            acc[c] = accumulate_super_block(acc[c], (a[c], b), factors, rows.scales[c][sb]);
        }
    }
    acc
}
