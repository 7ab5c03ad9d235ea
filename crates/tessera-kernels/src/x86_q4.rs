//! The AVX2+FMA+F16C path of the 4- and 5-bit formats: eight weight rows (a group)
//! in the eight lanes of a register, up to four activation rows at a time
//! sharing each block's nibble expansion (see `q4.rs` for the layout); per
//! lane the portable `dot_q4` arithmetic (integer dot exact, then the same
//! unfused float operations in the same order).

use crate::q4::{NibbleGroups, Q4Kind, GROUP};
use crate::x86::{prefetch_ahead, tile_prefetches};
use crate::{Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// Activation rows per chunk (kept in L1 while a group's blocks stream past).
pub(crate) const ACT_CHUNK: usize = 32;

/// See `portable::matmul_q4`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and the arguments meet `dispatch::check`
/// with `rows.start` a multiple of 8. Soundness rests on `x.blocks() ==
/// w.blocks()` (the tiles read activation blocks `0..w.blocks()` through
/// unchecked pointers); weight groups and outputs go through checked slices.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q4(
    w: &NibbleGroups,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    // SAFETY: the caller's contract; `MIN` and `HIGH` follow `w.kind()`.
    unsafe {
        match w.kind() {
            Q4Kind::Q4_0 => matmul_groups::<false, false>(w, rows, x, out, stride),
            Q4Kind::Q4_1 => matmul_groups::<true, false>(w, rows, x, out, stride),
            Q4Kind::Q5_0 => matmul_groups::<false, true>(w, rows, x, out, stride),
            Q4Kind::Q5_1 => matmul_groups::<true, true>(w, rows, x, out, stride),
        }
    }
}

/// `MIN`: a minimum per block (Q4_1, Q5_1) rather than an offset (−8 for
/// Q4_0, −16 for Q5_0); `HIGH`: a fifth bit per value (Q5_0, Q5_1).
///
/// # Safety
/// As [`matmul_q4`]. (`MIN` and `HIGH` must match `w.kind()` for the right
/// results; every weight load stays inside a group block either way.)
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn matmul_groups<const MIN: bool, const HIGH: bool>(
    w: &NibbleGroups,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    // A tile of `C` activation rows at (`group`, `j`).
    macro_rules! tile {
        ($c:literal, $group:expr, $j:expr) => {
            group_tile::<$c, MIN, HIGH>(w, $group, x, $j)
        };
    }
    for_each_group_tile!(rows, x, out, stride, tile);
}

/// The loop nest every row-group kernel runs: activation rows in chunks of
/// [`ACT_CHUNK`] (kept in L1 while a group's blocks stream past), then weight
/// groups, then tiles of up to four activation rows (or `$widest`, 4 or 8,
/// where given), each stored row by row.
/// `$tile!(C, group, j)` computes a tile of `C` rows (a local macro, so that
/// the tile's const generics stay the caller's and everything inlines under
/// its `target_feature`); `$prepare!(group)`, when given, runs once per chunk
/// and group before its tiles (an unsafe call under the same contract).
macro_rules! for_each_group_tile {
    ($rows:expr, $x:expr, $out:expr, $stride:expr, $tile:ident) => {{
        $crate::x86_q4::for_each_group_tile!($rows, $x, $out, $stride, $tile, 4)
    }};
    ($rows:expr, $x:expr, $out:expr, $stride:expr, $prepare:ident, $tile:ident) => {{
        $crate::x86_q4::for_each_group_tile!($rows, $x, $out, $stride, $prepare, $tile, 4)
    }};
    // After the arm above: `tile, 8` fails its second identifier and lands here.
    ($rows:expr, $x:expr, $out:expr, $stride:expr, $tile:ident, $widest:tt) => {{
        macro_rules! no_preparation {
            ($group:expr) => {{}};
        }
        $crate::x86_q4::for_each_group_tile!($rows, $x, $out, $stride, no_preparation, $tile, $widest)
    }};
    (@tiles 4, $tile:ident, $group:expr, $j:expr, $width:expr) => {
        match $width {
            4 => $tile!(4, $group, $j),
            3 => $crate::x86_q4::pad($tile!(3, $group, $j)),
            2 => $crate::x86_q4::pad($tile!(2, $group, $j)),
            _ => $crate::x86_q4::pad($tile!(1, $group, $j)),
        }
    };
    (@tiles 8, $tile:ident, $group:expr, $j:expr, $width:expr) => {
        match $width {
            8 => $tile!(8, $group, $j),
            7 => $crate::x86_q4::pad($tile!(7, $group, $j)),
            6 => $crate::x86_q4::pad($tile!(6, $group, $j)),
            5 => $crate::x86_q4::pad($tile!(5, $group, $j)),
            4 => $crate::x86_q4::pad($tile!(4, $group, $j)),
            3 => $crate::x86_q4::pad($tile!(3, $group, $j)),
            2 => $crate::x86_q4::pad($tile!(2, $group, $j)),
            _ => $crate::x86_q4::pad($tile!(1, $group, $j)),
        }
    };
    ($rows:expr, $x:expr, $out:expr, $stride:expr, $prepare:ident, $tile:ident, $widest:tt) => {{
        let rows: &std::ops::Range<usize> = &$rows;
        let groups = rows.start / GROUP..rows.end.div_ceil(GROUP);
        let n = $x.rows();
        for chunk in (0..n).step_by($crate::x86_q4::ACT_CHUNK) {
            let chunk_end = (chunk + $crate::x86_q4::ACT_CHUNK).min(n);
            for group in groups.clone() {
                // Most kernels prepare nothing (then the block is empty).
                #[allow(unused_unsafe)]
                // SAFETY: the enclosing kernel enables the preparation's target features
                // and its contract is the preparation's; the group is checked.
                unsafe {
                    $prepare!(group)
                };
                let mut j = chunk;
                while j < chunk_end {
                    let width = (chunk_end - j).min($widest);
                    // SAFETY: the enclosing kernel enables the tile's target features and
                    // its contract is the tile's (`x.blocks() == w.blocks()`, const layout
                    // parameters that match `w`); `j + width <= n`.
                    let sums = unsafe { $crate::x86_q4::for_each_group_tile!(@tiles $widest, $tile, group, j, width) };
                    for (c, lanes) in sums.iter().take(width).enumerate() {
                        $crate::x86_q4::store_group(*lanes, group * GROUP, rows, &mut $out[(j + c) * $stride..]);
                    }
                    j += width;
                }
            }
        }
    }};
}
pub(crate) use for_each_group_tile;

/// `C` results widened to `N` (the rest unused).
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn pad<const C: usize, const N: usize>(sums: [__m256; C]) -> [__m256; N] {
    let mut all = [_mm256_setzero_ps(); N];
    all[..C].copy_from_slice(&sums);
    all
}

/// Store the lanes of rows `first..first + 8` that lie in `rows` into
/// `out_row[r − rows.start]`.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn store_group(lanes: __m256, first: usize, rows: &Range<usize>, out_row: &mut [f32]) {
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

/// The fifth bits of values `shift..shift + 4` of each lane's `qh` word,
/// moved to bit 4 of the lane's bytes 0–3 (one multiply places four copies
/// of the four bits at offsets 4, 11, 18 and 25, which cannot carry into
/// each other; byte k keeps bit k of the copy that lands on its bit 4).
#[target_feature(enable = "avx2")]
#[inline]
fn fifth_bits(qh: __m256i, shift: usize) -> __m256i {
    let bits = _mm256_and_si256(
        _mm256_srlv_epi32(qh, _mm256_set1_epi32(shift as i32)),
        _mm256_set1_epi32(0x0F),
    );
    _mm256_and_si256(
        _mm256_mullo_epi32(bits, _mm256_set1_epi32(0x0204_0810)),
        _mm256_set1_epi32(0x1010_1010),
    )
}

/// The eight outputs of weight group `group` against activation rows `j0..j0 + C`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and `x.blocks() == w.blocks()` (activation
/// blocks are read through unchecked pointers). `group` and `j0 + C <=
/// x.rows()` are checked (slicing panics); `MIN` and `HIGH` as [`matmul_groups`].
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn group_tile<const C: usize, const MIN: bool, const HIGH: bool>(
    w: &NibbleGroups,
    group: usize,
    x: &Q8Activations,
    j0: usize,
) -> [__m256; C] {
    let (nibbles_at, high_at, offset) = (w.kind().nibbles_at(), w.kind().high_at(), w.kind().offset());
    let ones = _mm256_set1_epi16(1);
    let low_mask = _mm256_set1_epi8(0x0F);
    let mut acc = [_mm256_setzero_ps(); C];
    let mut quants: [&[i8]; C] = [&[]; C];
    let mut scales: [&[f32]; C] = [&[]; C];
    let mut sums: [&[f32]; C] = [&[]; C];
    let mut isums: [&[i32]; C] = [&[]; C];
    for c in 0..C {
        quants[c] = x.row_quants(j0 + c);
        scales[c] = x.row_scales(j0 + c);
        sums[c] = x.row_sums(j0 + c);
        isums[c] = x.row_isums(j0 + c);
    }
    let (block_bytes, prefetch) = (w.group_block(group, 0).len(), tile_prefetches(C, x.rows()));
    for b in 0..w.blocks() {
        let data = w.group_block(group, b).as_ptr();
        if prefetch {
            prefetch_ahead(data, block_bytes);
        }
        // SAFETY: `data` is a whole group block of `w.kind()`: 8 f16 d, (with a
        // minimum) 8 f16 m, (5-bit) a qh register, then four 32-byte registers;
        // these 16-byte loads at 0 and 16 lie inside even the 4-bit Q4_0 block.
        let (d, m) = unsafe {
            if MIN {
                (
                    _mm256_cvtph_ps(_mm_loadu_si128(data.cast())),
                    _mm256_cvtph_ps(_mm_loadu_si128(data.add(16).cast())),
                )
            } else {
                (_mm256_cvtph_ps(_mm_loadu_si128(data.cast())), _mm256_setzero_ps())
            }
        };
        // 4-bit: i16 sums, one `madd` per block; 5-bit: i32 sums, one per register.
        let mut dots = [_mm256_setzero_si256(); C];
        let qh = if HIGH {
            // SAFETY: as above (32 bytes at `high_at`, inside every kind's block).
            unsafe { _mm256_loadu_si256(data.add(high_at).cast()) }
        } else {
            _mm256_setzero_si256()
        };
        for t in 0..4 {
            // SAFETY: as above: register `t < 4` of the nibbles ends the block.
            let packed = unsafe { _mm256_loadu_si256(data.add(nibbles_at + t * 32).cast()) };
            let mut low = _mm256_and_si256(packed, low_mask);
            let mut high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask);
            if HIGH {
                low = _mm256_or_si256(low, fifth_bits(qh, 4 * t));
                high = _mm256_or_si256(high, fifth_bits(qh, 16 + 4 * t));
            }
            for c in 0..C {
                // SAFETY: block `b < w.blocks() == x.blocks()` (the caller's contract) of
                // the row is 32 bytes, and 4t + 16 + 4 <= 32.
                let (y_low, y_high) = unsafe {
                    let block = quants[c].as_ptr().add(b * BLOCK + t * 4);
                    (
                        _mm256_set1_epi32(block.cast::<i32>().read_unaligned()),
                        _mm256_set1_epi32(block.add(16).cast::<i32>().read_unaligned()),
                    )
                };
                let products = _mm256_add_epi16(_mm256_maddubs_epi16(low, y_low), _mm256_maddubs_epi16(high, y_high));
                dots[c] = if HIGH {
                    _mm256_add_epi32(dots[c], _mm256_madd_epi16(products, ones))
                } else {
                    _mm256_add_epi16(dots[c], products)
                };
            }
        }
        for c in 0..C {
            let dot = if HIGH {
                dots[c]
            } else {
                _mm256_madd_epi16(dots[c], ones)
            };
            let lanes = if MIN {
                let scaled = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(dot), d), _mm256_set1_ps(scales[c][b]));
                _mm256_add_ps(scaled, _mm256_mul_ps(m, _mm256_set1_ps(sums[c][b])))
            } else {
                let centered = _mm256_sub_epi32(dot, _mm256_set1_epi32(offset * isums[c][b]));
                _mm256_mul_ps(
                    _mm256_mul_ps(_mm256_cvtepi32_ps(centered), d),
                    _mm256_set1_ps(scales[c][b]),
                )
            };
            acc[c] = _mm256_add_ps(acc[c], lanes);
        }
    }
    acc
}
