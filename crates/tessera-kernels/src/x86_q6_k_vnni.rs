//! The AVX-512 VNNI path of Q6_K (layout in `q6_k.rs`), for prefill:
//! sixteen rows (two groups, see `x86_vnni.rs`) per register. Once per chunk
//! and pair the quants (0–63) are rebuilt from one 32-byte `ql` and one `qh`
//! load per group into a `PairQuants`; each tile then meets a register with
//! activation bytes `4t..4t + 4`, broadcast to all lanes, in one `vpdpbusd`
//! per activation row. Each half block then runs the AVX2 kernel's
//! arithmetic per lane (subtract `32·Σy`, scale by `d·scale`, then by `d_y`),
//! so results are equal bit for bit.

use crate::q6_k::{qh_at, ql_at, GROUP, SCALES_AT, SUB_BLOCKS};
use crate::x86_vnni::{broadcast_four, for_each_pair_tile, join_loads, join_ps, PairQuants};
use crate::{Q6KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q6_k`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C, and the arguments
/// meet `dispatch::check` with `rows.start` a multiple of 8. Soundness rests
/// on `x.blocks() == w.blocks()` (the tiles read activation blocks
/// `0..w.blocks()` through unchecked pointers); weight groups and outputs go
/// through checked slices.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q6_k(
    w: &Q6KWeights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    // Per super-block and half sub-block, `d·scale` of the pair's rows.
    let mut scales = vec![[_mm512_setzero_ps(); 2 * SUB_BLOCKS]; w.supers()];
    let mut quants = PairQuants::new(w.supers());
    macro_rules! prepare {
        ($pair:expr) => {{
            pair_scales(w, $pair, &mut scales);
            unpack_pair(w, $pair, &mut quants);
        }};
    }
    // A tile of `C` activation rows at (`pair`, `j`).
    macro_rules! tile {
        ($c:literal, $pair:expr, $j:expr) => {
            pair_tile::<$c>(&quants, &scales, x, $j)
        };
    }
    for_each_pair_tile!(rows, x, out, stride, prepare, tile);
}

/// The quants (0–63) of sub-block `k` of chunk `chunk` at register position
/// `t` of both group super-blocks (`x86_q6_k::sub_block_quants`, 16 rows).
///
/// # Safety
/// The CPU has AVX-512 F and BW; `lo` and `hi` each point at a whole Q6_K
/// group super-block, and `chunk < 2`, `t < 8` (the registers at
/// `ql_at(chunk, k % 2, t)` and `qh_at(chunk, t)` are loaded). `k < 4` picks
/// the bits; any `k` is sound.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn sub_block_quants(lo: *const u8, hi: *const u8, chunk: usize, k: usize, t: usize) -> __m512i {
    let nibble = _mm512_set1_epi8(0x0F);
    let bits = _mm512_set1_epi8(0x30);
    let (ql_at, qh_at) = (ql_at(chunk, k % 2, t), qh_at(chunk, t));
    // SAFETY: both registers lie inside both group super-blocks (the caller's contract).
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

/// A pair's quants (0–63) as bytes, for every tile of the pair.
///
/// # Safety
/// The CPU has AVX-512 F and BW. (The groups and `quants`' size are checked:
/// slicing and indexing panic.)
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn unpack_pair(w: &Q6KWeights, [lower, upper]: [usize; 2], quants: &mut PairQuants) {
    for sb in 0..w.supers() {
        let (lo, hi) = (w.group_super(lower, sb).as_ptr(), w.group_super(upper, sb).as_ptr());
        for j in 0..SUB_BLOCKS {
            for t in 0..8 {
                // SAFETY: both are whole group super-blocks (checked slices); j / 4 < 2,
                // t < 8; the features are enabled here.
                quants.set(sb, j, t, unsafe { sub_block_quants(lo, hi, j / 4, j % 4, t) });
            }
        }
    }
}

/// Every super-block's `d·scale_i` (16 per super-block) for both groups of a
/// pair, rows of the lower group in lanes 0–7.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2 and F16C. (Super-blocks are reached through
/// checked slices; `scales` should hold `w.supers()` entries.)
#[target_feature(enable = "avx512f,avx2,f16c")]
#[inline]
unsafe fn pair_scales(w: &Q6KWeights, [lower, upper]: [usize; 2], scales: &mut [[__m512; 2 * SUB_BLOCKS]]) {
    for (sb, entry) in scales.iter_mut().enumerate() {
        let (lo, hi) = (w.group_super(lower, sb).as_ptr(), w.group_super(upper, sb).as_ptr());
        // SAFETY: `lo` and `hi` are whole group super-blocks (checked slices), which start
        // with eight f16 d, then 16 × 8 scale bytes (`i < 16`); AVX2 is enabled here.
        unsafe {
            let d = join_ps(
                _mm256_cvtph_ps(_mm_loadu_si128(lo.cast())),
                _mm256_cvtph_ps(_mm_loadu_si128(hi.cast())),
            );
            for (i, ds) in entry.iter_mut().enumerate() {
                let (scale_lo, scale_hi) = (half_scale(lo, i), half_scale(hi, i));
                *ds = _mm512_mul_ps(d, join_ps(scale_lo, scale_hi));
            }
        }
    }
}

/// Scale `i` of a group super-block's eight rows, as f32.
///
/// # Safety
/// The CPU has AVX2; `data` points at a whole Q6_K group super-block and
/// `i < 16` (the 8 bytes at `SCALES_AT + 8i` are loaded).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn half_scale(data: *const u8, i: usize) -> __m256 {
    // SAFETY: the caller's contract: the 8 bytes of scale i lie inside the group super-block.
    unsafe {
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
            data.add(SCALES_AT + i * GROUP).cast(),
        )))
    }
}

/// The sixteen outputs of an unpacked pair against activation rows `j0..j0 + C`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C, and
/// `scales_ds.len() · 8 <= x.blocks()`: the activation blocks of every
/// super-block in `scales_ds` are read through unchecked pointers (the kernel
/// passes `w.supers()` entries, and `x.blocks() == w.blocks()`). `j0 + C <=
/// x.rows()` and `quants` are checked (slicing and indexing panic).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn pair_tile<const C: usize>(
    quants: &PairQuants,
    scales_ds: &[[__m512; 2 * SUB_BLOCKS]],
    x: &Q8Activations,
    j0: usize,
) -> [__m512; C] {
    let mut acc = [_mm512_setzero_ps(); C];
    // Filled in a plain loop: `std::array::from_fn` here made the tile 60% slower
    // (measured; it changes how the accumulators are allocated to registers).
    let mut rows: [&[i8]; C] = [&[]; C];
    let mut scales: [&[f32]; C] = [&[]; C];
    let mut halves: [&[[i32; 2]]; C] = [&[]; C];
    for c in 0..C {
        rows[c] = x.row_quants(j0 + c);
        scales[c] = x.row_scales(j0 + c);
        halves[c] = x.row_half_sums(j0 + c);
    }
    for (sb, ds_of) in scales_ds.iter().enumerate() {
        for j in 0..SUB_BLOCKS {
            let b = sb * SUB_BLOCKS + j;
            for half in [0, 1] {
                let mut dots = [_mm512_setzero_si512(); C];
                for t in half * 4..half * 4 + 4 {
                    let q = quants.get(sb, j, t);
                    for c in 0..C {
                        // SAFETY: block `b < 8 · scales_ds.len() <= x.blocks()` (the caller's
                        // contract) is 32 bytes, and 4t + 4 <= 32.
                        let y = unsafe { broadcast_four(rows[c].as_ptr().add(b * BLOCK + t * 4)) };
                        dots[c] = _mm512_dpbusd_epi32(dots[c], q, y);
                    }
                }
                let ds = ds_of[2 * j + half];
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
