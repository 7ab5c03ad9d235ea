//! The AVX2+FMA+F16C path of Q4_K at GGML's bytes (layout in `q4_k.rs`):
//! eight weight rows in the eight lanes of a register, up to four activation
//! rows at a time. Per group and super-block the 64 scales and 64 mins are
//! unpacked from their 96 bytes with a few vector operations; per sub-block
//! pair, eight registers of nibbles give both sub-blocks' exact integer dots
//! (low nibbles against the even sub-block's activations, high nibbles
//! against the odd one's: eight `maddubs` results summed in 16 bits,
//! |Σ| ≤ 8·2·15·128 < 2¹⁵), then per sub-block the portable `dot_q4_k`
//! arithmetic, lane by lane, in the same order.

use crate::q4::GROUP;
use crate::q4_k::{nibbles_at, DMIN_AT, HIGH_BITS_AT, MINS_AT, PAIR_BYTES, QH_AT, SCALES_AT, SUB_BLOCKS};
use crate::x86_q4::for_each_group_tile;
use crate::{Q4KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q4_k`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and the arguments meet `dispatch::check`
/// with `rows.start` a multiple of 8. Soundness rests on `x.blocks() ==
/// w.blocks()` (the tiles read activation blocks `0..w.blocks()` through
/// unchecked pointers); weight groups and outputs go through checked slices.
#[target_feature(enable = "avx2,fma,f16c")]
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
/// As [`matmul_q4_k`], and `FIVE == w.five_bit()`: Q5_K's nibbles start 256
/// bytes later, so `FIVE` on a Q4_K matrix would read past its group
/// super-blocks.
#[target_feature(enable = "avx2,fma,f16c")]
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

/// Bit `bit` of every byte of `qh`, moved to bit 4 (Q5_K's fifth bit of a
/// sub-block's values; what 16-bit shifts carry across bytes is masked off).
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn fifth_bits(qh: __m256i, bit: usize) -> __m256i {
    let moved = if bit <= 4 {
        _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - bit as i32))
    } else {
        _mm256_srl_epi16(qh, _mm_cvtsi32_si128(bit as i32 - 4))
    };
    _mm256_and_si256(moved, _mm256_set1_epi8(0x10))
}

/// A group super-block's per-sub-block factors as f32 lanes (one per row):
/// `d·scale_j` and `−dmin·min_j` for sub-blocks `j = 0..8`, unpacked from
/// the 96 bytes of 6-bit scales and mins (the layout of `q4_k.rs`) without
/// leaving registers.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `data` points at the first of the 128
/// readable bytes of a Q4_K/Q5_K group super-block's factors (d, dmin,
/// scales, mins, high bits: loads up to `HIGH_BITS_AT + 32`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) unsafe fn super_block_factors(data: *const u8) -> ([__m256; SUB_BLOCKS], [__m256; SUB_BLOCKS]) {
    let nibble = _mm256_set1_epi8(0x0F);
    let two = _mm256_set1_epi8(3);
    // SAFETY: every load ends by `HIGH_BITS_AT + 32`, inside the caller's 128 bytes.
    let (d, dmin, scales, mins, high) = unsafe {
        (
            _mm256_cvtph_ps(_mm_loadu_si128(data.cast())),
            _mm256_cvtph_ps(_mm_loadu_si128(data.add(DMIN_AT).cast())),
            _mm256_loadu_si256(data.add(SCALES_AT).cast()),
            _mm256_loadu_si256(data.add(MINS_AT).cast()),
            _mm256_loadu_si256(data.add(HIGH_BITS_AT).cast()),
        )
    };
    // Bits 0–1 of each byte of `shifted`, moved to bits 4–5 (a 16-bit shift
    // by 4 keeps bits 0–1 inside their byte).
    let high_bits = |shifted: __m256i| _mm256_slli_epi16(_mm256_and_si256(shifted, two), 4);
    // Byte k of the first register is value k (sub-blocks 0..4), of the second value k + 32.
    let scale_values = [
        _mm256_or_si256(_mm256_and_si256(scales, nibble), high_bits(high)),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(scales, 4), nibble),
            high_bits(_mm256_srli_epi16(high, 2)),
        ),
    ];
    let min_values = [
        _mm256_or_si256(_mm256_and_si256(mins, nibble), high_bits(_mm256_srli_epi16(high, 4))),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(mins, 4), nibble),
            high_bits(_mm256_srli_epi16(high, 6)),
        ),
    ];
    let sign = _mm256_set1_ps(-0.0);
    let mut d_scale = [_mm256_setzero_ps(); SUB_BLOCKS];
    let mut minus_min = [_mm256_setzero_ps(); SUB_BLOCKS];
    for j in 0..SUB_BLOCKS {
        let (s, m) = (
            eight_values(scale_values[j / 4], j % 4),
            eight_values(min_values[j / 4], j % 4),
        );
        d_scale[j] = _mm256_mul_ps(d, s);
        minus_min[j] = _mm256_xor_ps(_mm256_mul_ps(dmin, m), sign);
    }
    (d_scale, minus_min)
}

/// Bytes `8q..8q + 8` of `values` (unsigned) as eight f32 lanes.
#[target_feature(enable = "avx2")]
#[inline]
fn eight_values(values: __m256i, q: usize) -> __m256 {
    let half = match q / 2 {
        0 => _mm256_castsi256_si128(values),
        _ => _mm256_extracti128_si256(values, 1),
    };
    let bytes = match q % 2 {
        0 => half,
        _ => _mm_srli_si128(half, 8),
    };
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes))
}

/// `acc + (Σq·y · d·scale) · d_y + (−dmin·min) · s_y` lane by lane, unfused,
/// in that order: the one place every Q4_K/Q5_K path forms a sub-block's
/// contribution (the portable `dot_q4_k` arithmetic).
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn accumulate_sub_block(
    acc: __m256,
    dot: __m256i,
    (d_scale, minus_min): (__m256, __m256),
    (activation_scale, activation_sum): (f32, f32),
) -> __m256 {
    let scaled = _mm256_mul_ps(
        _mm256_mul_ps(_mm256_cvtepi32_ps(dot), d_scale),
        _mm256_set1_ps(activation_scale),
    );
    let lanes = _mm256_add_ps(scaled, _mm256_mul_ps(minus_min, _mm256_set1_ps(activation_sum)));
    _mm256_add_ps(acc, lanes)
}

/// The eight outputs of weight group `group` against activation rows `j0..j0 + C`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, `x.blocks() == w.blocks()` (activation
/// blocks are read through unchecked pointers) and `FIVE == w.five_bit()`
/// (see [`matmul_groups`]). `group` and `j0 + C <= x.rows()` are checked
/// (slicing panics).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn group_tile<const C: usize, const FIVE: bool>(
    w: &Q4KWeights,
    group: usize,
    x: &Q8Activations,
    j0: usize,
) -> [__m256; C] {
    let ones = _mm256_set1_epi16(1);
    let nibbles_at = nibbles_at(FIVE);
    let nibble = _mm256_set1_epi8(0x0F);
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
        // SAFETY: `data` is a whole group super-block (a checked slice), longer than
        // its factors; the features are enabled here.
        let (d_scale, minus_min) = unsafe { super_block_factors(data) };
        for pair in 0..SUB_BLOCKS / 2 {
            let (even, odd) = (sb * SUB_BLOCKS + 2 * pair, sb * SUB_BLOCKS + 2 * pair + 1);
            // Q4_K: i16 sums (eight products of at most 2·15·128); Q5_K: i32 sums.
            let mut dots = [[_mm256_setzero_si256(); C]; 2];
            for t in 0..8 {
                // SAFETY: pair `pair < 4` holds eight 32-byte registers after the nibbles'
                // start, inside the group super-block of this kind (`FIVE` follows
                // `w.five_bit()`); Q5_K's eight qh registers lie after QH_AT.
                let packed = unsafe { _mm256_loadu_si256(data.add(nibbles_at + pair * PAIR_BYTES + t * 32).cast()) };
                let mut low = _mm256_and_si256(packed, nibble);
                let mut high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
                if FIVE {
                    // SAFETY: as above.
                    let qh = unsafe { _mm256_loadu_si256(data.add(QH_AT + t * 32).cast()) };
                    low = _mm256_or_si256(low, fifth_bits(qh, 2 * pair));
                    high = _mm256_or_si256(high, fifth_bits(qh, 2 * pair + 1));
                }
                for c in 0..C {
                    // SAFETY: activation blocks `even < odd < w.blocks() == x.blocks()` (the
                    // caller's contract) are 32 bytes each, and 4t + 4 <= 32.
                    let (y_even, y_odd) = unsafe {
                        let row = quants[c].as_ptr();
                        (
                            _mm256_set1_epi32(row.add(even * BLOCK + t * 4).cast::<i32>().read_unaligned()),
                            _mm256_set1_epi32(row.add(odd * BLOCK + t * 4).cast::<i32>().read_unaligned()),
                        )
                    };
                    let (even_products, odd_products) =
                        (_mm256_maddubs_epi16(low, y_even), _mm256_maddubs_epi16(high, y_odd));
                    if FIVE {
                        dots[0][c] = _mm256_add_epi32(dots[0][c], _mm256_madd_epi16(even_products, ones));
                        dots[1][c] = _mm256_add_epi32(dots[1][c], _mm256_madd_epi16(odd_products, ones));
                    } else {
                        dots[0][c] = _mm256_add_epi16(dots[0][c], even_products);
                        dots[1][c] = _mm256_add_epi16(dots[1][c], odd_products);
                    }
                }
            }
            for (half, b) in [even, odd].into_iter().enumerate() {
                let j = 2 * pair + half;
                for c in 0..C {
                    let dot = if FIVE {
                        dots[half][c]
                    } else {
                        _mm256_madd_epi16(dots[half][c], ones)
                    };
                    let factors = (d_scale[j], minus_min[j]);
                    acc[c] = accumulate_sub_block(acc[c], dot, factors, (scales[c][b], sums[c][b]));
                }
            }
        }
    }
    acc
}
