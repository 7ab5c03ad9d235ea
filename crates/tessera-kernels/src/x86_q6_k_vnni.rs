//! The AVX-512 VNNI path of Q6_K (layout in `q6_k.rs`), for prefill:
//! sixteen rows (two groups, see `x86_vnni.rs`) per register. Per sub-block
//! and register position the quants (0–63) are rebuilt from one 32-byte
//! `ql` and one `qh` load per group, then meet activation bytes `4t..4t + 4`,
//! broadcast to all lanes, in one `vpdpbusd` per activation row. Each half
//! block then runs the AVX2 kernel's arithmetic per lane (subtract `32·Σy`,
//! scale by `d·scale`, then by `d_y`), so results are equal bit for bit.

use crate::q6_k::{qh_at, ql_at, GROUP, SCALES_AT, SUB_BLOCKS};
use crate::x86_vnni::{broadcast_four, for_each_pair_tile, join_loads, join_ps};
use crate::{Q6KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q6_k`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C; the caller
/// checked the shapes and that `rows` starts on a group.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q6_k(
    w: &Q6KWeights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    // A tile of `C` activation rows at (`pair`, `j`).
    macro_rules! tile {
        ($c:literal, $pair:expr, $j:expr) => {
            pair_tile::<$c>(w, $pair, x, $j)
        };
    }
    for_each_pair_tile!(rows, x, out, stride, tile);
}

/// The quants (0–63) of sub-block `k` of chunk `chunk` at register position
/// `t` of both group super-blocks (`x86_q6_k::sub_block_quants`, 16 rows).
///
/// # Safety
/// Both pointers point at whole group super-blocks; `chunk < 2`, `k < 4`, `t < 8`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn sub_block_quants(lo: *const u8, hi: *const u8, chunk: usize, k: usize, t: usize) -> __m512i {
    let nibble = _mm512_set1_epi8(0x0F);
    let bits = _mm512_set1_epi8(0x30);
    let (ql_at, qh_at) = (ql_at(chunk, k % 2, t), qh_at(chunk, t));
    // SAFETY: the caller's pointers cover the chunk's registers.
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

/// `d·scale_i` of both groups (scale `i` of 16 per super-block), rows of the lower group in lanes 0–7.
///
/// # Safety
/// Both pointers point at whole group super-blocks; `i < 16`.
#[target_feature(enable = "avx512f,avx2,f16c")]
#[inline]
unsafe fn pair_scale(d: __m512, lo: *const u8, hi: *const u8, i: usize) -> __m512 {
    // SAFETY: the 8 scale bytes of scale i lie inside each group super-block.
    let scale = |data: *const u8| unsafe {
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
            data.add(SCALES_AT + i * GROUP).cast(),
        )))
    };
    _mm512_mul_ps(d, join_ps(scale(lo), scale(hi)))
}

/// The sixteen outputs of weight groups `pair` against activation rows `j0..j0 + C`.
///
/// # Safety
/// As [`matmul_q6_k`]; `j0 + C <= x.rows()` and both groups are groups of `w`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn pair_tile<const C: usize>(
    w: &Q6KWeights,
    [lower, upper]: [usize; 2],
    x: &Q8Activations,
    j0: usize,
) -> [__m512; C] {
    let mut acc = [_mm512_setzero_ps(); C];
    let mut quants: [&[i8]; C] = [&[]; C];
    let mut scales: [&[f32]; C] = [&[]; C];
    let mut halves: [&[[i32; 2]]; C] = [&[]; C];
    for c in 0..C {
        quants[c] = x.row_quants(j0 + c);
        scales[c] = x.row_scales(j0 + c);
        halves[c] = x.row_half_sums(j0 + c);
    }
    for sb in 0..w.supers() {
        let (lo, hi) = (w.group_super(lower, sb).as_ptr(), w.group_super(upper, sb).as_ptr());
        // SAFETY: a group super-block starts with eight f16 d.
        let d = unsafe {
            join_ps(
                _mm256_cvtph_ps(_mm_loadu_si128(lo.cast())),
                _mm256_cvtph_ps(_mm_loadu_si128(hi.cast())),
            )
        };
        for j in 0..SUB_BLOCKS {
            let (chunk, k, b) = (j / 4, j % 4, sb * SUB_BLOCKS + j);
            for half in [0, 1] {
                let mut dots = [_mm512_setzero_si512(); C];
                for t in half * 4..half * 4 + 4 {
                    // SAFETY: register t of the chunk lies inside both group super-blocks.
                    let q = unsafe { sub_block_quants(lo, hi, chunk, k, t) };
                    for c in 0..C {
                        // SAFETY: an activation block is 32 bytes, and 4t + 4 <= 32.
                        let y = unsafe { broadcast_four(quants[c].as_ptr().add(b * BLOCK + t * 4)) };
                        dots[c] = _mm512_dpbusd_epi32(dots[c], q, y);
                    }
                }
                // SAFETY: both are whole group super-blocks and 2j + half < 16.
                let ds = unsafe { pair_scale(d, lo, hi, 2 * j + half) };
                for c in 0..C {
                    let centered = _mm512_sub_epi32(dots[c], _mm512_set1_epi32(32 * halves[c][b][half]));
                    let scaled = _mm512_mul_ps(
                        _mm512_mul_ps(_mm512_cvtepi32_ps(centered), ds),
                        _mm512_set1_ps(scales[c][b]),
                    );
                    acc[c] = _mm512_add_ps(acc[c], scaled);
                }
            }
        }
    }
    acc
}
