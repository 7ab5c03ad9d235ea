//! The AVX2+FMA+F16C path of Q6_K at GGML's bytes (layout in `q6_k.rs`):
//! eight weight rows (a group) in the eight lanes of a register, up to four
//! activation rows per call, each making its own pass over the group's
//! super-blocks (which stay in L1/L2 between them). Per chunk and register
//! position the four sub-blocks' quants are rebuilt from `ql` and `qh` with
//! masks and shifts; per lane the portable `dot_q6_k` arithmetic (integer
//! dots exact, then the same float operations in order).

use crate::q6_k::{qh_at, ql_at, GROUP, SCALES_AT, SUB_BLOCKS};
use crate::x86_q4::for_each_group_tile;
use crate::{Q6KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q6_k`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and the arguments meet `dispatch::check`
/// with `rows.start` a multiple of 8. Soundness rests on `x.blocks() ==
/// w.blocks()` (the tiles read activation blocks `0..w.blocks()` through
/// unchecked pointers); weight groups and outputs go through checked slices.
#[target_feature(enable = "avx2,fma,f16c")]
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

/// The quants (0–63) of sub-blocks 0–3 of a chunk at one register position,
/// from its two `ql` registers and its `qh` register.
#[target_feature(enable = "avx2")]
#[inline]
fn chunk_quants(ql: [__m256i; 2], qh: __m256i) -> [__m256i; 4] {
    let nibble = _mm256_set1_epi8(0x0F);
    let bits = _mm256_set1_epi8(0x30);
    // qh bits 2k..2k+2 moved to 4..6 (16-bit shifts: what crosses a byte is masked off).
    let high = [
        _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits),
        _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits),
        _mm256_and_si256(qh, bits),
        _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits),
    ];
    let low = [
        _mm256_and_si256(ql[0], nibble),
        _mm256_and_si256(ql[1], nibble),
        _mm256_and_si256(_mm256_srli_epi16(ql[0], 4), nibble),
        _mm256_and_si256(_mm256_srli_epi16(ql[1], 4), nibble),
    ];
    [
        _mm256_or_si256(low[0], high[0]),
        _mm256_or_si256(low[1], high[1]),
        _mm256_or_si256(low[2], high[2]),
        _mm256_or_si256(low[3], high[3]),
    ]
}

/// [`chunk_quants`] of register position `t` of chunk `chunk` of the group
/// super-block at `data` (no closure: it would not inline under the
/// caller's target features).
///
/// # Safety
/// The CPU has AVX2; `data` points at a whole Q6_K group super-block and
/// `chunk < 2`, `t < 8` (the 32-byte registers at `ql_at(chunk, 0..2, t)`
/// and `qh_at(chunk, t)` are loaded).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn register_quants(data: *const u8, chunk: usize, t: usize) -> [__m256i; 4] {
    // SAFETY: the three registers lie inside the group super-block (the caller's contract).
    let (low, high, qh) = unsafe {
        (
            _mm256_loadu_si256(data.add(ql_at(chunk, 0, t)).cast()),
            _mm256_loadu_si256(data.add(ql_at(chunk, 1, t)).cast()),
            _mm256_loadu_si256(data.add(qh_at(chunk, t)).cast()),
        )
    };
    chunk_quants([low, high], qh)
}

/// The quants (0–63) of sub-block `k` of chunk `chunk` at register position
/// `t` of the group super-block at `data`.
///
/// # Safety
/// The CPU has AVX2; `data` points at a whole Q6_K group super-block and
/// `chunk < 2`, `t < 8` (the registers at `ql_at(chunk, k % 2, t)` and
/// `qh_at(chunk, t)` are loaded). `k < 4` picks the bits; any `k` is sound.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn sub_block_quants(data: *const u8, chunk: usize, k: usize, t: usize) -> __m256i {
    let nibble = _mm256_set1_epi8(0x0F);
    let bits = _mm256_set1_epi8(0x30);
    // SAFETY: both registers lie inside the group super-block (the caller's contract).
    let (ql, qh) = unsafe {
        (
            _mm256_loadu_si256(data.add(ql_at(chunk, k % 2, t)).cast()),
            _mm256_loadu_si256(data.add(qh_at(chunk, t)).cast()),
        )
    };
    let low = match k {
        0 | 1 => _mm256_and_si256(ql, nibble),
        _ => _mm256_and_si256(_mm256_srli_epi16(ql, 4), nibble),
    };
    let high = match k {
        0 => _mm256_slli_epi16(qh, 4),
        1 => _mm256_slli_epi16(qh, 2),
        2 => qh,
        _ => _mm256_srli_epi16(qh, 2),
    };
    _mm256_or_si256(low, _mm256_and_si256(high, bits))
}

/// The eight outputs of weight group `group` against activation rows `j0..j0 + C`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and `x.blocks() == w.blocks()` (activation
/// blocks are read through unchecked pointers). `group` and `j0 + C <=
/// x.rows()` are checked (slicing panics).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn group_tile<const C: usize>(w: &Q6KWeights, group: usize, x: &Q8Activations, j0: usize) -> [__m256; C] {
    if C > 1 {
        // SAFETY: the caller's contract is `shared_tile`'s.
        return unsafe { shared_tile::<C>(w, group, x, j0) };
    }
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); C];
    for (c, lanes) in acc.iter_mut().enumerate() {
        let (quants, scales, halves) = (x.row_quants(j0 + c), x.row_scales(j0 + c), x.row_half_sums(j0 + c));
        for sb in 0..w.supers() {
            let data = w.group_super(group, sb).as_ptr();
            // SAFETY: `data` is a whole group super-block (a checked slice), which
            // starts with eight f16 d.
            let d = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(data.cast())) };
            for chunk in 0..2 {
                let first = sb * SUB_BLOCKS + chunk * 4;
                // dots[half][k]: exact integer dots of sub-block k's halves.
                let mut dots = [[_mm256_setzero_si256(); 4]; 2];
                for (half, half_dots) in dots.iter_mut().enumerate() {
                    for pair in 0..2 {
                        let t = half * 4 + pair * 2;
                        // SAFETY: registers `t + 1 < 8` of chunk `chunk < 2` lie inside the group
                        // super-block; AVX2 is enabled here.
                        let (q0, q1) =
                            unsafe { (register_quants(data, chunk, t), register_quants(data, chunk, t + 1)) };
                        for (k, dot) in half_dots.iter_mut().enumerate() {
                            // SAFETY: activation block `first + k < w.blocks() == x.blocks()` (the
                            // caller's contract) is 32 bytes, and 4t + 8 <= 32.
                            let (y0, y1) = unsafe {
                                let y = quants.as_ptr().add((first + k) * BLOCK + t * 4);
                                (
                                    _mm256_set1_epi32(y.cast::<i32>().read_unaligned()),
                                    _mm256_set1_epi32(y.add(4).cast::<i32>().read_unaligned()),
                                )
                            };
                            // Two products of at most 2·63·128 each: exact in 16 bits.
                            let products =
                                _mm256_add_epi16(_mm256_maddubs_epi16(q0[k], y0), _mm256_maddubs_epi16(q1[k], y1));
                            *dot = _mm256_add_epi32(*dot, _mm256_madd_epi16(products, ones));
                        }
                    }
                }
                for k in 0..4 {
                    let b = first + k;
                    for (half, half_dots) in dots.iter().enumerate() {
                        let dot = &half_dots[k];
                        let centered = _mm256_sub_epi32(*dot, _mm256_set1_epi32(32 * halves[b][half]));
                        let i = 2 * (chunk * 4 + k) + half;
                        // SAFETY: the 8 bytes of scale `i < 16` lie inside the group super-block.
                        let scale = unsafe {
                            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                                data.add(SCALES_AT + i * GROUP).cast(),
                            )))
                        };
                        let ds = _mm256_mul_ps(d, scale);
                        let scaled = _mm256_mul_ps(
                            _mm256_mul_ps(_mm256_cvtepi32_ps(centered), ds),
                            _mm256_set1_ps(scales[b]),
                        );
                        *lanes = _mm256_add_ps(*lanes, scaled);
                    }
                }
            }
        }
    }
    acc
}

/// [`group_tile`] for several activation rows: each sub-block's quants are
/// rebuilt once per register position and shared by every row of the tile
/// (decode, one row, keeps all four sub-blocks of a position in flight
/// instead). Same arithmetic, in the same order, per row.
///
/// # Safety
/// As [`group_tile`].
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn shared_tile<const C: usize>(w: &Q6KWeights, group: usize, x: &Q8Activations, j0: usize) -> [__m256; C] {
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); C];
    let mut quants: [&[i8]; C] = [&[]; C];
    let mut scales: [&[f32]; C] = [&[]; C];
    let mut halves: [&[[i32; 2]]; C] = [&[]; C];
    for c in 0..C {
        quants[c] = x.row_quants(j0 + c);
        scales[c] = x.row_scales(j0 + c);
        halves[c] = x.row_half_sums(j0 + c);
    }
    for sb in 0..w.supers() {
        let data = w.group_super(group, sb).as_ptr();
        // SAFETY: `data` is a whole group super-block (a checked slice), which starts
        // with eight f16 d.
        let d = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(data.cast())) };
        for j in 0..SUB_BLOCKS {
            let (chunk, k, b) = (j / 4, j % 4, sb * SUB_BLOCKS + j);
            for half in [0, 1] {
                let mut dots = [_mm256_setzero_si256(); C];
                for pair in 0..2 {
                    let t = half * 4 + pair * 2;
                    // SAFETY: registers `t + 1 < 8` of chunk `chunk < 2` lie inside the group
                    // super-block; AVX2 is enabled here.
                    let (q0, q1) = unsafe {
                        (
                            sub_block_quants(data, chunk, k, t),
                            sub_block_quants(data, chunk, k, t + 1),
                        )
                    };
                    for c in 0..C {
                        // SAFETY: activation block `b < w.blocks() == x.blocks()` (the caller's
                        // contract) is 32 bytes, and 4t + 8 <= 32.
                        let (y0, y1) = unsafe {
                            let y = quants[c].as_ptr().add(b * BLOCK + t * 4);
                            (
                                _mm256_set1_epi32(y.cast::<i32>().read_unaligned()),
                                _mm256_set1_epi32(y.add(4).cast::<i32>().read_unaligned()),
                            )
                        };
                        // Two products of at most 2·63·128 each: exact in 16 bits.
                        let products = _mm256_add_epi16(_mm256_maddubs_epi16(q0, y0), _mm256_maddubs_epi16(q1, y1));
                        dots[c] = _mm256_add_epi32(dots[c], _mm256_madd_epi16(products, ones));
                    }
                }
                // SAFETY: the 8 bytes of scale `2j + half < 16` lie inside the group super-block.
                let scale = unsafe {
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                        data.add(SCALES_AT + (2 * j + half) * GROUP).cast(),
                    )))
                };
                let ds = _mm256_mul_ps(d, scale);
                for c in 0..C {
                    let centered = _mm256_sub_epi32(dots[c], _mm256_set1_epi32(32 * halves[c][b][half]));
                    let scaled = _mm256_mul_ps(
                        _mm256_mul_ps(_mm256_cvtepi32_ps(centered), ds),
                        _mm256_set1_ps(scales[c][b]),
                    );
                    acc[c] = _mm256_add_ps(acc[c], scaled);
                }
            }
        }
    }
    acc
}
