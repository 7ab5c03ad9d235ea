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

/// See `portable::matmul`; the caller checked the shapes and that the CPU has AVX2 and FMA.
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
    for b in 0..w.blocks() {
        let at = b * BLOCK;
        let mut w_scale = [0f32; R];
        for i in 0..R {
            // SAFETY: `row_start` points at a row's first block; its block `b < blocks`
            // lies `b · QUANT_STRIDE` quants (32 of them) and `b · GROUP` scales further.
            unsafe {
                wv[i] = _mm256_loadu_si256(w_quants[i].add(b * QUANT_STRIDE).cast());
                w_scale[i] = *w_scales[i].add(b * GROUP);
            }
            w_abs[i] = _mm256_sign_epi8(wv[i], wv[i]);
        }
        for c in 0..C {
            // SAFETY: an activation row holds `blocks` scales and `blocks · 32` quants
            // (`check` matched its blocks to the weights').
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

/// Q4_1: eight weight rows (a group) in the eight lanes of a register, `C`
/// activation rows at a time sharing each block's nibble expansion; per lane
/// the portable `dot_q4_1` arithmetic (integer dot exact, then
/// `(dot·d_w)·d_y + m_w·s_y` added to the lane, unfused).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q4_1(
    w: &crate::Q4_1Weights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    use crate::q4_1::GROUP;
    let groups = rows.start / GROUP..rows.end.div_ceil(GROUP);
    let n = x.rows();
    for chunk in (0..n).step_by(ACT_CHUNK) {
        let chunk_end = (chunk + ACT_CHUNK).min(n);
        for group in groups.clone() {
            let mut j = chunk;
            while j < chunk_end {
                let width = (chunk_end - j).min(4);
                let sums = unsafe {
                    match width {
                        4 => group_tile_q4_1::<4>(w, group, x, j),
                        3 => pad(group_tile_q4_1::<3>(w, group, x, j)),
                        2 => pad(group_tile_q4_1::<2>(w, group, x, j)),
                        _ => pad(group_tile_q4_1::<1>(w, group, x, j)),
                    }
                };
                for (c, lanes) in sums.iter().take(width).enumerate() {
                    store_group(*lanes, group * GROUP, &rows, &mut out[(j + c) * stride..]);
                }
                j += width;
            }
        }
    }
}

/// `C` results widened to four (the rest unused).
#[target_feature(enable = "avx2")]
#[inline]
fn pad<const C: usize>(sums: [__m256; C]) -> [__m256; 4] {
    let mut all = [_mm256_setzero_ps(); 4];
    all[..C].copy_from_slice(&sums);
    all
}

/// Store the lanes of rows `first..first + 8` that lie in `rows` into
/// `out_row[r − rows.start]`.
#[target_feature(enable = "avx2")]
#[inline]
fn store_group(lanes: __m256, first: usize, rows: &Range<usize>, out_row: &mut [f32]) {
    let at = first - rows.start;
    if first + 8 <= rows.end {
        // SAFETY: `check` guaranteed `out_row` holds `rows.len()` outputs, and `at + 8 <= rows.len()`.
        unsafe { _mm256_storeu_ps(out_row[at..at + 8].as_mut_ptr(), lanes) };
        return;
    }
    let mut values = [0f32; 8];
    // SAFETY: `values` holds 8 f32.
    unsafe { _mm256_storeu_ps(values.as_mut_ptr(), lanes) };
    let live = rows.end - first;
    out_row[at..at + live].copy_from_slice(&values[..live]);
}

/// The eight outputs of weight group `group` against activation rows `j0..j0 + C`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn group_tile_q4_1<const C: usize>(
    w: &crate::Q4_1Weights,
    group: usize,
    x: &Q8Activations,
    j0: usize,
) -> [__m256; C] {
    use crate::q4_1::NIBBLES_AT;
    let ones = _mm256_set1_epi16(1);
    let low_mask = _mm256_set1_epi8(0x0F);
    let mut acc = [_mm256_setzero_ps(); C];
    let mut quants: [&[i8]; C] = [&[]; C];
    let mut scales: [&[f32]; C] = [&[]; C];
    let mut sums: [&[f32]; C] = [&[]; C];
    for c in 0..C {
        quants[c] = x.row_quants(j0 + c);
        scales[c] = x.row_scales(j0 + c);
        sums[c] = x.row_sums(j0 + c);
    }
    for b in 0..w.blocks() {
        let data = w.group_block(group, b).as_ptr();
        // SAFETY: a group block holds 8 f16 d, 8 f16 m and four 32-byte registers (160 bytes).
        let (d, m) = unsafe {
            (
                _mm256_cvtph_ps(_mm_loadu_si128(data.cast())),
                _mm256_cvtph_ps(_mm_loadu_si128(data.add(16).cast())),
            )
        };
        let mut dots = [_mm256_setzero_si256(); C];
        for t in 0..4 {
            // SAFETY: as above.
            let packed = unsafe { _mm256_loadu_si256(data.add(NIBBLES_AT + t * 32).cast()) };
            let low = _mm256_and_si256(packed, low_mask);
            let high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask);
            for c in 0..C {
                // SAFETY: an activation block is 32 bytes; 4t + 16 + 4 <= 32.
                let (y_low, y_high) = unsafe {
                    let block = quants[c].as_ptr().add(b * BLOCK + t * 4);
                    (
                        _mm256_set1_epi32(block.cast::<i32>().read_unaligned()),
                        _mm256_set1_epi32(block.add(16).cast::<i32>().read_unaligned()),
                    )
                };
                let products = _mm256_add_epi16(_mm256_maddubs_epi16(low, y_low), _mm256_maddubs_epi16(high, y_high));
                dots[c] = _mm256_add_epi16(dots[c], products);
            }
        }
        for c in 0..C {
            let dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(dots[c], ones));
            let scaled = _mm256_mul_ps(_mm256_mul_ps(dot, d), _mm256_set1_ps(scales[c][b]));
            let offset = _mm256_mul_ps(m, _mm256_set1_ps(sums[c][b]));
            acc[c] = _mm256_add_ps(acc[c], _mm256_add_ps(scaled, offset));
        }
    }
    acc
}
