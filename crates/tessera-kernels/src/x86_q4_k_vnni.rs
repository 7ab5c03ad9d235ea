//! The AVX-512 VNNI path of Q4_K (layout in `q4_k.rs`): the AVX2 kernel's
//! loop with two 32-byte nibble registers per 64-byte load, so one
//! `vpdpbusd` takes 64 byte products straight into 32-bit sums (AVX2 needs a
//! `maddubs` and an add per 32). Lanes 0–7 of a register hold the eight rows
//! at register position `t`, lanes 8–15 the same rows at `t + 1`; the
//! activation pattern to match (bytes `4t..4t+4` in lanes 0–7, the next four
//! in lanes 8–15) is one permutation of a 16-byte load. The two halves are
//! added into the eight rows' exact integer dots, then each sub-block runs
//! the AVX2 kernel's float arithmetic unchanged, so results are equal to the
//! other paths bit for bit.

use crate::q4::GROUP;
use crate::q4_k::{nibbles_at, PAIR_BYTES, QH_AT, SUB_BLOCKS};
use crate::x86_q4::for_each_group_tile;
use crate::x86_q4_k::{accumulate_sub_block, super_block_factors};
use crate::{Q4KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q4_k`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C; the caller
/// checked the shapes and that `rows` starts on a group.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q4_k(
    w: &Q4KWeights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    if w.five_bit() {
        // SAFETY: the caller's contract.
        unsafe { matmul_groups::<true>(w, rows, x, out, stride) }
    } else {
        // SAFETY: the caller's contract.
        unsafe { matmul_groups::<false>(w, rows, x, out, stride) }
    }
}

/// [`matmul_q4_k`] for Q4_K (`FIVE` false) or Q5_K.
///
/// # Safety
/// As [`matmul_q4_k`].
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
unsafe fn matmul_groups<const FIVE: bool>(
    w: &Q4KWeights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    // A tile of `C` activation rows at (`group`, `j`).
    macro_rules! tile {
        ($c:literal, $group:expr, $j:expr) => {
            group_tile::<$c, FIVE>(w, $group, x, $j)
        };
    }
    for_each_group_tile!(rows, x, out, stride, tile);
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

/// The 16 bytes `4t..4t + 16` of a block (register positions `t..t + 4`).
///
/// # Safety
/// `at` points at 16 readable bytes.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn four_positions(at: *const i8) -> __m512i {
    // SAFETY: the caller's contract; the upper lanes are never read.
    _mm512_castsi128_si512(unsafe { _mm_loadu_si128(at.cast()) })
}

/// The eight outputs of weight group `group` against activation rows `j0..j0 + C`.
///
/// # Safety
/// As [`matmul_q4_k`]; `j0 + C <= x.rows()` and `group` is a group of `w`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn group_tile<const C: usize, const FIVE: bool>(
    w: &Q4KWeights,
    group: usize,
    x: &Q8Activations,
    j0: usize,
) -> [__m256; C] {
    let nibble = _mm512_set1_epi8(0x0F);
    let nibbles_at = nibbles_at(FIVE);
    // Lanes 0–7 take position t's four bytes, lanes 8–15 position t + 1's.
    let first = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    let second = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    let mut acc = [_mm256_setzero_ps(); C];
    let mut quants: [&[i8]; C] = [&[]; C];
    let mut scales: [&[f32]; C] = [&[]; C];
    let mut sums: [&[f32]; C] = [&[]; C];
    for c in 0..C {
        quants[c] = x.row_quants(j0 + c);
        scales[c] = x.row_scales(j0 + c);
        sums[c] = x.row_sums(j0 + c);
    }
    for sb in 0..w.supers() {
        let data = w.group_super(group, sb).as_ptr();
        // SAFETY: `data` is a whole group super-block.
        let (d_scale, minus_min) = unsafe { super_block_factors(data) };
        for pair in 0..SUB_BLOCKS / 2 {
            let (even, odd) = (sb * SUB_BLOCKS + 2 * pair, sb * SUB_BLOCKS + 2 * pair + 1);
            let mut dots = [[_mm512_setzero_si512(); C]; 2];
            for quarter in [0, 1] {
                // Positions 4q..4q + 4 of the pair: two 64-byte loads.
                // SAFETY: a pair holds eight 32-byte registers after the nibbles' start.
                let (packed_a, packed_b) = unsafe {
                    let at = data.add(nibbles_at + pair * PAIR_BYTES + quarter * 128);
                    (_mm512_loadu_si512(at.cast()), _mm512_loadu_si512(at.add(64).cast()))
                };
                let mut low_a = _mm512_and_si512(packed_a, nibble);
                let mut high_a = _mm512_and_si512(_mm512_srli_epi16::<4>(packed_a), nibble);
                let mut low_b = _mm512_and_si512(packed_b, nibble);
                let mut high_b = _mm512_and_si512(_mm512_srli_epi16::<4>(packed_b), nibble);
                if FIVE {
                    // SAFETY: Q5_K's eight qh registers lie after QH_AT.
                    let (qh_a, qh_b) = unsafe {
                        let at = data.add(QH_AT + quarter * 128);
                        (_mm512_loadu_si512(at.cast()), _mm512_loadu_si512(at.add(64).cast()))
                    };
                    low_a = _mm512_or_si512(low_a, fifth_bits(qh_a, 2 * pair));
                    high_a = _mm512_or_si512(high_a, fifth_bits(qh_a, 2 * pair + 1));
                    low_b = _mm512_or_si512(low_b, fifth_bits(qh_b, 2 * pair));
                    high_b = _mm512_or_si512(high_b, fifth_bits(qh_b, 2 * pair + 1));
                }
                for c in 0..C {
                    // SAFETY: activation blocks are 32 bytes and 16·quarter + 16 <= 32.
                    let (y_even, y_odd) = unsafe {
                        let row = quants[c].as_ptr();
                        (
                            four_positions(row.add(even * BLOCK + quarter * 16)),
                            four_positions(row.add(odd * BLOCK + quarter * 16)),
                        )
                    };
                    let mut even_dot = _mm512_dpbusd_epi32(dots[0][c], low_a, _mm512_permutexvar_epi32(first, y_even));
                    even_dot = _mm512_dpbusd_epi32(even_dot, low_b, _mm512_permutexvar_epi32(second, y_even));
                    let mut odd_dot = _mm512_dpbusd_epi32(dots[1][c], high_a, _mm512_permutexvar_epi32(first, y_odd));
                    odd_dot = _mm512_dpbusd_epi32(odd_dot, high_b, _mm512_permutexvar_epi32(second, y_odd));
                    dots[0][c] = even_dot;
                    dots[1][c] = odd_dot;
                }
            }
            for (half, b) in [even, odd].into_iter().enumerate() {
                let j = 2 * pair + half;
                for c in 0..C {
                    let folded = _mm256_add_epi32(
                        _mm512_castsi512_si256(dots[half][c]),
                        _mm512_extracti64x4_epi64::<1>(dots[half][c]),
                    );
                    let factors = (d_scale[j], minus_min[j]);
                    acc[c] = accumulate_sub_block(acc[c], folded, factors, (scales[c][b], sums[c][b]));
                }
            }
        }
    }
    acc
}
