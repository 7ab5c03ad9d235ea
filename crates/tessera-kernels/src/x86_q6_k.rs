//! The AVX2+FMA path of Q6_K: eight weight rows (a group) in the eight lanes
//! of a register, up to four activation rows per call, each making its own
//! pass over the group's blocks (which stay in L1/L2 between them; see
//! `q6_k.rs` for the layout); per lane the portable `dot_q6_k` arithmetic
//! (integer dots exact, then the same float operations in order).

use crate::q6_k::{GROUP, QUANTS_AT};
use crate::x86_q4::for_each_group_tile;
use crate::{Q6KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q6_k`; the caller checked the shapes, that `rows`
/// starts on a group and that the CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn matmul_q6_k(
    w: &Q6KWeights,
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

/// The eight outputs of weight group `group` against activation rows `j0..j0 + C`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn group_tile<const C: usize>(w: &Q6KWeights, group: usize, x: &Q8Activations, j0: usize) -> [__m256; C] {
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); C];
    for (c, lanes) in acc.iter_mut().enumerate() {
        let (quants, scales, halves) = (x.row_quants(j0 + c), x.row_scales(j0 + c), x.row_half_sums(j0 + c));
        for b in 0..w.blocks() {
            let data = w.group_block(group, b).as_ptr();
            let y = quants[b * BLOCK..][..BLOCK].as_ptr();
            for (half, half_sum) in halves[b].iter().enumerate() {
                let mut dot = _mm256_setzero_si256();
                for pair in 0..2 {
                    let t = half * 4 + pair * 2;
                    // SAFETY: a group block holds 16 f32 scales then eight 32-byte
                    // registers; an activation block 32 bytes, and 4t + 8 <= 32.
                    let products = unsafe {
                        let w0 = _mm256_loadu_si256(data.add(QUANTS_AT + t * 32).cast());
                        let w1 = _mm256_loadu_si256(data.add(QUANTS_AT + (t + 1) * 32).cast());
                        let y0 = _mm256_set1_epi32(y.add(t * 4).cast::<i32>().read_unaligned());
                        let y1 = _mm256_set1_epi32(y.add(t * 4 + 4).cast::<i32>().read_unaligned());
                        // Two products of at most 2·63·128 each: exact in 16 bits.
                        _mm256_add_epi16(_mm256_maddubs_epi16(w0, y0), _mm256_maddubs_epi16(w1, y1))
                    };
                    dot = _mm256_add_epi32(dot, _mm256_madd_epi16(products, ones));
                }
                let centered = _mm256_sub_epi32(dot, _mm256_set1_epi32(32 * half_sum));
                // SAFETY: as above (the scales of half `half`).
                let ds = unsafe { _mm256_loadu_ps(data.add(half * GROUP * 4).cast()) };
                let scaled = _mm256_mul_ps(
                    _mm256_mul_ps(_mm256_cvtepi32_ps(centered), ds),
                    _mm256_set1_ps(scales[b]),
                );
                *lanes = _mm256_add_ps(*lanes, scaled);
            }
        }
    }
    acc
}
