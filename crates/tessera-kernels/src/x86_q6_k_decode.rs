//! The AVX-512 VNNI path of Q6_K for decode: products of one activation
//! row, one row group at a time (layout in `q6_k.rs`), as
//! `x86_q4_k_decode.rs` does for Q4_K.
//!
//! At register position `t` of a chunk, one 64-byte load holds the group's
//! `ql` bytes of sub-blocks 0 and 1 (lanes 0–7 and 8–15; their high
//! nibbles are sub-blocks 2 and 3) and one 32-byte broadcast its `qh` bytes
//! in both halves, whose bit pairs a per-half shift moves into place: two
//! registers of values (0–63) for four sub-blocks. The chunk's activations
//! of sub-blocks 0 and 1 (2 and 3) are one 64-byte register, from which one
//! permute gives each half its four bytes, so one `vpdpbusd` takes four
//! values of each of two sub-blocks. Per run of 16 values the four
//! positions' dots meet the runs' signed scales in one `vpmulld` per pair of
//! sub-blocks; `A`'s halves are added once per super-block, and `B` and the
//! float step are the AVX2 tile's: integers are exact in any order, so
//! results equal the other paths bit for bit.

use crate::q4::GROUP;
use crate::q6_k::{qh_at, ql_at, SCALES_AT, SUB_BLOCKS};
use crate::super_activations::SuperRow;
use crate::x86_q4::store_group;
use crate::x86_q6_k::{accumulate_super_block, run_sums, scale_multipliers};
use crate::x86_vnni::{fold_halves, read_after};
use crate::{Q6KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q6_k`, for one activation row.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C, and the arguments
/// meet `dispatch::check` with `rows.start` a multiple of 8, `x` holds one
/// row, and the activations hold super-blocks
/// (`dispatch::check_quantization`). Soundness rests on `x.blocks() ==
/// w.blocks()` (the kernel reads the row's quants and run sums through
/// unchecked pointers); weight groups and outputs go through checked slices.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q6_k(w: &Q6KWeights, rows: Range<usize>, x: &Q8Activations, out: &mut [f32]) {
    let row = x.super_row(0);
    for group in rows.start / GROUP..rows.end.div_ceil(GROUP) {
        // SAFETY: the caller's contract.
        let lanes = unsafe { group_row(w, group, &row) };
        store_group(lanes, group * GROUP, &rows, out);
    }
}

/// The values (0–63) at register position `t` of chunk `chunk` of the group
/// super-block at `data`: sub-blocks 0 and 1 of the chunk (lanes 0–7 and
/// 8–15), then sub-blocks 2 and 3.
///
/// # Safety
/// The CPU has AVX-512 F and BW; `data` points at a whole Q6_K group
/// super-block, `chunk < 2` and `t < 8`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn position_values(data: *const u8, chunk: usize, t: usize) -> [__m512i; 2] {
    // SAFETY: position `t` of chunk `chunk` holds the two `ql` registers (64 bytes)
    // and then the `qh` register, inside the group super-block (the caller's contract).
    let (ql, qh) = unsafe {
        (
            _mm512_loadu_si512(data.add(ql_at(chunk, 0, t)).cast()),
            _mm512_broadcast_i64x4(_mm256_loadu_si256(data.add(qh_at(chunk, t)).cast())),
        )
    };
    let (nibble, bits) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(0x30));
    // qh bits 0–1 (sub-block 0) and 2–3 (1) moved to bits 4–5, then bits 4–5 (2)
    // and 6–7 (3): 16-bit shifts, what crosses a byte is masked off.
    let up = _mm512_inserti64x4::<1>(_mm512_set1_epi16(4), _mm256_set1_epi16(2));
    let down = _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(2));
    [
        _mm512_or_si512(
            _mm512_and_si512(ql, nibble),
            _mm512_and_si512(_mm512_sllv_epi16(qh, up), bits),
        ),
        _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16::<4>(ql), nibble),
            _mm512_and_si512(_mm512_srlv_epi16(qh, down), bits),
        ),
    ]
}

/// The signed scales of runs `i` (lanes 0–7) and `i + 2` (lanes 8–15) of the
/// group super-block at `data`, as i32.
///
/// # Safety
/// The CPU has AVX-512 F; `data` points at a whole Q6_K group super-block and
/// `i + 2 < 16`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn run_scales(data: *const u8, i: usize) -> __m512i {
    // SAFETY: scales `i` and `i + 2` of the eight rows (8 bytes each) lie inside the
    // group super-block (the caller's contract).
    let (first, second) = unsafe {
        (
            _mm_loadl_epi64(data.add(SCALES_AT + i * GROUP).cast()),
            _mm_loadl_epi64(data.add(SCALES_AT + (i + 2) * GROUP).cast()),
        )
    };
    _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(first, second))
}

/// The eight outputs of weight group `group` against the activation row `row`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C, and `row` holds
/// super-blocks with `x.blocks() == w.blocks()` (its quants and run sums are
/// read through unchecked pointers). `group` is checked (slicing panics).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn group_row(w: &Q6KWeights, group: usize, row: &SuperRow<'_>) -> __m256 {
    let mut acc = _mm256_setzero_ps();
    for sb in 0..w.supers() {
        // One row streams fast enough for the hardware prefetchers (see `x86::PREFETCH_AHEAD`).
        let mut data = w.group_super(group, sb).as_ptr();
        let mut a = _mm512_setzero_si512();
        for chunk in 0..2 {
            for run in 0..2 {
                let mut dots = [_mm512_setzero_si512(); 2];
                for t in 4 * run..4 * run + 4 {
                    // SAFETY: a whole group super-block (a checked slice), chunk < 2, t < 8.
                    let values = unsafe { position_values(data, chunk, t) };
                    // Reads in address order (see `x86_vnni::read_after`).
                    data = read_after(data, _mm512_castsi512_si256(values[0]));
                    let halves = _mm512_inserti64x4::<1>(_mm512_set1_epi32(t as i32), _mm256_set1_epi32(8 + t as i32));
                    // Indexed: see `x86_q4_k_decode::pair_values` on what iterating
                    // register arrays mutably did.
                    #[allow(clippy::needless_range_loop)]
                    for pair in 0..2 {
                        // SAFETY: sub-blocks `8sb + 4chunk + 2pair` and the next are 64 bytes
                        // of the row's quants (block `< w.blocks() == x.blocks()`, the
                        // caller's contract).
                        let y = unsafe {
                            let at = row
                                .quants
                                .as_ptr()
                                .add((sb * SUB_BLOCKS + 4 * chunk + 2 * pair) * BLOCK);
                            _mm512_permutexvar_epi32(halves, _mm512_loadu_si512(at.cast()))
                        };
                        dots[pair] = _mm512_dpbusd_epi32(dots[pair], values[pair], y);
                    }
                }
                // SAFETY: runs `8chunk + run + {0, 2, 4, 6}` < 16; a whole group super-block.
                let scales = unsafe { [run_scales(data, 8 * chunk + run), run_scales(data, 8 * chunk + 4 + run)] };
                let scaled = _mm512_add_epi32(
                    _mm512_mullo_epi32(dots[0], scales[0]),
                    _mm512_mullo_epi32(dots[1], scales[1]),
                );
                a = _mm512_add_epi32(a, scaled);
            }
        }
        // SAFETY: `data` is a whole group super-block starting with eight f16 d.
        let d = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(data.cast())) };
        let mut pairs = [_mm256_setzero_si256(); SUB_BLOCKS];
        for (j, pair) in pairs.iter_mut().enumerate() {
            // SAFETY: `j < 8`; AVX2 is enabled here.
            *pair = unsafe { scale_multipliers(data, j) }.1;
        }
        // SAFETY: the row holds this super-block's run sums (the caller's contract).
        let b = unsafe { run_sums(&pairs, row, sb) };
        acc = accumulate_super_block(acc, (fold_halves(a), b), d, row.scales[sb]);
    }
    acc
}
