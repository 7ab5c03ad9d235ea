//! The phased builds of `attend_body!` for f16 K/V with heads of 64 or 128
//! dimensions, up to three query heads of a GQA group at a time: this file's
//! AVX-512 build and [`avx2`]'s.
//!
//! The AVX-512 build: a tile that
//! more than three such passes read (a prefill chunk's rows) is widened to
//! `f32` once for all of them; a decode row's passes widen each K and V row
//! as they load it (16 halves per `vcvtph2ps`, which costs the FMAs issue
//! slots: a 4-key score step ran at ~65% of the FMA peak on halves, ~100% on
//! floats). 16-lane FMAs cover what the AVX2 build does in two 8-lane
//! accumulators (lanes 0–7 of a register are its `acc0`, lanes 8–15 its
//! `acc1`), so every score and every accumulator element takes the same
//! operations in the same order: the same bits as the other builds. The
//! heads' accumulators stay in registers across a tile's V rows.

// Register tiles are indexed by key, head and lane group at once.
#![allow(clippy::needless_range_loop)]

use super::{AttendItem, AttentionSeq, WorkItem};
use crate::kv_cache::KvLayout;
use half::f16;
use std::arch::x86_64::*;
use std::cell::RefCell;

/// The online-softmax step of a row's lanes (`$lanes` of `$scratch`, each
/// over its first `$visible` scores; `$states`: the item's `[max, sum, acc]`
/// per lane, `$state_len` floats apart): each lane's new running max and the
/// rescale of what it summed and accumulated so far, then every lane's
/// weights by `$exp(scores, max, weights)` (the sums' additions come in
/// [`Lanes::add_sums`]). A macro, expanded in each build's tile loop: as a
/// function beside `Lanes`, the AVX-512 `exp` stopped inlining (the bench
/// 12.2 → 13.8 ms).
macro_rules! softmax_step {
    ($scratch:expr, $lanes:expr, $visible:expr, $states:expr, $state_len:expr, $exp:expr) => {{
        let (scratch, lanes, visible, states, state_len): (
            &mut Lanes,
            std::ops::Range<usize>,
            usize,
            &mut [f32],
            usize,
        ) = ($scratch, $lanes, $visible, $states, $state_len);
        for lane in lanes.clone() {
            let state = &mut states[lane * state_len..][..2];
            let scores = &scratch.scores[lane * scratch.stride..][..visible];
            // SAFETY: the build's features are enabled here; `max` takes any length.
            let tile_max = unsafe { crate::attention::tile::avx2::max(scores) };
            let new_max = state[0].max(tile_max);
            // `exp(0) = 1`: most tiles leave the running max where it was.
            let rescale = match state[0] == new_max {
                true => 1.0,
                false => (state[0] - new_max).exp(),
            };
            if rescale != 1.0 {
                state[1] *= rescale;
            }
            state[0] = new_max;
            scratch.rescales[lane] = rescale;
        }
        for lane in lanes {
            let scores = &scratch.scores[lane * scratch.stride..][..visible];
            let weights = &mut scratch.weights[lane * scratch.stride..][..visible];
            ($exp)(scores, states[lane * state_len], weights);
        }
    }};
}
use softmax_step;

pub(super) mod avx2;
mod lanes;
use lanes::{Lanes, WideTile};

thread_local! {
    /// A work item's lanes and widened tile: reused, items are many and short.
    static SCRATCH: RefCell<(Lanes, WideTile)> = RefCell::new(Default::default());
}

/// Whether the phased builds cover heads of `dim` dimensions.
pub(super) fn covers(dim: usize) -> bool {
    dim == 64 || dim == 128
}

/// See `attend_range`, for f16 K/V and a head size [`covers`] accepts.
///
/// # Safety
/// The CPU has AVX2, FMA, F16C and AVX-512 F, and `covers(layout.head_dim)`:
/// the tiles read and write whole 64- or 128-wide heads through unchecked
/// pointers. (Everything else is reached through checked slices.)
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
pub(super) unsafe fn attend_f16(at: &AttendItem<'_, '_>, keys: &[f16], values: &[f16], partial: &mut [f32]) {
    let tiles = Tiles::new(at, keys, values);
    with_scratch(at, partial.len(), |lanes, wide| {
        // SAFETY: the caller's contract; `D · 16` is the head size (64 or 128, `covers`).
        unsafe {
            match at.layout.head_dim {
                64 => tiles.run::<4>(partial, lanes, wide),
                _ => tiles.run::<8>(partial, lanes, wide),
            }
        }
    })
}

/// `run` on this thread's scratch, with room for the item `at`'s lanes
/// (its states: `partial_len` floats) and tiles.
fn with_scratch(at: &AttendItem<'_, '_>, partial_len: usize, run: impl FnOnce(&mut Lanes, &mut WideTile)) {
    SCRATCH.with_borrow_mut(|(lanes, wide)| {
        let rows = at.item.rows.1;
        let group = partial_len / (rows * (at.layout.head_dim + 2));
        let tile = at.layout.block_size.min(MAX_TILE);
        lanes.prepare(rows * group, tile);
        wide.prepare(tile * at.layout.head_dim);
        run(lanes, wide)
    })
}

/// One work item's inputs.
struct Tiles<'s, 'a> {
    scale: f32,
    layout: KvLayout,
    seq: &'s AttentionSeq<'a>,
    item: WorkItem,
    q: &'s [f32],
    keys: &'s [f16],
    values: &'s [f16],
}

impl<'s, 'a> Tiles<'s, 'a> {
    /// The item `at` over the pools `keys` and `values`.
    fn new(at: &AttendItem<'s, 'a>, keys: &'s [f16], values: &'s [f16]) -> Self {
        let AttendItem {
            scale,
            layout,
            seq,
            item,
            q,
        } = *at;
        Self {
            scale,
            layout,
            seq,
            item,
            q,
            keys,
            values,
        }
    }

    /// Every lane's state before the first tile: max −∞, sum and accumulator 0.
    fn start(&self, partial: &mut [f32]) {
        partial.fill(0.0);
        for state in partial.chunks_exact_mut(self.layout.head_dim + 2) {
            state[0] = f32::NEG_INFINITY;
        }
    }

    /// The tile starting at `key`: its keys (up to the block's end, the
    /// item's and [`MAX_TILE`]) and the offset of its first K/V row in the pools.
    fn tile_at(&self, key: usize) -> (usize, usize) {
        let (dim, bs) = (self.layout.head_dim, self.layout.block_size);
        let block = self.seq.blocks[key / bs];
        let first_slot = key % bs;
        let slots = (bs - first_slot).min(self.item.keys.1 - key).min(MAX_TILE);
        (
            slots,
            self.layout.tile_offset(block, self.item.kv_head) + first_slot * dim,
        )
    }

    /// Which rows see the tile of `slots` keys at `key`, and how many of
    /// its keys each does. Query `i` of the sequence sees keys up to its own
    /// position, `first_pos + i`: rows before the first returned end before
    /// this tile; the others see it up to their own end.
    fn seeing(&self, key: usize, slots: usize) -> (usize, impl Fn(usize) -> usize) {
        let first_pos = self.seq.first_pos + self.item.rows.0;
        (key.saturating_sub(first_pos), move |r: usize| {
            slots.min(first_pos + r + 1 - key)
        })
    }

    /// The online softmax over the item's keys (`D`: registers of 16 per head).
    ///
    /// Each tile runs in phases over every (row, head) lane of the item that
    /// sees it: all scores, then each row's maxes, rescales and `exp`s, then
    /// the running sums (a row's lanes side by side), then the V rows. A
    /// lane's arithmetic and its order are what one head alone would do; the
    /// phases only hand the CPU independent lanes to overlap (a lane's sum is
    /// a chain of dependent additions, its `exp` waits on its max).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA, F16C and AVX-512 F, and `D · 16 ==
    /// layout.head_dim` (what [`scaled_dots`] and [`accumulate_rows`] need
    /// of the heads and states sliced here).
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    unsafe fn run<const D: usize>(&self, partial: &mut [f32], lanes: &mut Lanes, wide: &mut WideTile) {
        let (dim, bs) = (self.layout.head_dim, self.layout.block_size);
        let rows = self.item.rows.1;
        let group = partial.len() / (rows * (dim + 2));
        self.start(partial);
        let table = super::tile::avx512::load_table();
        let (mut key, end) = self.item.keys;
        while key < end {
            let (slots, tile) = self.tile_at(key);
            let (k_tile, v_tile) = (
                &self.keys[tile..tile + slots * dim],
                &self.values[tile..tile + slots * dim],
            );
            if key + slots < end {
                self.prefetch_tile(key + slots, (end - key - slots).min(bs));
            }
            let (first_seeing, visible) = self.seeing(key, slots);
            // Widened once, a tile serves every pass over it (three heads of a
            // row each); a decode row's two or three read it from the pool.
            let passes = (rows - first_seeing) * group.div_ceil(3);
            if passes > 3 {
                // SAFETY: the features are enabled; the tile holds `slots · dim` halves
                // (a multiple of 16), `slots <= MAX_TILE`, what `prepare` made room for.
                unsafe { wide.widen(k_tile, v_tile) };
                let (k_wide, v_wide) = (&wide.keys[..slots * dim], &wide.values[..slots * dim]);
                // SAFETY: the caller's contract (`D · 16 == dim`); every row sees at
                // most `slots <= MAX_TILE` keys of the tile.
                unsafe { self.tile::<f32, D>(lanes, partial, table, (k_wide, v_wide), first_seeing, &visible) };
            } else {
                // SAFETY: as above.
                unsafe { self.tile::<f16, D>(lanes, partial, table, (k_tile, v_tile), first_seeing, &visible) };
            }
            key += slots;
        }
    }

    /// One tile (`kv`: its K and V rows) for the rows `first_seeing..` of
    /// the item (row `r` sees `visible(r)` of its keys), in phases.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA, F16C and AVX-512 F; `D · 16 == layout.head_dim`;
    /// `visible(r) <= lanes.stride` for every row.
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    #[inline]
    unsafe fn tile<E: Element, const D: usize>(
        &self,
        lanes: &mut Lanes,
        partial: &mut [f32],
        table: super::tile::avx512::Table,
        (k_tile, v_tile): (&[E], &[E]),
        first_seeing: usize,
        visible: &impl Fn(usize) -> usize,
    ) {
        let dim = self.layout.head_dim;
        let rows = self.item.rows.1;
        let group = partial.len() / (rows * (dim + 2));
        // SAFETY: the caller's contract.
        unsafe { self.tile_scores::<E, D>(lanes, k_tile, group, first_seeing..rows, visible) };
        for r in first_seeing..rows {
            softmax_step!(
                lanes,
                r * group..(r + 1) * group,
                visible(r),
                partial,
                dim + 2,
                |scores: &[f32], max: f32, weights: &mut [f32]| {
                    super::tile::avx512::exp_shifted_with(table, scores, max, weights)
                }
            );
        }
        lanes.add_sums(partial, dim + 2, group, first_seeing..rows, visible);
        for r in first_seeing..rows {
            let v = &v_tile[..visible(r) * dim];
            let mut g = 0;
            while g < group {
                let heads = heads_per_step(group - g);
                let lane = r * group + g;
                let states = &mut partial[lane * (dim + 2)..][..heads * (dim + 2)];
                // SAFETY: the caller's contract; each state holds `2 + dim` floats.
                unsafe { lanes.accumulate::<E, D>(heads, lane, v, states) };
                g += heads;
            }
        }
    }

    /// Every lane's scores against the K tile (`k_tile`), for the rows `rows`
    /// (row `r` sees `visible(r)` keys of it), three heads of a group at a time.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA, F16C and AVX-512 F; `D · 16 == layout.head_dim`;
    /// `visible(r) <= lanes.stride` for every row.
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    #[inline]
    unsafe fn tile_scores<E: Element, const D: usize>(
        &self,
        lanes: &mut Lanes,
        k_tile: &[E],
        group: usize,
        rows: std::ops::Range<usize>,
        visible: &impl Fn(usize) -> usize,
    ) {
        let dim = self.layout.head_dim;
        let row_len = self.q.len() / self.item.rows.1;
        let stride = lanes.stride;
        for r in rows {
            let k = &k_tile[..visible(r) * dim];
            let heads_q = &self.q[r * row_len + self.item.kv_head * group * dim..][..group * dim];
            let mut g = 0;
            while g < group {
                let heads = heads_per_step(group - g);
                let q = |h: usize| &heads_q[(g + h) * dim..][..dim];
                let out = &mut lanes.scores[(r * group + g) * stride..][..heads * stride];
                // SAFETY: the caller's contract; each query head holds `dim = D · 16`
                // floats and each lane's scores `stride >= visible(r)` of them.
                unsafe {
                    match heads {
                        3 => scaled_dots::<E, 3, D>([q(0), q(1), q(2)], k, self.scale, out, stride),
                        2 => scaled_dots::<E, 2, D>([q(0), q(1)], k, self.scale, out, stride),
                        _ => scaled_dots::<E, 1, D>([q(0)], k, self.scale, out, stride),
                    }
                }
                g += heads;
            }
        }
    }

    /// Ask for the K and V rows of the tile at `key` (`slots` rows, one block)
    /// while the current tile computes: a decode step reads each cached row
    /// once, from memory, and the blocks of a sequence are scattered. (SSE's
    /// prefetch, in every x86-64: both builds call it.)
    #[target_feature(enable = "sse")]
    #[inline]
    fn prefetch_tile(&self, key: usize, slots: usize) {
        let (dim, bs) = (self.layout.head_dim, self.layout.block_size);
        let block = self.seq.blocks[key / bs];
        let tile = self.layout.tile_offset(block, self.item.kv_head) + (key % bs) * dim;
        let len = (slots * dim).min(self.keys.len() - tile);
        for rows in [&self.keys[tile..tile + len], &self.values[tile..tile + len]] {
            for line in rows.chunks(32) {
                // A hint: it reads nothing and cannot fault; the address lies inside the pool.
                _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast());
            }
        }
    }
}

/// Keys per tile (a block of the default size is 16).
const MAX_TILE: usize = 64;

/// Query heads taken together when `left` of a group remain: three (each
/// K and V row widened once for all three, their accumulators in 24
/// registers), but four as two and two, never as three and one.
fn heads_per_step(left: usize) -> usize {
    match left {
        0..=2 => left.max(1),
        4 => 2,
        _ => 3,
    }
}

/// `scores[h · stride + key] = dot(q[h], k[key]) · scale` for every row of
/// `k`, with the AVX2 build's order: per key the 16-lane FMA sum over the
/// dimensions, then `lo + hi` (its `acc0 + acc1`), lanes `i + (i + 4)`, then
/// `0 + 2` and `1 + 3`, then the two. Four keys at a time where possible.
///
/// # Safety
/// The CPU has AVX2, FMA, F16C and AVX-512 F; each `q[h]` holds at least
/// `D · 16` floats; `k` (taken as rows of `D · 16` halves) holds at most
/// `stride` rows, and `scores` holds `H · stride` floats (asserted: four
/// keys' scores are stored at a time, unchecked).
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
#[inline]
unsafe fn scaled_dots<E: Element, const H: usize, const D: usize>(
    q: [&[f32]; H],
    k: &[E],
    scale: f32,
    scores: &mut [f32],
    stride: usize,
) {
    let dim = D * 16;
    let keys = k.len() / dim;
    assert!(
        keys <= stride && scores.len() >= H * stride,
        "scores shorter than the tile"
    );
    let mut key = 0;
    while key + 4 <= keys {
        // SAFETY: keys `key..key + 4` are rows of `k`.
        let acc = unsafe { four_keys::<E, H, D>(q, k.as_ptr().add(key * dim)) };
        for h in 0..H {
            let sums = reduce_four([fold(acc[h][0]), fold(acc[h][1]), fold(acc[h][2]), fold(acc[h][3])]);
            // SAFETY: `key + 4 <= keys <= stride`, inside lane `h`'s `stride` floats.
            unsafe {
                _mm_storeu_ps(
                    scores.as_mut_ptr().add(h * stride + key),
                    _mm_mul_ps(sums, _mm_set1_ps(scale)),
                )
            };
        }
        key += 4;
    }
    while key < keys {
        let mut acc = [_mm512_setzero_ps(); H];
        for d in 0..D {
            // SAFETY: row `key < keys` holds `dim` halves and 16·d + 16 <= dim.
            let kv = unsafe { E::load(k.as_ptr().add(key * dim + 16 * d)) };
            for h in 0..H {
                // SAFETY: q[h] holds at least `dim` floats (the caller's contract).
                let qv = unsafe { _mm512_loadu_ps(q[h].as_ptr().add(16 * d)) };
                acc[h] = _mm512_fmadd_ps(qv, kv, acc[h]);
            }
        }
        for h in 0..H {
            scores[h * stride + key] = crate::simd::avx2::horizontal_sum(fold(acc[h])) * scale;
        }
        key += 1;
    }
}

/// Four keys' 16-lane FMA sums over the dimensions, for each of `H` heads.
///
/// # Safety
/// The CPU has AVX2, FMA, F16C and AVX-512 F; `k` points at four readable
/// rows of `D · 16` halves; each `q[h]` holds at least `D · 16` floats.
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
#[inline]
unsafe fn four_keys<E: Element, const H: usize, const D: usize>(q: [&[f32]; H], k: *const E) -> [[__m512; 4]; H] {
    let dim = D * 16;
    let mut acc = [[_mm512_setzero_ps(); 4]; H];
    for d in 0..D {
        for j in 0..4 {
            // SAFETY: row `j < 4` holds `dim` halves (the caller's contract), 16·d + 16 <= dim.
            let kv = unsafe { E::load(k.add(j * dim + 16 * d)) };
            for h in 0..H {
                // SAFETY: q[h] holds at least `dim` floats (the caller's contract).
                let qv = unsafe { _mm512_loadu_ps(q[h].as_ptr().add(16 * d)) };
                acc[h][j] = _mm512_fmadd_ps(qv, kv, acc[h][j]);
            }
        }
    }
    acc
}

/// 16 halves at `p`, widened.
///
/// # Safety
/// The CPU has AVX-512 F; `p` points at 16 readable `f16` (no alignment needed).
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn widen(p: *const f16) -> __m512 {
    // SAFETY: an unaligned load of the caller's 16 readable halves (32 bytes).
    _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(p.cast()) })
}

/// A K/V row element the tiles read 16 at a time as floats: the pool's
/// halves (widened as loaded) or a tile widened once for many lanes.
trait Element: Copy {
    /// 16 elements at `p`, as floats.
    ///
    /// # Safety
    /// The CPU has AVX-512 F; `p` points at 16 readable elements (no alignment needed).
    unsafe fn load(p: *const Self) -> __m512;
}

impl Element for f16 {
    /// # Safety
    /// As [`Element::load`].
    #[inline(always)]
    unsafe fn load(p: *const Self) -> __m512 {
        // SAFETY: the caller's contract is `widen`'s.
        unsafe { widen(p) }
    }
}

impl Element for f32 {
    /// # Safety
    /// As [`Element::load`].
    #[inline(always)]
    unsafe fn load(p: *const Self) -> __m512 {
        // SAFETY: an unaligned load of the caller's 16 readable floats (AVX-512 F).
        unsafe { _mm512_loadu_ps(p) }
    }
}

/// The AVX2 build's `acc0 + acc1`: lanes 0–7 plus lanes 8–15.
#[target_feature(enable = "avx512f")]
#[inline]
fn fold(acc: __m512) -> __m256 {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc)));
    _mm256_add_ps(_mm512_castps512_ps256(acc), hi)
}

/// Four keys' eight lanes each, summed as `tile::avx2`'s batched scores sum them.
#[target_feature(enable = "avx2")]
#[inline]
fn reduce_four(v: [__m256; 4]) -> __m128 {
    // [b0_0, b0_1, b1_0, b1_1 | b2_0, b2_1, b3_0, b3_1]
    let b = super::tile::avx2::partial_sums(v);
    let (lo, hi) = (_mm256_castps256_ps128(b), _mm256_extractf128_ps::<1>(b));
    _mm_add_ps(_mm_shuffle_ps::<0x88>(lo, hi), _mm_shuffle_ps::<0xDD>(lo, hi))
}

/// `acc_h = acc_h · rescale_h` (when not 1), then `acc_h += weights[h][i] · v_i`
/// for each V row in order, one FMA per element and row: `simd::avx2::axpy_rows_f16`'s
/// arithmetic, every head's accumulators in registers, each row widened once.
///
/// # Safety
/// The CPU has AVX2, FMA, F16C and AVX-512 F, and each state holds at least
/// `2 + D · 16` floats (`[max, sum, acc[D · 16]]`: the accumulators are
/// loaded and stored unchecked). (`v` is taken as rows of `D · 16` halves,
/// at most `stride` of them: asserted.)
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
#[inline]
unsafe fn accumulate_rows<E: Element, const H: usize, const D: usize>(
    states: [&mut [f32]; H],
    rescales: [f32; H],
    weights: &[f32],
    stride: usize,
    v: &[E],
) {
    let dim = D * 16;
    assert!(v.len() / dim <= stride, "more V rows than weights");
    let mut acc = [[_mm512_setzero_ps(); D]; H];
    for h in 0..H {
        let at = states[h][2..].as_ptr();
        for (d, lanes) in acc[h].iter_mut().enumerate() {
            // SAFETY: the state holds `2 + dim` floats (the caller's contract), and
            // 16·d + 16 <= dim.
            *lanes = unsafe { _mm512_loadu_ps(at.add(16 * d)) };
            if rescales[h] != 1.0 {
                *lanes = _mm512_mul_ps(*lanes, _mm512_set1_ps(rescales[h]));
            }
        }
    }
    for (i, row) in v.chunks_exact(dim).enumerate() {
        let alphas: [__m512; H] = std::array::from_fn(|h| _mm512_set1_ps(weights[h * stride + i]));
        for d in 0..D {
            // SAFETY: the row holds `dim` halves (`chunks_exact`), and 16·d + 16 <= dim.
            let x = unsafe { E::load(row.as_ptr().add(16 * d)) };
            for h in 0..H {
                acc[h][d] = _mm512_fmadd_ps(alphas[h], x, acc[h][d]);
            }
        }
    }
    for h in 0..H {
        let at = states[h][2..].as_mut_ptr();
        for (d, lanes) in acc[h].iter().enumerate() {
            // SAFETY: as above.
            unsafe { _mm512_storeu_ps(at.add(16 * d), *lanes) };
        }
    }
}
