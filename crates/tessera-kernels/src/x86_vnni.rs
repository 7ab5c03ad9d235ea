//! What the AVX-512 VNNI prefill kernels share: sixteen weight rows (two
//! adjacent row groups) in the sixteen 32-bit lanes of a register, so one
//! `vpdpbusd` multiplies four bytes of each of sixteen rows by the same four
//! activation bytes, broadcast from memory; up to [`TILE`] activation rows
//! share each unpacked weight register. The integer sums are exact whatever
//! their order, and each lane then takes the AVX2 kernels' float steps for its
//! row in the same order, so results are equal bit for bit.

use crate::Q8Activations;
use std::arch::x86_64::*;
use std::ops::Range;

/// Activation rows per tile (three accumulators each stay in registers).
pub(crate) const TILE: usize = 8;

/// 32 bytes at `lower` in lanes 0–7 and 32 bytes at `upper` in lanes 8–15.
///
/// # Safety
/// The CPU has AVX-512 F; `lower` and `upper` each point at 32 readable bytes
/// (no alignment needed).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn join_loads(lower: *const u8, upper: *const u8) -> __m512i {
    // SAFETY: both 32-byte loads are the caller's readable bytes.
    unsafe {
        _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(_mm256_loadu_si256(lower.cast())),
            _mm256_loadu_si256(upper.cast()),
        )
    }
}

/// Eight f32 lanes of the lower group and eight of the upper one.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn join_ps(lower: __m256, upper: __m256) -> __m512 {
    let joined = _mm512_insertf64x4::<1>(_mm512_castpd256_pd512(_mm256_castps_pd(lower)), _mm256_castps_pd(upper));
    _mm512_castpd_ps(joined)
}

/// Eight i32 lanes of the lower group and eight of the upper one.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn join_si(lower: __m256i, upper: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lower), upper)
}

/// Four activation bytes at `at`, in every lane.
///
/// # Safety
/// The CPU has AVX-512 F; `at` points at 4 readable bytes (no alignment needed).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn broadcast_four(at: *const i8) -> __m512i {
    // SAFETY: an unaligned read of the caller's 4 readable bytes.
    _mm512_set1_epi32(unsafe { at.cast::<i32>().read_unaligned() })
}

/// The same eight i32 lanes in both halves.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn both_halves(lanes: __m256i) -> __m512i {
    _mm512_broadcast_i64x4(lanes)
}

/// Lanes 0–7 plus lanes 8–15.
#[target_feature(enable = "avx512f,avx2")]
#[inline]
pub(crate) fn fold_halves(lanes: __m512i) -> __m256i {
    _mm256_add_epi32(_mm512_castsi512_si256(lanes), _mm512_extracti64x4_epi64::<1>(lanes))
}

/// Activation bytes `at..at + 4` in lanes 0–7 and `at + 4..at + 8` in lanes
/// 8–15 (one 8-byte load, one permute).
///
/// # Safety
/// The CPU has AVX-512 F; `at` points at 8 readable bytes (no alignment needed).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn broadcast_eight(at: *const i8) -> __m512i {
    let halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    // SAFETY: an unaligned 8-byte read of the caller's readable bytes.
    let eight = unsafe { _mm_loadl_epi64(at.cast()) };
    _mm512_permutexvar_epi32(halves, _mm512_castsi128_si512(eight))
}

/// `data`, tied to `loaded` (a value read through it): the compiler cannot
/// move a later read through the returned pointer before the read of
/// `loaded`, so one row's reads of a group super-block stay in address
/// order. The hardware prefetchers follow ascending reads; a build whose
/// scheduler read each super-block's sub-block pairs from the last to the
/// first streamed Q4_K from memory at a fifth of the speed (one row,
/// 16384×4096, one thread on a Zen 4: 6.2 ms against 1.2). The template is
/// empty: nothing runs, and nothing waits for the read to complete.
#[target_feature(enable = "avx")]
#[inline]
pub(crate) fn read_after(data: *const u8, loaded: __m256i) -> *const u8 {
    let mut after = data;
    // SAFETY: an empty template: it reads and writes nothing (the pointer only
    // passes through a register).
    #[allow(clippy::pointers_in_nomem_asm_block)]
    unsafe {
        std::arch::asm!(
            "/* {0} {1} */",
            in(ymm_reg) loaded,
            inout(reg) after,
            options(pure, nomem, nostack, preserves_flags)
        )
    };
    after
}

/// A pair of row groups' values unpacked to one byte each, laid out as the
/// tiles read them: register `t` (0–7) of sub-block `j` (0–7) of super-block
/// `sb`, lane `r` = row `r`'s values `4t..4t + 4` of the sub-block. Filled once
/// per chunk and pair, read by every tile of it (a packed GEMM operand).
pub(crate) struct PairQuants(Vec<__m512i>);

impl PairQuants {
    /// Room for `supers` super-blocks.
    pub(crate) fn new(supers: usize) -> Self {
        // SAFETY: all-zero bits are a valid __m512i.
        Self(vec![unsafe { std::mem::zeroed() }; supers * 64])
    }

    /// Store register `t` of sub-block `j` of super-block `sb`.
    #[inline]
    pub(crate) fn set(&mut self, sb: usize, j: usize, t: usize, value: __m512i) {
        self.0[sb * 64 + j * 8 + t] = value;
    }

    /// Register `t` of sub-block `j` of super-block `sb`.
    #[inline]
    pub(crate) fn get(&self, sb: usize, j: usize, t: usize) -> __m512i {
        self.0[sb * 64 + j * 8 + t]
    }
}

/// Which run sums of the activations a tile reads: one per 16 values (Q6_K's
/// scales) or one per 32 (Q4_K's and Q5_K's mins).
#[derive(Clone, Copy)]
pub(crate) enum RunSums {
    Sixteen,
    ThirtyTwo,
}

/// Activation rows `j0..j0 + C` of a tile, as the VNNI tiles read them: each
/// row's super-block quants and run sums from their first element (read
/// through unchecked pointers: the tiles' contracts bound the offsets), and
/// its scales.
pub(crate) struct TileRows<'a, const C: usize> {
    pub(crate) quants: [*const i8; C],
    pub(crate) sums: [*const i16; C],
    pub(crate) scales: [&'a [f32]; C],
}

impl<'a, const C: usize> TileRows<'a, C> {
    /// The rows of `x` from `j0` (checked: slicing panics past `x.rows()`).
    #[inline(always)]
    pub(crate) fn new(x: &'a Q8Activations, j0: usize, runs: RunSums) -> Self {
        // Filled in a plain loop: `std::array::from_fn` made the 32-block tile 60%
        // slower (it changes how the accumulators are allocated to registers).
        let mut rows = Self {
            quants: [std::ptr::null(); C],
            sums: [std::ptr::null(); C],
            scales: [&[]; C],
        };
        for c in 0..C {
            let row = x.super_row(j0 + c);
            rows.quants[c] = row.quants.as_ptr();
            rows.sums[c] = match runs {
                RunSums::Sixteen => row.sums16.as_ptr(),
                RunSums::ThirtyTwo => row.sums32.as_ptr(),
            };
            rows.scales[c] = row.scales;
        }
        rows
    }
}

/// `C` results widened to [`TILE`] (the rest unused).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn pad<const C: usize>(sums: [__m512; C]) -> [__m512; TILE] {
    let mut all = [_mm512_setzero_ps(); TILE];
    all[..C].copy_from_slice(&sums);
    all
}

/// Store the lanes of rows `first..first + live` (`live` ≤ 16) that lie in
/// `rows` into `out_row[r − rows.start]`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store_rows(lanes: __m512, first: usize, live: usize, rows: &Range<usize>, out_row: &mut [f32]) {
    let at = first - rows.start;
    let live = live.min(rows.end - first);
    if live == 16 {
        // SAFETY: `check` guaranteed `out_row` holds `rows.len()` outputs, and `at + 16 <= rows.len()`.
        unsafe { _mm512_storeu_ps(out_row[at..at + 16].as_mut_ptr(), lanes) };
        return;
    }
    let mut values = [0f32; 16];
    // SAFETY: `values` holds 16 f32.
    unsafe { _mm512_storeu_ps(values.as_mut_ptr(), lanes) };
    out_row[at..at + live].copy_from_slice(&values[..live]);
}

/// Activation bytes a chunk of rows may span: each chunk re-prepares every
/// pair (unpacked weights and factors), so chunks are as large as the caches
/// allow (1.5 MB: a prefill task's 128 rows of Qwen2.5-1.5B's 8,960-wide
/// `ffn_down` input in one chunk; 384 KB cost a tenth of the prefill in
/// re-preparation).
const CHUNK_BYTES: usize = 1536 * 1024;

/// Activation rows per chunk for rows of `blocks` blocks: a multiple of [`TILE`].
pub(crate) fn chunk_rows(blocks: usize) -> usize {
    (CHUNK_BYTES / (blocks * 32).max(1) / TILE).max(1) * TILE
}

/// The loop nest of the VNNI kernels: activation rows in chunks of
/// [`chunk_rows`], then pairs of weight groups (a last odd
/// group pairs with itself and only its lower lanes are stored), then tiles
/// of up to [`TILE`] activation rows. `$prepare!(pair)` runs once per chunk and
/// pair (per-row factors every tile of the pair reads), `$tile!(C, pair, j)`
/// computes a tile of `C` activation rows as `[__m512; C]` (local macros, so
/// that everything inlines under the caller's `target_feature`).
macro_rules! for_each_pair_tile {
    ($rows:expr, $x:expr, $out:expr, $stride:expr, $prepare:ident, $tile:ident) => {{
        use $crate::x86_vnni::{pad, store_rows, TILE};
        let rows: &std::ops::Range<usize> = &$rows;
        let groups = rows.start / GROUP..rows.end.div_ceil(GROUP);
        let n = $x.rows();
        let chunk_rows = $crate::x86_vnni::chunk_rows($x.blocks());
        for chunk in (0..n).step_by(chunk_rows) {
            let chunk_end = (chunk + chunk_rows).min(n);
            for lower in groups.clone().step_by(2) {
                let (upper, live) = if lower + 1 < groups.end {
                    (lower + 1, 2 * GROUP)
                } else {
                    (lower, GROUP)
                };
                let pair = [lower, upper];
                // The packed tiles prepare nothing (then the block is empty).
                #[allow(unused_unsafe)]
                // SAFETY: the enclosing kernel enables the preparation's target features,
                // and its contract is the preparation's (const layout parameters that
                // match `w`); the groups are checked (slicing panics).
                unsafe {
                    $prepare!(pair)
                };
                let mut j = chunk;
                while j < chunk_end {
                    let width = (chunk_end - j).min(TILE);
                    // SAFETY: the enclosing kernel enables the tile's target features and its
                    // contract gives `x.blocks() == w.blocks()`; `j + width <= n`; the pair
                    // was prepared just above.
                    let sums = unsafe {
                        match width {
                            8 => $tile!(8, pair, j),
                            7 => pad($tile!(7, pair, j)),
                            6 => pad($tile!(6, pair, j)),
                            5 => pad($tile!(5, pair, j)),
                            4 => pad($tile!(4, pair, j)),
                            3 => pad($tile!(3, pair, j)),
                            2 => pad($tile!(2, pair, j)),
                            _ => pad($tile!(1, pair, j)),
                        }
                    };
                    for (c, lanes) in sums.iter().take(width).enumerate() {
                        store_rows(*lanes, lower * GROUP, live, rows, &mut $out[(j + c) * $stride..]);
                    }
                    j += width;
                }
            }
        }
    }};
}
pub(crate) use for_each_pair_tile;
