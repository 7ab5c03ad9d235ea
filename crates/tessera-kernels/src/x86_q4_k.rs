//! The AVX2+FMA+F16C path of Q4_K at GGML's bytes (layout in `q4_k.rs`):
//! eight weight rows in the eight lanes of a register, up to four activation
//! rows at a time, against super-block activations (one scale per 256
//! values). Per group and super-block the 64 scales and 64 mins are unpacked
//! from their 96 bytes into 16-bit multipliers with a few vector operations;
//! per sub-block, eight registers of nibbles give its exact integer dots
//! (`maddubs` results summed in 16 bits: |Σ| ≤ 8·2·15·127 < 2¹⁵, four at a
//! time for Q5_K's 5-bit values), which one `madd` scales into the
//! super-block's 32-bit sum `A`; the mins meet the activations' run sums in
//! four more `madd`s (`B`); then the portable `dot_q4_k`'s one float step per
//! super-block, lane by lane. One activation row (decode, on CPUs without
//! AVX-512 VNNI) runs `single_row`, which loads each register once for both
//! sub-blocks of its pair and asks for its weights ahead.

use crate::q4::GROUP;
use crate::q4_k::{nibbles_at, DMIN_AT, HIGH_BITS_AT, MINS_AT, PAIR_BYTES, QH_AT, SCALES_AT, SUB_BLOCKS};
use crate::super_activations::SuperRow;
use crate::x86::{k_quant_tile_prefetches, prefetch_ahead};
use crate::x86_q4::for_each_group_tile;
use crate::{Q4KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q4_k`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and the arguments meet `dispatch::check`
/// with `rows.start` a multiple of 8, and the activations hold super-blocks
/// (`dispatch::check_quantization`). Soundness rests on `x.blocks() ==
/// w.blocks()` (the tiles read the activations' super-block quants and run
/// sums through unchecked pointers); weight groups and outputs go through
/// checked slices.
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

/// A group super-block's factors, one lane per row: `d` and `dmin` as f32,
/// each sub-block's 6-bit scale as a 16-bit multiplier in both halves of
/// the row's 32-bit lane (for `madd`), and the mins of sub-blocks `2k` and
/// `2k + 1` as the two 16-bit halves of the lane.
pub(crate) struct SuperFactors {
    pub(crate) d: __m256,
    pub(crate) dmin: __m256,
    pub(crate) scales: [__m256i; SUB_BLOCKS],
    pub(crate) min_pairs: [__m256i; SUB_BLOCKS / 2],
}

/// A `vpshufb` mask that gives each row's 32-bit lane two 16-bit values:
/// byte `4·low + r` and byte `4·high + r` of its 128-bit half, zero-extended
/// (`r`: the row's place in its half; see [`rows_by_half`]).
const fn spread_mask(low: usize, high: usize) -> Mask {
    let mut bytes = [0i8; 32];
    let mut lane = 0;
    while lane < 8 {
        let (at, r) = (16 * (lane / 4) + 4 * (lane % 4), lane % 4);
        bytes[at] = (4 * low + r) as i8;
        bytes[at + 1] = -128;
        bytes[at + 2] = (4 * high + r) as i8;
        bytes[at + 3] = -128;
        lane += 1;
    }
    Mask(bytes)
}

/// A 32-byte aligned `vpshufb` mask.
#[repr(align(32))]
struct Mask([i8; 32]);

/// Sub-block `j % 4`'s scale in both halves of each row's lane.
static SCALE_MASKS: [Mask; 4] = [
    spread_mask(0, 0),
    spread_mask(1, 1),
    spread_mask(2, 2),
    spread_mask(3, 3),
];
/// The mins of sub-blocks `2k` and `2k + 1` (`k % 2`) as the two halves of each row's lane.
static MIN_PAIR_MASKS: [Mask; 2] = [spread_mask(0, 1), spread_mask(2, 3)];

/// `mask` as a register.
#[target_feature(enable = "avx2")]
#[inline]
fn load_mask(mask: &Mask) -> __m256i {
    // SAFETY: `Mask` is 32 bytes aligned to 32.
    unsafe { _mm256_load_si256(mask.0.as_ptr().cast()) }
}

/// The 32 bytes of a factor register (byte `8·(j % 4) + r`: row `r`'s value
/// of sub-block `j`) with rows 0–3 in the low 128-bit half and rows 4–7 in
/// the high one: byte `4·(j % 4) + r % 4` of half `r / 4`. Then one in-half
/// `vpshufb` spreads a sub-block's values into the rows' lanes.
#[target_feature(enable = "avx2")]
#[inline]
fn rows_by_half(bytes: __m256i) -> __m256i {
    _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7))
}

/// [`SuperFactors`] of the group super-block at `data`, unpacked from the 96
/// bytes of 6-bit scales and mins (the layout of `q4_k.rs`) without leaving
/// registers: the 6-bit values are put together byte by byte, then each
/// sub-block's (or pair's) lanes are one `vpshufb` of them.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `data` points at the first of the 128
/// readable bytes of a Q4_K/Q5_K group super-block's factors (d, dmin,
/// scales, mins, high bits: loads up to `HIGH_BITS_AT + 32`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) unsafe fn super_block_factors(data: *const u8) -> SuperFactors {
    let nibble = _mm256_set1_epi8(0x0F);
    let two = _mm256_set1_epi8(3);
    // SAFETY: every load ends by `HIGH_BITS_AT + 32`, inside the caller's 128 bytes.
    let (d, dmin, scales, mins, high) = unsafe {
        (
            _mm256_cvtph_ps(_mm_loadu_si128(data.cast())),
            _mm256_cvtph_ps(_mm_loadu_si128(data.add(DMIN_AT).cast())),
            rows_by_half(_mm256_loadu_si256(data.add(SCALES_AT).cast())),
            rows_by_half(_mm256_loadu_si256(data.add(MINS_AT).cast())),
            rows_by_half(_mm256_loadu_si256(data.add(HIGH_BITS_AT).cast())),
        )
    };
    // Bits 0–1 of each byte of `shifted`, moved to bits 4–5 (a 16-bit shift
    // by 4 keeps bits 0–1 inside their byte).
    let high_bits = |shifted: __m256i| _mm256_slli_epi16(_mm256_and_si256(shifted, two), 4);
    // The first register holds sub-blocks 0..4, the second 4..8.
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
    let mut factors = SuperFactors {
        d,
        dmin,
        scales: [_mm256_setzero_si256(); SUB_BLOCKS],
        min_pairs: [_mm256_setzero_si256(); SUB_BLOCKS / 2],
    };
    for (j, scale) in factors.scales.iter_mut().enumerate() {
        *scale = _mm256_shuffle_epi8(scale_values[j / 4], load_mask(&SCALE_MASKS[j % 4]));
    }
    for (k, pair) in factors.min_pairs.iter_mut().enumerate() {
        *pair = _mm256_shuffle_epi8(min_values[k / 2], load_mask(&MIN_PAIR_MASKS[k % 2]));
    }
    factors
}

/// Group super-block `sb` of `group` and its [`SuperFactors`], after asking
/// for the bytes [`PREFETCH_AHEAD`](crate::x86::PREFETCH_AHEAD) past it when
/// `prefetch` (see `x86::k_quant_tile_prefetches`). (The group super-block is a
/// checked slice: a group or super-block out of range panics.)
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn group_super_factors(
    w: &Q4KWeights,
    group: usize,
    sb: usize,
    prefetch: bool,
) -> (*const u8, SuperFactors) {
    let block = w.group_super(group, sb);
    if prefetch {
        prefetch_ahead(block.as_ptr(), block.len());
    }
    // SAFETY: a whole group super-block is longer than its factors' 128 bytes; the
    // features are enabled here.
    (block.as_ptr(), unsafe { super_block_factors(block.as_ptr()) })
}

/// `B` of super-block `sb` for eight rows: the mins of each sub-block pair
/// (`madd` multipliers) against the activation row's run sums of 32.
///
/// # Safety
/// The CPU has AVX2; `sums32` points at a row's run sums of 32 values with
/// `8sb + 8` of them readable.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn mins_times_sums(factors: &SuperFactors, sums32: *const i16, sb: usize) -> __m256i {
    let mut b = _mm256_setzero_si256();
    for (k, pair) in factors.min_pairs.iter().enumerate() {
        // SAFETY: run sums `8sb + 2k + 1 < 8sb + 8` are readable (the caller's contract).
        let sums = unsafe { _mm256_set1_epi32(sums32.add(sb * SUB_BLOCKS + 2 * k).cast::<i32>().read_unaligned()) };
        b = _mm256_add_epi32(b, _mm256_madd_epi16(*pair, sums));
    }
    b
}

/// `acc + (A·(d·D) − B·(dmin·D))` lane by lane, unfused, in that order: the
/// portable `dot_q4_k`'s float step for one super-block.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn accumulate_super_block(
    acc: __m256,
    (a, b): (__m256i, __m256i),
    factors: &SuperFactors,
    dy: f32,
) -> __m256 {
    let dy = _mm256_set1_ps(dy);
    let scaled = _mm256_mul_ps(_mm256_cvtepi32_ps(a), _mm256_mul_ps(factors.d, dy));
    let shifted = _mm256_mul_ps(_mm256_cvtepi32_ps(b), _mm256_mul_ps(factors.dmin, dy));
    _mm256_add_ps(acc, _mm256_sub_ps(scaled, shifted))
}

/// The eight outputs of weight group `group` against activation rows `j0..j0 + C`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, the activations hold super-blocks
/// (`dispatch::check_quantization`) with `x.blocks() == w.blocks()` (their
/// quants and run sums are read through unchecked pointers), and `FIVE ==
/// w.five_bit()` (see [`matmul_groups`]). `group` and `j0 + C <= x.rows()`
/// are checked (slicing panics).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn group_tile<const C: usize, const FIVE: bool>(
    w: &Q4KWeights,
    group: usize,
    x: &Q8Activations,
    j0: usize,
) -> [__m256; C] {
    let prefetch = k_quant_tile_prefetches(x.rows());
    if C == 1 {
        let mut acc = [_mm256_setzero_ps(); C];
        // SAFETY: the caller's contract is `single_row`'s.
        acc[0] = unsafe { single_row::<FIVE>(w, group, x, j0, prefetch) };
        return acc;
    }
    let nibbles_at = nibbles_at(FIVE);
    let nibble = _mm256_set1_epi8(0x0F);
    // Q4_K sums eight `maddubs` results in 16 bits, Q5_K four.
    let flush_every = if FIVE { 4 } else { 8 };
    let mut acc = [_mm256_setzero_ps(); C];
    // Filled in a loop: a closure (`std::array::from_fn`) does not inherit the
    // target features, and as a call it was 5% of an AVX2 prefill.
    let mut rows: [SuperRow<'_>; C] = [x.super_row(j0); C];
    for (c, row) in rows.iter_mut().enumerate().skip(1) {
        *row = x.super_row(j0 + c);
    }
    for sb in 0..w.supers() {
        let (data, factors) = group_super_factors(w, group, sb, prefetch);
        let mut a = [_mm256_setzero_si256(); C];
        for j in 0..SUB_BLOCKS {
            let block = sb * SUB_BLOCKS + j;
            let mut dots = [_mm256_setzero_si256(); C];
            for t in 0..8 {
                // SAFETY: pair `j / 2 < 4` holds eight 32-byte registers after the nibbles'
                // start, inside the group super-block of this kind (`FIVE` follows
                // `w.five_bit()`); Q5_K's eight qh registers lie after QH_AT.
                let packed = unsafe { _mm256_loadu_si256(data.add(nibbles_at + (j / 2) * PAIR_BYTES + t * 32).cast()) };
                let shifted = if j % 2 == 0 {
                    packed
                } else {
                    _mm256_srli_epi16(packed, 4)
                };
                let mut quants = _mm256_and_si256(shifted, nibble);
                if FIVE {
                    // SAFETY: as above.
                    let qh = unsafe { _mm256_loadu_si256(data.add(QH_AT + t * 32).cast()) };
                    quants = _mm256_or_si256(quants, fifth_bits(qh, j));
                }
                for c in 0..C {
                    // SAFETY: activation block `block < w.blocks() == x.blocks()` (the caller's
                    // contract) is 32 bytes of the row's super-block quants, and 4t + 4 <= 32.
                    let y = unsafe {
                        let at = rows[c].quants.as_ptr().add(block * BLOCK + t * 4);
                        _mm256_set1_epi32(at.cast::<i32>().read_unaligned())
                    };
                    dots[c] = _mm256_add_epi16(dots[c], _mm256_maddubs_epi16(quants, y));
                }
                if (t + 1) % flush_every == 0 {
                    for c in 0..C {
                        a[c] = _mm256_add_epi32(a[c], _mm256_madd_epi16(dots[c], factors.scales[j]));
                        dots[c] = _mm256_setzero_si256();
                    }
                }
            }
        }
        for c in 0..C {
            // SAFETY: the row holds `8·w.supers()` run sums of 32 (the caller's contract).
            let b = unsafe { mins_times_sums(&factors, rows[c].sums32.as_ptr(), sb) };
            acc[c] = accumulate_super_block(acc[c], (a[c], b), &factors, rows[c].scales[sb]);
        }
    }
    acc
}

/// [`group_tile`] for one activation row (decode): each 32-byte register of
/// a sub-block pair is loaded once for both of its sub-blocks (its low and
/// high nibbles). The 16-bit sums cover the same `maddubs` results as the
/// tile's, and integer sums do not depend on their order, so the results
/// equal the tile's bit for bit.
///
/// # Safety
/// As [`group_tile`] with `C == 1`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn single_row<const FIVE: bool>(
    w: &Q4KWeights,
    group: usize,
    x: &Q8Activations,
    j0: usize,
    prefetch: bool,
) -> __m256 {
    let nibbles_at = nibbles_at(FIVE);
    let nibble = _mm256_set1_epi8(0x0F);
    let flush_every = if FIVE { 4 } else { 8 };
    let row = x.super_row(j0);
    let mut acc = _mm256_setzero_ps();
    for sb in 0..w.supers() {
        let (data, factors) = group_super_factors(w, group, sb, prefetch);
        let mut a = _mm256_setzero_si256();
        for pair in 0..SUB_BLOCKS / 2 {
            let sub_blocks = [2 * pair, 2 * pair + 1];
            let mut dots = [_mm256_setzero_si256(); 2];
            for t in 0..8 {
                // SAFETY: pair `pair < 4` holds eight 32-byte registers after the nibbles'
                // start, inside the group super-block of this kind (`FIVE` follows
                // `w.five_bit()`).
                let packed = unsafe { _mm256_loadu_si256(data.add(nibbles_at + pair * PAIR_BYTES + t * 32).cast()) };
                let mut quants = [
                    _mm256_and_si256(packed, nibble),
                    _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble),
                ];
                if FIVE {
                    // SAFETY: Q5_K's eight qh registers lie after QH_AT (as above).
                    let qh = unsafe { _mm256_loadu_si256(data.add(QH_AT + t * 32).cast()) };
                    for (q, &j) in quants.iter_mut().zip(&sub_blocks) {
                        *q = _mm256_or_si256(*q, fifth_bits(qh, j));
                    }
                }
                for k in 0..2 {
                    let block = sb * SUB_BLOCKS + sub_blocks[k];
                    // SAFETY: activation block `block < w.blocks() == x.blocks()` (the caller's
                    // contract) is 32 bytes of the row's super-block quants, and 4t + 4 <= 32.
                    let y = unsafe {
                        let at = row.quants.as_ptr().add(block * BLOCK + t * 4);
                        _mm256_set1_epi32(at.cast::<i32>().read_unaligned())
                    };
                    dots[k] = _mm256_add_epi16(dots[k], _mm256_maddubs_epi16(quants[k], y));
                }
                if (t + 1) % flush_every == 0 {
                    for k in 0..2 {
                        a = _mm256_add_epi32(a, _mm256_madd_epi16(dots[k], factors.scales[sub_blocks[k]]));
                        dots[k] = _mm256_setzero_si256();
                    }
                }
            }
        }
        // SAFETY: the row holds `8·w.supers()` run sums of 32 (the caller's contract).
        let b = unsafe { mins_times_sums(&factors, row.sums32.as_ptr(), sb) };
        acc = accumulate_super_block(acc, (a, b), &factors, row.scales[sb]);
    }
    acc
}
