//! The AVX2+FMA path. Register tiles of `R` weight rows × `C` activation rows
//! keep one accumulator per output; each loaded weight block serves `C`
//! outputs and each activation block `R`. Activation rows are walked in
//! chunks that stay in L1 while the weight rows stream past. Per output the
//! arithmetic is exactly the portable path's (see `portable.rs`).

use crate::{Q8Activations, Q8_0Weights, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// Activation rows per chunk (32 rows × 576 bytes stay in L1 for SmolLM2).
const ACT_CHUNK: usize = 32;

/// How far ahead of the block a tile of several activation rows is reading
/// it asks the L2 for the weights' bytes (four Q4_K group super-blocks, 2.7
/// of Q6_K, 26 group blocks of Q5_0). A tile of 2–8 rows consumes its weight
/// streams slowly enough that the hardware prefetchers fall behind: one
/// thread, Q4_K 16384×4096 from memory (Zen 4), per pair of row groups and
/// super-block, 4 rows (AVX2) took ~1,160 cycles against ~800 with this and
/// 8 rows (VNNI) ~1,100 against ~1,000 (~790 in cache). One row streams fast
/// enough for the hardware alone, and these requests slowed it (1.55 →
/// 1.84 ms, Zen 4), so the one-row products do not ask; the K-quants' AVX2
/// tiles do (see [`k_quant_tile_prefetches`]).
pub(crate) const PREFETCH_AHEAD: usize = 4608;

/// Products of fewer activation rows than this prefetch in their tiles of
/// more than one row (decode of several sequences, drafts). Larger ones
/// (prefill) compute long enough per byte for the hardware prefetchers,
/// and re-read each group from the L1/L2 once per tile.
const PREFETCH_BELOW_ROWS: usize = 16;

/// Whether a tile of `tile_rows` activation rows, in a product of `rows`,
/// asks for its weights ahead ([`prefetch_ahead`]).
#[inline]
pub(crate) fn tile_prefetches(tile_rows: usize, rows: usize) -> bool {
    tile_rows > 1 && rows < PREFETCH_BELOW_ROWS
}

/// Whether an AVX2 K-quant tile (Q4_K, Q5_K, Q6_K) in a product of `rows`
/// asks for its weights ahead. Unlike [`tile_prefetches`], a tile of one row
/// asks too: on AVX-512 VNNI machines one row runs the VNNI decode kernels,
/// so the one-row AVX2 tile is decode on AVX2-only CPUs, and there the
/// hardware alone fell behind it (Zen 1, one thread, Q4_K 16384×4096 from
/// memory: 3.6–4.8 GiB/s without, 4.3–5.4 with the requests, 5.3–6.0 with
/// them and `x86_q4_k::single_row`'s one load per register).
#[inline]
pub(crate) fn k_quant_tile_prefetches(rows: usize) -> bool {
    rows < PREFETCH_BELOW_ROWS
}

/// Asks for the `bytes` bytes that start [`PREFETCH_AHEAD`] past `at` to be
/// brought into the L2, one request per 64-byte line. A prefetch is a hint:
/// it never faults, so the addresses may run past the matrix (the last
/// super-blocks of a group ask for the next group's first ones).
#[target_feature(enable = "sse")]
#[inline]
pub(crate) fn prefetch_ahead(at: *const u8, bytes: usize) {
    let ahead = at.wrapping_add(PREFETCH_AHEAD);
    for line in (0..bytes).step_by(64) {
        _mm_prefetch::<_MM_HINT_T1>(ahead.wrapping_add(line).cast());
    }
}

/// See `portable::matmul`.
///
/// # Safety
/// The CPU has AVX2 and FMA, and the arguments meet `dispatch::check`:
/// `x.blocks() == w.blocks()` and `rows.end <= w.rows()` (the tiles read
/// both through unchecked pointers); `out` and `stride` as `check` requires
/// (stores are bounds-checked).
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn matmul(w: &Q8_0Weights, rows: Range<usize>, x: &Q8Activations, out: &mut [f32], stride: usize) {
    let n = x.rows();
    if n == 1 {
        let mut r = rows.start;
        while r < rows.end {
            let step = match rows.end - r {
                4.. => 4,
                2..=3 => 2,
                _ => 1,
            };
            // SAFETY: the caller's contract, and `r + step <= rows.end`.
            unsafe {
                match step {
                    4 => tile::<4, 1>(w, r, x, 0, rows.start, out, stride),
                    2 => tile::<2, 1>(w, r, x, 0, rows.start, out, stride),
                    _ => tile::<1, 1>(w, r, x, 0, rows.start, out, stride),
                }
            }
            r += step;
        }
        return;
    }
    for chunk in (0..n).step_by(ACT_CHUNK) {
        let chunk_end = (chunk + ACT_CHUNK).min(n);
        let mut r = rows.start;
        while r < rows.end {
            let height = if rows.end - r >= 2 { 2 } else { 1 };
            let mut j = chunk;
            while j < chunk_end {
                let width = (chunk_end - j).min(4);
                // SAFETY: the caller's contract, `r + height <= rows.end` and `j + width <= n`.
                unsafe {
                    match (height, width) {
                        (2, 4) => tile::<2, 4>(w, r, x, j, rows.start, out, stride),
                        (2, 3) => tile::<2, 3>(w, r, x, j, rows.start, out, stride),
                        (2, 2) => tile::<2, 2>(w, r, x, j, rows.start, out, stride),
                        (2, _) => tile::<2, 1>(w, r, x, j, rows.start, out, stride),
                        (_, 4) => tile::<1, 4>(w, r, x, j, rows.start, out, stride),
                        (_, 3) => tile::<1, 3>(w, r, x, j, rows.start, out, stride),
                        (_, 2) => tile::<1, 2>(w, r, x, j, rows.start, out, stride),
                        _ => tile::<1, 1>(w, r, x, j, rows.start, out, stride),
                    }
                }
                j += width;
            }
            r += height;
        }
    }
}

/// Outputs for weight rows `r0..r0+R` × activation rows `j0..j0+C`.
///
/// # Safety
/// The CPU has AVX2 and FMA; `r0 + R <= w.rows()` and `x.blocks() ==
/// w.blocks()` (weight and activation blocks are read through unchecked
/// pointers). `j0 + C <= x.rows()` and the output's size are checked
/// (slicing and indexing panic).
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn tile<const R: usize, const C: usize>(
    w: &Q8_0Weights,
    r0: usize,
    x: &Q8Activations,
    j0: usize,
    first_row: usize,
    out: &mut [f32],
    stride: usize,
) {
    // No closures here: a closure does not inherit `target_feature`, and an
    // intrinsic called through one is not inlined (measured: decode 35% slower).
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); C]; R];
    use crate::q8_0::{GROUP, QUANT_STRIDE};
    let mut w_quants = [std::ptr::null::<i8>(); R];
    let mut w_scales = [std::ptr::null::<f32>(); R];
    for i in 0..R {
        (w_scales[i], w_quants[i]) = w.row_start(r0 + i);
    }
    let mut x_quants: [&[i8]; C] = [&[]; C];
    let mut x_scales = [std::ptr::null::<f32>(); C];
    for c in 0..C {
        x_quants[c] = x.row_quants(j0 + c);
        x_scales[c] = x.row_scales(j0 + c).as_ptr();
    }
    let mut wv = [_mm256_setzero_si256(); R];
    let mut w_abs = [_mm256_setzero_si256(); R];
    let prefetch = tile_prefetches(C, x.rows());
    for b in 0..w.blocks() {
        let at = b * BLOCK;
        if prefetch {
            // Each row's 32 quants of the block; rows of a group sharing a line ask twice,
            // which costs next to nothing.
            for quants in w_quants {
                prefetch_ahead(quants.wrapping_add(b * QUANT_STRIDE).cast(), BLOCK);
            }
        }
        let mut w_scale = [0f32; R];
        for i in 0..R {
            // SAFETY: `row_start` points at the first block of row `r0 + i < w.rows()`
            // (the caller's contract); its block `b < blocks` lies `b · QUANT_STRIDE`
            // quants (32 of them) and `b · GROUP` scales further, inside the buffers.
            unsafe {
                wv[i] = _mm256_loadu_si256(w_quants[i].add(b * QUANT_STRIDE).cast());
                w_scale[i] = *w_scales[i].add(b * GROUP);
            }
            w_abs[i] = _mm256_sign_epi8(wv[i], wv[i]);
        }
        for c in 0..C {
            // SAFETY: an activation row holds `x.blocks()` scales and `x.blocks() · 32`
            // quants, and `b < w.blocks() == x.blocks()` (the caller's contract).
            let (xv, dx) = unsafe {
                (
                    _mm256_loadu_si256(x_quants[c].as_ptr().add(at).cast()),
                    *x_scales[c].add(b),
                )
            };
            for i in 0..R {
                let signed = _mm256_sign_epi8(xv, wv[i]);
                let pairs = _mm256_maddubs_epi16(w_abs[i], signed);
                let quads = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                let d = _mm256_set1_ps(w_scale[i] * dx);
                acc[i][c] = _mm256_fmadd_ps(d, quads, acc[i][c]);
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (c, lanes) in row.iter().enumerate() {
            out[(j0 + c) * stride + (r0 + i - first_row)] = reduce(*lanes);
        }
    }
}

/// The lanes' sum: `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn reduce(lanes: __m256) -> f32 {
    let halves = _mm_add_ps(_mm256_extractf128_ps(lanes, 1), _mm256_castps256_ps128(lanes));
    let pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
    _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)))
}
