//! The AVX-512 VNNI path of Q4_K and Q5_K for decode: products of one
//! activation row, one row group at a time (layout in `q4_k.rs`). With one
//! activation row the AVX2 tile is bound by its arithmetic (~160 cycles per
//! row group and super-block, the same in cache as from memory on a Zen 4),
//! not by the weights' stream.
//!
//! Here one 64-byte load holds registers `t` and `t + 1` of a sub-block
//! pair (lanes 0–7 and 8–15: the group's eight rows twice); its low nibbles
//! are sub-block `2p`, its high nibbles `2p + 1`. Against activation bytes
//! `4t..4t + 4` broadcast to lanes 0–7 and `4t + 4..4t + 8` to lanes 8–15,
//! one `vpdpbusd` takes eight values of each row. (Spreading the activations
//! into such registers once per product read 8 bytes per activation value
//! from the L1/L2 per row group: 2.1× slower from memory.) A sub-block's
//! four registers give each lane half of its row's dot (|Σ| ≤ 16·31·127);
//! one `vpmulld` by the scale, in both halves, adds it to `A`, whose halves
//! are added once per super-block. Integers are exact in any order, and `B`
//! and the float step are the AVX2 tile's, so results equal the other paths
//! bit for bit.
//!
//! The same kernel over 2–4 rows were faster alone (one thread, from memory,
//! 2 rows 1.91 against 2.37 ms) but slower in the 1.5B's forward of 2 tokens
//! (36.0–38.9 against 33.5–34.8 ms, three alternated rounds), so several
//! rows keep the AVX2 tiles.

use crate::q4::GROUP;
use crate::q4_k::{nibbles_at, PAIR_BYTES, QH_AT, SUB_BLOCKS};
use crate::super_activations::SuperRow;
use crate::x86_q4::store_group;
use crate::x86_q4_k::{accumulate_super_block, group_super_factors, mins_times_sums};
use crate::x86_q4_k_vnni::fifth_bits;
use crate::x86_vnni::{both_halves, broadcast_eight, fold_halves, read_after};
use crate::{Q4KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q4_k`, for one activation row.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C, and the arguments
/// meet `dispatch::check` with `rows.start` a multiple of 8, `x` holds one
/// row, and the activations hold super-blocks
/// (`dispatch::check_quantization`). Soundness rests on `x.blocks() ==
/// w.blocks()` (the kernel reads the row's quants and run sums through
/// unchecked pointers); weight groups and outputs go through checked slices.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q4_k(w: &Q4KWeights, rows: Range<usize>, x: &Q8Activations, out: &mut [f32]) {
    let (five, row) = (w.five_bit(), x.super_row(0));
    for group in rows.start / GROUP..rows.end.div_ceil(GROUP) {
        // SAFETY: the caller's contract; the layout parameter follows the matrix.
        let lanes = unsafe {
            match five {
                true => group_row::<true>(w, group, &row),
                false => group_row::<false>(w, group, &row),
            }
        };
        store_group(lanes, group * GROUP, &rows, out);
    }
}

/// The two sub-blocks of pair `p` of the group super-block at `data`, four
/// registers each (register `tp`: values `8tp..8tp + 8` of the group's rows,
/// lanes 0–7 the first four, 8–15 the next four).
///
/// # Safety
/// The CPU has AVX-512 F and BW; `data` points at a whole group super-block of
/// a matrix with `FIVE == w.five_bit()`, and `p < 4`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn pair_values<const FIVE: bool>(data: *const u8, p: usize) -> [[__m512i; 4]; 2] {
    let nibble = _mm512_set1_epi8(0x0F);
    let mut values = [[_mm512_setzero_si512(); 4]; 2];
    // Indexed, not zipped: iterating both halves mutably kept `values` on the
    // stack, every loaded register was stored there, and with the stores queued
    // behind their loads one row read Q4_K from memory at a fifth of the speed
    // (16384×4096, one thread on a Zen 4: 5.1–6.0 ms against 1.2).
    #[allow(clippy::needless_range_loop)]
    for tp in 0..4 {
        // SAFETY: pair `p < 4` holds 256 bytes after the nibbles' start, inside the
        // group super-block of this kind (the caller's contract).
        let packed = unsafe { _mm512_loadu_si512(data.add(nibbles_at(FIVE) + p * PAIR_BYTES + tp * 64).cast()) };
        values[0][tp] = _mm512_and_si512(packed, nibble);
        values[1][tp] = _mm512_and_si512(_mm512_srli_epi16::<4>(packed), nibble);
        if FIVE {
            // SAFETY: Q5_K's 256 bytes of qh registers lie after QH_AT.
            let qh = unsafe { _mm512_loadu_si512(data.add(QH_AT + tp * 64).cast()) };
            values[0][tp] = _mm512_or_si512(values[0][tp], fifth_bits(qh, 2 * p));
            values[1][tp] = _mm512_or_si512(values[1][tp], fifth_bits(qh, 2 * p + 1));
        }
    }
    values
}

/// The eight outputs of weight group `group` against the activation row `row`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C; `row` holds
/// super-blocks with `x.blocks() == w.blocks()` (its quants and run sums are
/// read through unchecked pointers), and `FIVE == w.five_bit()` (Q5_K's
/// nibbles start 256 bytes later, so `FIVE` on a Q4_K matrix would read past
/// its group super-blocks). `group` is checked (slicing panics).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn group_row<const FIVE: bool>(w: &Q4KWeights, group: usize, row: &SuperRow<'_>) -> __m256 {
    let low_half = _mm256_set1_epi32(0xFFFF);
    let mut acc = _mm256_setzero_ps();
    for sb in 0..w.supers() {
        // One row streams fast enough for the hardware prefetchers (see `x86::PREFETCH_AHEAD`).
        let (data, factors) = group_super_factors(w, group, sb, false);
        // Reads in address order: the factors, then the pairs one after another.
        let mut data = read_after(data, _mm256_castps_si256(factors.d));
        let mut a = _mm512_setzero_si512();
        for p in 0..SUB_BLOCKS / 2 {
            // SAFETY: a whole group super-block of this kind (the caller's contract), p < 4.
            let values = unsafe { pair_values::<FIVE>(data, p) };
            data = read_after(data, _mm512_castsi512_si256(values[0][0]));
            for (half, values) in values.iter().enumerate() {
                let j = 2 * p + half;
                // The AVX2 factors carry each scale in both 16-bit halves of its lane.
                let scale = both_halves(_mm256_and_si256(factors.scales[j], low_half));
                let mut dot = _mm512_setzero_si512();
                for (tp, q) in values.iter().enumerate() {
                    // SAFETY: block `8sb + j < x.blocks()` (the caller's contract) is 32
                    // bytes of the row's quants, and 8tp + 8 <= 32.
                    let y = unsafe { broadcast_eight(row.quants.as_ptr().add((sb * SUB_BLOCKS + j) * BLOCK + tp * 8)) };
                    dot = _mm512_dpbusd_epi32(dot, *q, y);
                }
                a = _mm512_add_epi32(a, _mm512_mullo_epi32(dot, scale));
            }
        }
        // SAFETY: the row holds `8·w.supers()` run sums of 32 (the caller's contract).
        let b = unsafe { mins_times_sums(&factors, row.sums32.as_ptr(), sb) };
        acc = accumulate_super_block(acc, (fold_halves(a), b), &factors, row.scales[sb]);
    }
    acc
}
