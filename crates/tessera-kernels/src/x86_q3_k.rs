//! The AVX2+FMA+F16C path of Q3_K (layout in `q3_k.rs`): eight weight rows in
//! the eight lanes of a register, each activation row making its own pass
//! over the group's super-blocks (as Q6_K's decode loop); per register
//! position the quants 0–7 of a sub-block are its two `qs` bits and its
//! `hmask` bit moved into place; per lane the portable `dot_q3_k` arithmetic.

use crate::q3_k::{qs_at, HMASK_AT, SCALES_AT, SUB_BLOCKS};
use crate::q4::GROUP;
use crate::x86_q4::for_each_group_tile;
use crate::{Q3KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q3_k`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and the arguments meet `dispatch::check`
/// with `rows.start` a multiple of 8. Soundness rests on `x.blocks() ==
/// w.blocks()` (the tiles read activation blocks `0..w.blocks()` through
/// unchecked pointers); weight groups and outputs go through checked slices.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q3_k(
    w: &Q3KWeights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    // A tile of `C` activation rows at (`group`, `j`).
    macro_rules! tile {
        ($c:literal, $group:expr, $j:expr) => {
            group_tile::<$c>(w, $group, x, $j)
        };
    }
    for_each_group_tile!(rows, x, out, stride, tile);
}

/// Sub-block `k` of chunk `chunk` at register position `t`: quants 0–7.
///
/// # Safety
/// The CPU has AVX2; `data` points at a whole Q3_K group super-block and
/// `chunk < 2`, `t < 8` (the 32-byte registers at `qs_at(chunk, t)` and
/// `HMASK_AT + 32t` are loaded). `k < 4` picks the bits; any `k` is sound.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn sub_block_quants(data: *const u8, chunk: usize, k: usize, t: usize) -> __m256i {
    // SAFETY: both registers lie inside the group super-block (the caller's contract).
    let (qs, hmask) = unsafe {
        (
            _mm256_loadu_si256(data.add(qs_at(chunk, t)).cast()),
            _mm256_loadu_si256(data.add(HMASK_AT + t * 32).cast()),
        )
    };
    let low = _mm256_and_si256(
        _mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * k as i32)),
        _mm256_set1_epi8(3),
    );
    // hmask bit j = 4·chunk + k moved to bit 2 (what 16-bit shifts carry across bytes is masked off).
    let j = (4 * chunk + k) as i32;
    let moved = if j >= 2 {
        _mm256_srl_epi16(hmask, _mm_cvtsi32_si128(j - 2))
    } else {
        _mm256_sll_epi16(hmask, _mm_cvtsi32_si128(2 - j))
    };
    _mm256_or_si256(low, _mm256_and_si256(moved, _mm256_set1_epi8(4)))
}

/// The eight outputs of weight group `group` against activation rows `j0..j0 + C`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and `x.blocks() == w.blocks()` (activation
/// blocks are read through unchecked pointers). `group` and `j0 + C <=
/// x.rows()` are checked (slicing panics).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn group_tile<const C: usize>(w: &Q3KWeights, group: usize, x: &Q8Activations, j0: usize) -> [__m256; C] {
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); C];
    for (c, lanes) in acc.iter_mut().enumerate() {
        let (quants, scales, halves) = (x.row_quants(j0 + c), x.row_scales(j0 + c), x.row_half_sums(j0 + c));
        for sb in 0..w.supers() {
            let data = w.group_super(group, sb).as_ptr();
            // SAFETY: `data` is a whole group super-block (a checked slice), which
            // starts with eight f16 d.
            let d = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(data.cast())) };
            for j in 0..SUB_BLOCKS {
                let (chunk, k, b) = (j / 4, j % 4, sb * SUB_BLOCKS + j);
                for half in [0, 1] {
                    let mut dot = _mm256_setzero_si256();
                    for pair in 0..2 {
                        let t = half * 4 + pair * 2;
                        // SAFETY: registers `t + 1 < 8` of chunk `chunk < 2` lie inside the
                        // group super-block; activation block `b < w.blocks() == x.blocks()`
                        // (the caller's contract) is 32 bytes, and 4t + 8 <= 32.
                        let products = unsafe {
                            let (q0, q1) = (
                                sub_block_quants(data, chunk, k, t),
                                sub_block_quants(data, chunk, k, t + 1),
                            );
                            let y = quants.as_ptr().add(b * BLOCK + t * 4);
                            let y0 = _mm256_set1_epi32(y.cast::<i32>().read_unaligned());
                            let y1 = _mm256_set1_epi32(y.add(4).cast::<i32>().read_unaligned());
                            // Two products of at most 2·7·128 each: exact in 16 bits.
                            _mm256_add_epi16(_mm256_maddubs_epi16(q0, y0), _mm256_maddubs_epi16(q1, y1))
                        };
                        dot = _mm256_add_epi32(dot, _mm256_madd_epi16(products, ones));
                    }
                    let centered = _mm256_sub_epi32(dot, _mm256_set1_epi32(4 * halves[b][half]));
                    // SAFETY: the 8 bytes of scale `2j + half < 16` lie inside the group super-block.
                    let scale = unsafe {
                        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                            data.add(SCALES_AT + (2 * j + half) * GROUP).cast(),
                        )))
                    };
                    let scaled = _mm256_mul_ps(
                        _mm256_mul_ps(_mm256_cvtepi32_ps(centered), _mm256_mul_ps(d, scale)),
                        _mm256_set1_ps(scales[b]),
                    );
                    *lanes = _mm256_add_ps(*lanes, scaled);
                }
            }
        }
    }
    acc
}
