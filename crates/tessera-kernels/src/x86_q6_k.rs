//! The AVX2+FMA+F16C path of Q6_K at GGML's bytes (layout in `q6_k.rs`):
//! eight weight rows (a group) in the eight lanes of a register, up to eight
//! activation rows at a time (four where the values are unpacked once per
//! group, from 16 rows), against super-block activations (one scale per 256
//! values). Per run of 16 values its four registers are rebuilt from `ql`
//! and `qh` with masks and shifts, once for every row of the tile, and each
//! row's products then taken in turn (8 rows of 3072×768 in L3, one thread on
//! a Zen 4 EPYC running AVX2 code: 371 µs as two tiles of 4, 242 µs so);
//! two `maddubs` results per run of 8 values (|Σ| ≤ 2·2·63·127 < 2¹⁵) meet
//! the run's signed scale in one `madd`, into the super-block's 32-bit sum
//! `A`; the scales meet the activations' run sums in eight more `madd`s
//! (`B`); then the portable `dot_q6_k`'s one float step per super-block,
//! lane by lane.

use crate::q6_k::{qh_at, ql_at, GROUP, SCALES_AT, SUB_BLOCKS};
use crate::super_activations::SuperRow;
use crate::x86::{k_quant_tile_prefetches, prefetch_ahead};
use crate::x86_q4::for_each_group_tile;
use crate::{Q6KWeights, Q8Activations, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// See `portable::matmul_q6_k`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and the arguments meet `dispatch::check`
/// with `rows.start` a multiple of 8, and the activations hold super-blocks
/// (`dispatch::check_quantization`). Soundness rests on `x.blocks() ==
/// w.blocks()` (the tiles read the activations' super-block quants and run
/// sums through unchecked pointers); weight groups and outputs go through
/// checked slices.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn matmul_q6_k(
    w: &Q6KWeights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) {
    if x.rows() < UNPACK_MIN_ROWS {
        // A tile of `C` activation rows at (`group`, `j`), rebuilding the values.
        macro_rules! tile {
            ($c:literal, $group:expr, $j:expr) => {
                group_tile::<$c, false>(w, $group, &[], x, $j)
            };
        }
        for_each_group_tile!(rows, x, out, stride, tile, 8);
        return;
    }
    let mut values = vec![_mm256_setzero_si256(); w.supers() * SUB_BLOCKS * 8];
    macro_rules! prepare {
        ($group:expr) => {
            unpack_group(w, $group, &mut values)
        };
    }
    // A tile of `C` activation rows at (`group`, `j`), reading the unpacked values.
    macro_rules! tile {
        ($c:literal, $group:expr, $j:expr) => {
            group_tile::<$c, true>(w, $group, &values, x, $j)
        };
    }
    for_each_group_tile!(rows, x, out, stride, prepare, tile);
}

/// Activation rows from which a product rebuilds each group's 6-bit values
/// once per chunk of activation rows, for all its tiles, instead of once per
/// tile: the rebuild was 45% of a 512-row product on one thread (3072×768 in
/// L3, a Zen 4 EPYC running AVX2 code: 22.9 ms, 12.7 without it).
const UNPACK_MIN_ROWS: usize = 16;

/// Every value register of group `group`: register `t` of sub-block `j` of
/// super-block `sb` at `values[(sb·8 + j)·8 + t]`.
///
/// # Safety
/// The CPU has AVX2. (The group and `values`' size are checked: slicing and
/// indexing panic.)
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn unpack_group(w: &Q6KWeights, group: usize, values: &mut [__m256i]) {
    for sb in 0..w.supers() {
        let data = w.group_super(group, sb).as_ptr();
        for j in 0..SUB_BLOCKS {
            for t in 0..8 {
                // SAFETY: `data` is a whole group super-block (a checked slice); j / 4 < 2,
                // t < 8; AVX2 is enabled here.
                values[(sb * SUB_BLOCKS + j) * 8 + t] = unsafe { sub_block_quants(data, j / 4, j % 4, t) };
            }
        }
    }
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

/// The signed scales of runs `2j` and `2j + 1` of each row of the group
/// super-block at `data`, as `madd` multipliers: each run's scale in both
/// 16-bit halves of the row's 32-bit lane, and both scales as the lane's two
/// halves (for the activations' run sums).
///
/// # Safety
/// The CPU has AVX2; `data` points at a whole Q6_K group super-block and
/// `j < 8` (the 16 bytes at `SCALES_AT + 16j` are loaded).
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn scale_multipliers(data: *const u8, j: usize) -> ([__m256i; 2], __m256i) {
    // SAFETY: the 16 bytes (scales 2j and 2j + 1 of the eight rows) lie inside the
    // group super-block (the caller's contract).
    let both = unsafe { _mm_loadu_si128(data.add(SCALES_AT + 2 * j * GROUP).cast()) };
    let odd = _mm_srli_si128(both, 8);
    (
        [
            _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(both, both)),
            _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(odd, odd)),
        ],
        _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(both, odd)),
    )
}

/// `Σ_j madd(pairs[j], run sums 2j, 2j + 1 of super-block `sb`)`: each row's
/// `B = Σ_i scale_i·Σy` over the super-block's sixteen runs.
///
/// # Safety
/// The CPU has AVX2; `row` holds run sums `0..16·(sb + 1)` (one per 16
/// activation values: the tiles' contract).
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn run_sums(pairs: &[__m256i; SUB_BLOCKS], row: &SuperRow<'_>, sb: usize) -> __m256i {
    let mut b = _mm256_setzero_si256();
    for (j, pair) in pairs.iter().enumerate() {
        // SAFETY: run sums `16·sb + 2j + 1 < 16·(sb + 1)` lie inside the row's `sums16`.
        let sums = unsafe {
            let at = row.sums16.as_ptr().add(2 * (sb * SUB_BLOCKS + j));
            _mm256_set1_epi32(at.cast::<i32>().read_unaligned())
        };
        b = _mm256_add_epi32(b, _mm256_madd_epi16(*pair, sums));
    }
    b
}

/// `acc + (A − 32·B)·(d·D)` lane by lane: the portable `dot_q6_k`'s float
/// step for one super-block.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn accumulate_super_block(acc: __m256, (a, b): (__m256i, __m256i), d: __m256, dy: f32) -> __m256 {
    let centred = _mm256_sub_epi32(a, _mm256_slli_epi32(b, 5));
    _mm256_add_ps(
        acc,
        _mm256_mul_ps(_mm256_cvtepi32_ps(centred), _mm256_mul_ps(d, _mm256_set1_ps(dy))),
    )
}

/// [`group_tile`] for one activation row (decode): all four sub-blocks of a
/// chunk's register position are rebuilt from one set of loads. Integer sums
/// do not depend on their order, so the results equal the tile's.
///
/// # Safety
/// As [`group_tile`].
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn single_row(w: &Q6KWeights, group: usize, x: &Q8Activations, j0: usize, prefetch: bool) -> __m256 {
    let row = x.super_row(j0);
    let mut acc = _mm256_setzero_ps();
    for sb in 0..w.supers() {
        let block = w.group_super(group, sb);
        if prefetch {
            prefetch_ahead(block.as_ptr(), block.len());
        }
        let data = block.as_ptr();
        // SAFETY: `data` is a whole group super-block (a checked slice), which starts
        // with eight f16 d.
        let d = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(data.cast())) };
        let mut multipliers = [[_mm256_setzero_si256(); 2]; SUB_BLOCKS];
        let mut pairs = [_mm256_setzero_si256(); SUB_BLOCKS];
        for j in 0..SUB_BLOCKS {
            // SAFETY: `j < 8`; AVX2 is enabled here.
            (multipliers[j], pairs[j]) = unsafe { scale_multipliers(data, j) };
        }
        let mut a = _mm256_setzero_si256();
        for chunk in 0..2 {
            for t in [0, 2, 4, 6] {
                // SAFETY: registers `t + 1 < 8` of chunk `chunk < 2` lie inside the group
                // super-block; AVX2 is enabled here.
                let (q0, q1) = unsafe { (register_quants(data, chunk, t), register_quants(data, chunk, t + 1)) };
                for k in 0..4 {
                    let block = sb * SUB_BLOCKS + chunk * 4 + k;
                    // SAFETY: activation block `block < w.blocks() == x.blocks()` (the
                    // caller's contract) is 32 bytes of the row's super-block quants, and
                    // 4t + 8 <= 32.
                    let (y0, y1) = unsafe {
                        let y = row.quants.as_ptr().add(block * BLOCK + t * 4);
                        (
                            _mm256_set1_epi32(y.cast::<i32>().read_unaligned()),
                            _mm256_set1_epi32(y.add(4).cast::<i32>().read_unaligned()),
                        )
                    };
                    let products = _mm256_add_epi16(_mm256_maddubs_epi16(q0[k], y0), _mm256_maddubs_epi16(q1[k], y1));
                    a = _mm256_add_epi32(a, _mm256_madd_epi16(products, multipliers[chunk * 4 + k][t / 4]));
                }
            }
        }
        // SAFETY: the row holds this super-block's run sums (the caller's contract).
        let b = unsafe { run_sums(&pairs, &row, sb) };
        acc = accumulate_super_block(acc, (a, b), d, row.scales[sb]);
    }
    acc
}

/// The quants (0–63) of sub-blocks 0–3 of a chunk at register position `t`
/// of the group super-block at `data`, from its two `ql` registers and its
/// `qh` register.
///
/// # Safety
/// The CPU has AVX2; `data` points at a whole Q6_K group super-block and
/// `chunk < 2`, `t < 8` (the 32-byte registers at `ql_at(chunk, 0..2, t)`
/// and `qh_at(chunk, t)` are loaded).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn register_quants(data: *const u8, chunk: usize, t: usize) -> [__m256i; 4] {
    // SAFETY: the three registers lie inside the group super-block (the caller's contract).
    let (ql0, ql1, qh) = unsafe {
        (
            _mm256_loadu_si256(data.add(ql_at(chunk, 0, t)).cast()),
            _mm256_loadu_si256(data.add(ql_at(chunk, 1, t)).cast()),
            _mm256_loadu_si256(data.add(qh_at(chunk, t)).cast()),
        )
    };
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
        _mm256_and_si256(ql0, nibble),
        _mm256_and_si256(ql1, nibble),
        _mm256_and_si256(_mm256_srli_epi16(ql0, 4), nibble),
        _mm256_and_si256(_mm256_srli_epi16(ql1, 4), nibble),
    ];
    [
        _mm256_or_si256(low[0], high[0]),
        _mm256_or_si256(low[1], high[1]),
        _mm256_or_si256(low[2], high[2]),
        _mm256_or_si256(low[3], high[3]),
    ]
}

/// The eight outputs of weight group `group` against activation rows `j0..j0 + C`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and the activations hold super-blocks
/// (`dispatch::check_quantization`) with `x.blocks() == w.blocks()` (their
/// quants and run sums are read through unchecked pointers). With
/// `UNPACKED`, the values come from `values` (the group's registers, see
/// [`unpack_group`]), else they are rebuilt from the packed bytes. `group`,
/// `values` and `j0 + C <= x.rows()` are checked (slicing and indexing panic).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn group_tile<const C: usize, const UNPACKED: bool>(
    w: &Q6KWeights,
    group: usize,
    values: &[__m256i],
    x: &Q8Activations,
    j0: usize,
) -> [__m256; C] {
    let mut acc = [_mm256_setzero_ps(); C];
    if C == 1 {
        // SAFETY: the caller's contract is `single_row`'s.
        acc[0] = unsafe { single_row(w, group, x, j0, k_quant_tile_prefetches(x.rows())) };
        return acc;
    }
    // Filled in a loop (see `x86_q4_k::group_tile`).
    let mut rows: [SuperRow<'_>; C] = [x.super_row(j0); C];
    for (c, row) in rows.iter_mut().enumerate().skip(1) {
        *row = x.super_row(j0 + c);
    }
    // Unpacked values were read by one pass over the group (`unpack_group`).
    let (group_bytes, prefetch) = (
        w.group_super(group, 0).len(),
        !UNPACKED && k_quant_tile_prefetches(x.rows()),
    );
    for sb in 0..w.supers() {
        let data = w.group_super(group, sb).as_ptr();
        if prefetch {
            prefetch_ahead(data, group_bytes);
        }
        // SAFETY: `data` is a whole group super-block (a checked slice), which starts
        // with eight f16 d.
        let d = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(data.cast())) };
        let mut a = [_mm256_setzero_si256(); C];
        let mut pairs = [_mm256_setzero_si256(); SUB_BLOCKS];
        for (j, pair) in pairs.iter_mut().enumerate() {
            let (chunk, k, block) = (j / 4, j % 4, sb * SUB_BLOCKS + j);
            // SAFETY: `j < 8`; AVX2 is enabled here.
            let (multipliers, both) = unsafe { scale_multipliers(data, j) };
            *pair = both;
            for (half, multiplier) in multipliers.into_iter().enumerate() {
                // The run's four value registers first, then each row's products in
                // turn (no accumulator per row beyond its `A`).
                let mut q = [_mm256_setzero_si256(); 4];
                for (i, q) in q.iter_mut().enumerate() {
                    let t = half * 4 + i;
                    *q = match UNPACKED {
                        true => values[(sb * SUB_BLOCKS + j) * 8 + t],
                        // SAFETY: register `t < 8` of chunk `chunk < 2` lies inside the group
                        // super-block; AVX2 is enabled here.
                        false => unsafe { sub_block_quants(data, chunk, k, t) },
                    };
                }
                for (a, row) in a.iter_mut().zip(&rows) {
                    // SAFETY: activation block `block < w.blocks() == x.blocks()` (the
                    // caller's contract) is 32 bytes of the row's super-block quants, and
                    // the run's 16 bytes start at 16·half.
                    let y = unsafe { row.quants.as_ptr().add(block * BLOCK + half * 16) };
                    for pair in 0..2 {
                        // SAFETY: bytes 8·pair..8·pair + 8 of the run's 16.
                        let (y0, y1) = unsafe {
                            (
                                _mm256_set1_epi32(y.add(8 * pair).cast::<i32>().read_unaligned()),
                                _mm256_set1_epi32(y.add(8 * pair + 4).cast::<i32>().read_unaligned()),
                            )
                        };
                        let products = _mm256_add_epi16(
                            _mm256_maddubs_epi16(q[2 * pair], y0),
                            _mm256_maddubs_epi16(q[2 * pair + 1], y1),
                        );
                        *a = _mm256_add_epi32(*a, _mm256_madd_epi16(products, multiplier));
                    }
                }
            }
        }
        for c in 0..C {
            // SAFETY: each row holds this super-block's run sums (the caller's contract).
            let b = unsafe { run_sums(&pairs, &rows[c], sb) };
            acc[c] = accumulate_super_block(acc[c], (a[c], b), d, rows[c].scales[sb]);
        }
    }
    acc
}
