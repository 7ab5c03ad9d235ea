//! The AVX-512 build of `attend_body!` for f16 K/V with heads of 64 or 128
//! dimensions, up to three query heads of a GQA group at a time: each K and V
//! row is widened once (16 halves per `vcvtph2ps`) for all of them, and 16-lane FMAs
//! cover what the AVX2 build does in two 8-lane accumulators (lanes 0–7 of a
//! register are its `acc0`, lanes 8–15 its `acc1`), so every score and every
//! accumulator element takes the same operations in the same order: the
//! same bits as the other builds. The heads' accumulators stay in registers
//! across a tile's V rows.

// Register tiles are indexed by key, head and lane group at once.
#![allow(clippy::needless_range_loop)]

use super::{AttendItem, AttentionSeq, WorkItem};
use crate::kv_cache::KvLayout;
use half::f16;
use std::arch::x86_64::*;

/// Whether [`attend_f16`] covers heads of `dim` dimensions.
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
    let AttendItem {
        scale,
        layout,
        seq,
        item,
        q,
    } = *at;
    let tiles = Tiles {
        scale,
        layout,
        seq,
        item,
        q,
        keys,
        values,
    };
    // SAFETY: the caller's contract; `D · 16` is the head size (64 or 128, `covers`).
    unsafe {
        match layout.head_dim {
            64 => tiles.run::<4>(partial),
            _ => tiles.run::<8>(partial),
        }
    }
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

impl Tiles<'_, '_> {
    /// The online softmax over the item's keys (`D`: registers of 16 per head).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA, F16C and AVX-512 F, and `D · 16 ==
    /// layout.head_dim` (what [`Self::heads`] needs of the heads and states
    /// it slices here).
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    unsafe fn run<const D: usize>(&self, partial: &mut [f32]) {
        let (dim, bs) = (self.layout.head_dim, self.layout.block_size);
        let rows = self.item.rows.1;
        let row_len = self.q.len() / rows;
        let group = partial.len() / (rows * (dim + 2));
        for state in partial.chunks_exact_mut(dim + 2) {
            state[0] = f32::NEG_INFINITY;
        }
        let (mut key, end) = self.item.keys;
        while key < end {
            let block = self.seq.blocks[key / bs];
            let first_slot = key % bs;
            let slots = (bs - first_slot).min(end - key).min(MAX_TILE);
            let tile = self.layout.tile_offset(block, self.item.kv_head) + first_slot * dim;
            let (k_tile, v_tile) = (
                &self.keys[tile..tile + slots * dim],
                &self.values[tile..tile + slots * dim],
            );
            if key + slots < end {
                self.prefetch_tile(key + slots, (end - key - slots).min(bs));
            }
            let first_seeing = key.saturating_sub(self.seq.first_pos + self.item.rows.0);
            for r in first_seeing..rows {
                let visible = slots.min(self.seq.first_pos + self.item.rows.0 + r + 1 - key);
                let heads_q = &self.q[r * row_len + self.item.kv_head * group * dim..][..group * dim];
                let states = &mut partial[r * group * (dim + 2)..][..group * (dim + 2)];
                let mut g = 0;
                while g < group {
                    let (k, v) = (&k_tile[..visible * dim], &v_tile[..visible * dim]);
                    let states = &mut states[g * (dim + 2)..];
                    let q = |h: usize| &heads_q[(g + h) * dim..][..dim];
                    let heads = heads_per_step(group - g);
                    // SAFETY: the caller's contract; every query head and state slice holds
                    // `dim = D · 16` floats (`+ 2`), and `k`, `v` hold `visible <= MAX_TILE`
                    // rows of `dim` (`slots` is capped at `MAX_TILE`).
                    unsafe {
                        match heads {
                            3 => {
                                let (a, rest) = states.split_at_mut(dim + 2);
                                let (b, c) = rest.split_at_mut(dim + 2);
                                self.heads::<3, D>([q(0), q(1), q(2)], k, v, [a, b, &mut c[..dim + 2]]);
                            }
                            2 => {
                                let (a, b) = states.split_at_mut(dim + 2);
                                self.heads::<2, D>([q(0), q(1)], k, v, [a, &mut b[..dim + 2]]);
                            }
                            _ => self.heads::<1, D>([q(0)], k, v, [&mut states[..dim + 2]]),
                        }
                    }
                    g += heads;
                }
            }
            key += slots;
        }
    }

    /// Ask for the K and V rows of the tile at `key` (`slots` rows, one block)
    /// while the current tile computes: a decode step reads each cached row
    /// once, from memory, and the blocks of a sequence are scattered.
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
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

    /// One tile for `H` query heads: scores, online-softmax state, V rows.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA, F16C and AVX-512 F; each `q[h]` holds at least
    /// `D · 16` floats and each state at least `2 + D · 16`; `k` holds at most
    /// [`MAX_TILE`] rows of `D · 16` halves. (`v` should hold as many rows as
    /// `k`; more than [`MAX_TILE`] would panic.)
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    #[inline]
    unsafe fn heads<const H: usize, const D: usize>(
        &self,
        q: [&[f32]; H],
        k: &[f16],
        v: &[f16],
        states: [&mut [f32]; H],
    ) {
        let visible = k.len() / (D * 16);
        let mut scores = [[0f32; MAX_TILE]; H];
        // SAFETY: the caller's contract is `scaled_dots`' (queries of `D · 16`, at most
        // `MAX_TILE` keys).
        unsafe { scaled_dots::<H, D>(q, k, self.scale, &mut scores) };
        let mut weights = [[0f32; MAX_TILE]; H];
        let mut rescales = [1f32; H];
        for h in 0..H {
            let state = &mut *states[h];
            // SAFETY: the features are enabled here; `max` takes any length.
            let tile_max = unsafe { super::tile::avx2::max(&scores[h][..visible]) };
            let new_max = state[0].max(tile_max);
            // SAFETY: as above (`exp_shifted` takes any lengths).
            unsafe { super::tile::avx512::exp_shifted(&scores[h][..visible], new_max, &mut weights[h][..visible]) };
            if state[0] != new_max {
                rescales[h] = (state[0] - new_max).exp();
            }
            if rescales[h] != 1.0 {
                state[1] *= rescales[h];
            }
            state[0] = new_max;
            for weight in &weights[h][..visible] {
                state[1] += weight;
            }
        }
        // SAFETY: the caller's contract: each state holds `2 + D · 16` floats.
        unsafe { accumulate_rows::<H, D>(states, rescales, &weights, v) };
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

/// `scores[h][key] = dot(q[h], k[key]) · scale` for every row of `k`, with the
/// AVX2 build's order: per key the 16-lane FMA sum over the dimensions, then
/// `lo + hi` (its `acc0 + acc1`), lanes `i + (i + 4)`, then `0 + 2` and
/// `1 + 3`, then the two. Four keys at a time where possible.
///
/// # Safety
/// The CPU has AVX2, FMA, F16C and AVX-512 F; each `q[h]` holds at least
/// `D · 16` floats, and `k` (taken as rows of `D · 16` halves) holds at most
/// [`MAX_TILE`] rows: four keys' scores are stored at a time, unchecked.
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
#[inline]
unsafe fn scaled_dots<const H: usize, const D: usize>(
    q: [&[f32]; H],
    k: &[f16],
    scale: f32,
    scores: &mut [[f32; MAX_TILE]; H],
) {
    let dim = D * 16;
    let keys = k.len() / dim;
    let mut key = 0;
    while key + 4 <= keys {
        let mut acc = [[_mm512_setzero_ps(); 4]; H];
        for d in 0..D {
            for j in 0..4 {
                // SAFETY: row `key + j < keys = k.len() / dim` holds `dim` halves and
                // 16·d + 16 <= dim.
                let kv = unsafe { widen(k.as_ptr().add((key + j) * dim + 16 * d)) };
                for h in 0..H {
                    // SAFETY: q[h] holds at least `dim` floats (the caller's contract).
                    let qv = unsafe { _mm512_loadu_ps(q[h].as_ptr().add(16 * d)) };
                    acc[h][j] = _mm512_fmadd_ps(qv, kv, acc[h][j]);
                }
            }
        }
        for h in 0..H {
            let sums = reduce_four([fold(acc[h][0]), fold(acc[h][1]), fold(acc[h][2]), fold(acc[h][3])]);
            // SAFETY: key + 4 <= keys <= MAX_TILE (the caller's contract).
            unsafe { _mm_storeu_ps(scores[h].as_mut_ptr().add(key), _mm_mul_ps(sums, _mm_set1_ps(scale))) };
        }
        key += 4;
    }
    while key < keys {
        let mut acc = [_mm512_setzero_ps(); H];
        for d in 0..D {
            // SAFETY: as above.
            let kv = unsafe { widen(k.as_ptr().add(key * dim + 16 * d)) };
            for h in 0..H {
                // SAFETY: as above.
                let qv = unsafe { _mm512_loadu_ps(q[h].as_ptr().add(16 * d)) };
                acc[h] = _mm512_fmadd_ps(qv, kv, acc[h]);
            }
        }
        for h in 0..H {
            scores[h][key] = crate::simd::avx2::horizontal_sum(fold(acc[h])) * scale;
        }
        key += 1;
    }
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
/// loaded and stored unchecked). (`v` is taken as rows of `D · 16` halves;
/// more than [`MAX_TILE`] of them would panic.)
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
#[inline]
unsafe fn accumulate_rows<const H: usize, const D: usize>(
    states: [&mut [f32]; H],
    rescales: [f32; H],
    weights: &[[f32; MAX_TILE]; H],
    v: &[f16],
) {
    let dim = D * 16;
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
        let alphas: [__m512; H] = std::array::from_fn(|h| _mm512_set1_ps(weights[h][i]));
        for d in 0..D {
            // SAFETY: the row holds `dim` halves (`chunks_exact`), and 16·d + 16 <= dim.
            let x = unsafe { widen(row.as_ptr().add(16 * d)) };
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
