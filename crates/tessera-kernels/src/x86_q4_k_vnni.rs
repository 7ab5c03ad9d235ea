//! The AVX-512 VNNI path of Q4_K and Q5_K (layout in `q4_k.rs`), for
//! prefill: sixteen rows (two groups, see `x86_vnni.rs`) per register. Once
//! per chunk and pair the nibbles (with Q5_K's fifth bits) are unpacked into
//! a `PairQuants` (register `t` of a sub-block pair is one 32-byte load from
//! each group, its low nibbles the even sub-block, its high nibbles the odd
//! one) and the per-row factors into a table; each tile then meets the
//! registers with activation bytes `4t..4t + 4`, broadcast to all lanes, in
//! one `vpdpbusd` per activation row. Each sub-block then runs the AVX2
//! kernel's float arithmetic per lane (`accumulate_sub_block`, sixteen lanes
//! wide), so results are equal to the other paths bit for bit.

use crate::q4::GROUP;
use crate::q4_k::{nibbles_at, PAIR_BYTES, QH_AT, SUB_BLOCKS};
use crate::x86_q4_k::super_block_factors;
use crate::x86_vnni::{broadcast_four, for_each_pair_tile, join_loads, join_ps, PairQuants};
use crate::{Q4KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q4_k`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C, and the arguments
/// meet `dispatch::check` with `rows.start` a multiple of 8. Soundness rests
/// on `x.blocks() == w.blocks()` (the tiles read activation blocks
/// `0..w.blocks()` through unchecked pointers); weight groups and outputs go
/// through checked slices.
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
    // Per super-block, sub-block and row of the pair: d·scale, then −dmin·min.
    let mut factors = vec![[_mm512_setzero_ps(); 2 * SUB_BLOCKS]; w.supers()];
    let mut quants = PairQuants::new(w.supers());
    macro_rules! prepare {
        ($pair:expr) => {{
            pair_factors(w, $pair, &mut factors);
            unpack_pair::<FIVE>(w, $pair, &mut quants);
        }};
    }
    // A tile of `C` activation rows at (`pair`, `j`).
    macro_rules! tile {
        ($c:literal, $pair:expr, $j:expr) => {
            pair_tile::<$c>(&quants, &factors, x, $j)
        };
    }
    for_each_pair_tile!(rows, x, out, stride, prepare, tile);
}

/// Bit `bit` of every byte of `qh`, moved to bit 4 (see `x86_q4_k::fifth_bits`).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn fifth_bits(qh: __m512i, bit: usize) -> __m512i {
    let moved = if bit <= 4 {
        _mm512_sll_epi16(qh, _mm_cvtsi32_si128(4 - bit as i32))
    } else {
        _mm512_srl_epi16(qh, _mm_cvtsi32_si128(bit as i32 - 4))
    };
    _mm512_and_si512(moved, _mm512_set1_epi8(0x10))
}

/// `acc + (Σq·y · d·scale) · d_y + (−dmin·min) · s_y` lane by lane, unfused,
/// in that order: `x86_q4_k::accumulate_sub_block` sixteen lanes wide.
#[target_feature(enable = "avx512f")]
#[inline]
fn accumulate_sub_block(
    acc: __m512,
    dot: __m512i,
    (d_scale, minus_min): (__m512, __m512),
    (activation_scale, activation_sum): (f32, f32),
) -> __m512 {
    let scaled = _mm512_mul_ps(
        _mm512_mul_ps(_mm512_cvtepi32_ps(dot), d_scale),
        _mm512_set1_ps(activation_scale),
    );
    let lanes = _mm512_add_ps(scaled, _mm512_mul_ps(minus_min, _mm512_set1_ps(activation_sum)));
    _mm512_add_ps(acc, lanes)
}

/// Every super-block's per-sub-block factors for both groups of a pair:
/// `factors[sb][j]` = `d·scale_j`, `factors[sb][8 + j]` = `−dmin·min_j`, rows
/// of the lower group in lanes 0–7.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2, FMA and F16C. (Super-blocks are reached
/// through checked slices; `factors` should hold `w.supers()` entries.)
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
#[inline]
unsafe fn pair_factors(w: &Q4KWeights, [lower, upper]: [usize; 2], factors: &mut [[__m512; 2 * SUB_BLOCKS]]) {
    for (sb, entry) in factors.iter_mut().enumerate() {
        let (lo, hi) = (w.group_super(lower, sb).as_ptr(), w.group_super(upper, sb).as_ptr());
        // SAFETY: both are whole group super-blocks (checked slices), longer than their
        // factors; the features are enabled here.
        let ((scale_lo, min_lo), (scale_hi, min_hi)) = unsafe { (super_block_factors(lo), super_block_factors(hi)) };
        for j in 0..SUB_BLOCKS {
            entry[j] = join_ps(scale_lo[j], scale_hi[j]);
            entry[SUB_BLOCKS + j] = join_ps(min_lo[j], min_hi[j]);
        }
    }
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
    let nibble = _mm512_set1_epi8(0x0F);
    let nibbles_at = nibbles_at(FIVE);
    for sb in 0..w.supers() {
        let (lo, hi) = (w.group_super(lower, sb).as_ptr(), w.group_super(upper, sb).as_ptr());
        for pair in 0..SUB_BLOCKS / 2 {
            for t in 0..8 {
                let at = nibbles_at + pair * PAIR_BYTES + t * 32;
                // SAFETY: pair `pair < 4` holds eight 32-byte registers after the nibbles'
                // start, inside both group super-blocks of this kind (`FIVE` matches `w`).
                let packed = unsafe { join_loads(lo.add(at), hi.add(at)) };
                let mut low = _mm512_and_si512(packed, nibble);
                let mut high = _mm512_and_si512(_mm512_srli_epi16::<4>(packed), nibble);
                if FIVE {
                    // SAFETY: Q5_K's eight qh registers lie after QH_AT, inside both blocks.
                    let qh = unsafe { join_loads(lo.add(QH_AT + t * 32), hi.add(QH_AT + t * 32)) };
                    low = _mm512_or_si512(low, fifth_bits(qh, 2 * pair));
                    high = _mm512_or_si512(high, fifth_bits(qh, 2 * pair + 1));
                }
                quants.set(sb, 2 * pair, t, low);
                quants.set(sb, 2 * pair + 1, t, high);
            }
        }
    }
}

/// The sixteen outputs of an unpacked pair against activation rows `j0..j0 + C`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C, and
/// `factors.len() · 8 <= x.blocks()`: the activation blocks of every
/// super-block in `factors` are read through unchecked pointers (the kernel
/// passes `w.supers()` entries, and `x.blocks() == w.blocks()`). `j0 + C <=
/// x.rows()` and `quants` are checked (slicing and indexing panic).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn pair_tile<const C: usize>(
    quants: &PairQuants,
    factors: &[[__m512; 2 * SUB_BLOCKS]],
    x: &Q8Activations,
    j0: usize,
) -> [__m512; C] {
    let mut acc = [_mm512_setzero_ps(); C];
    // Filled in a plain loop: `std::array::from_fn` here made the tile 60% slower
    // (measured; it changes how the accumulators are allocated to registers).
    let mut rows: [&[i8]; C] = [&[]; C];
    let mut scales: [&[f32]; C] = [&[]; C];
    let mut sums: [&[f32]; C] = [&[]; C];
    for c in 0..C {
        rows[c] = x.row_quants(j0 + c);
        scales[c] = x.row_scales(j0 + c);
        sums[c] = x.row_sums(j0 + c);
    }
    for (sb, sub_block_factors) in factors.iter().enumerate() {
        for pair in 0..SUB_BLOCKS / 2 {
            let (even, odd) = (sb * SUB_BLOCKS + 2 * pair, sb * SUB_BLOCKS + 2 * pair + 1);
            let mut dots = [[_mm512_setzero_si512(); C]; 2];
            for t in 0..8 {
                let (low, high) = (quants.get(sb, 2 * pair, t), quants.get(sb, 2 * pair + 1, t));
                for c in 0..C {
                    // SAFETY: blocks `even < odd < 8 · factors.len() <= x.blocks()` (the
                    // caller's contract) are 32 bytes each, and 4t + 4 <= 32.
                    let (y_even, y_odd) = unsafe {
                        let row = rows[c].as_ptr();
                        (
                            broadcast_four(row.add(even * BLOCK + t * 4)),
                            broadcast_four(row.add(odd * BLOCK + t * 4)),
                        )
                    };
                    dots[0][c] = _mm512_dpbusd_epi32(dots[0][c], low, y_even);
                    dots[1][c] = _mm512_dpbusd_epi32(dots[1][c], high, y_odd);
                }
            }
            for (half, b) in [even, odd].into_iter().enumerate() {
                let j = 2 * pair + half;
                let factors = (sub_block_factors[j], sub_block_factors[SUB_BLOCKS + j]);
                for c in 0..C {
                    acc[c] = accumulate_sub_block(acc[c], dots[half][c], factors, (scales[c][b], sums[c][b]));
                }
            }
        }
    }
    acc
}
