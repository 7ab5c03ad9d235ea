//! The AVX2 build of the phased tiles, for f16 K/V with heads of 64 or 128
//! dimensions, on the work items of a prefill chunk (several query rows:
//! [`widens`]). Each tile is widened to `f32` once for every lane of the
//! item, then run in the AVX-512 build's phases (all scores, the softmax
//! steps, the sums, the V rows), with 8-lane registers:
//! * scores: three heads against three keys at a time; a key's two
//!   `simd::dot` accumulators are separate chains, so they run one after
//!   the other (9 registers, six loads per nine FMAs, where one head
//!   against four keys took five loads per four), then four keys' sums are
//!   reduced together as `tile::avx2`'s batched scores reduce them;
//! * V rows: three heads' accumulators over 32 dimensions at a time (12
//!   registers), each V register serving three FMAs and each weight
//!   broadcast four.
//!
//! Every score and accumulator element takes the operations of
//! `attend_f16_avx2` in the same order: the same bits. A decode row's two
//! or three passes over a tile stay on that build, which converts the
//! halves as it loads them (this build is measured on prefill items only).
//! On a Zen 1 EPYC, the attention bench's 64 queries over 4,096 keys:
//! ~84–100 → ~46 ms, 47% of the FMA peak.

// Register tiles are indexed by key, head and lane group at once.
#![allow(clippy::needless_range_loop)]

use super::super::{tile, AttendItem};
use super::{heads_per_step, reduce_four, with_scratch, Lanes, Tiles};
use half::f16;
use std::arch::x86_64::*;

/// Whether the item's passes over a tile are many enough for this build to
/// widen it once for all of them: more than three (group heads taken three
/// at a time, per query row).
pub(in crate::attention) fn widens(at: &AttendItem<'_, '_>, group: usize) -> bool {
    super::covers(at.layout.head_dim) && at.item.rows.1 * group.div_ceil(3) > 3
}

/// See `attend_range`, for f16 K/V and a head size `covers` accepts.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and `covers(layout.head_dim)`: the tiles
/// read and write whole 64- or 128-wide heads through unchecked pointers.
/// (Everything else is reached through checked slices.)
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::attention) unsafe fn attend_f16(
    at: &AttendItem<'_, '_>,
    keys: &[f16],
    values: &[f16],
    partial: &mut [f32],
) {
    let tiles = Tiles::new(at, keys, values);
    with_scratch(at, partial.len(), |lanes, wide| {
        // SAFETY: the caller's contract; `D · 8` is the head size (64 or 128, `covers`).
        unsafe {
            match at.layout.head_dim {
                64 => tiles.run_avx2::<8>(partial, lanes, wide),
                _ => tiles.run_avx2::<16>(partial, lanes, wide),
            }
        }
    })
}

impl Tiles<'_, '_> {
    /// The online softmax over the item's keys (`D`: registers of 8 per
    /// head), each tile widened, then run in phases (see `Tiles::run`).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C, and `D · 8 == layout.head_dim`.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn run_avx2<const D: usize>(&self, partial: &mut [f32], lanes: &mut Lanes, wide: &mut super::WideTile) {
        let (dim, bs) = (self.layout.head_dim, self.layout.block_size);
        let (rows, state_len) = (self.item.rows.1, dim + 2);
        let group = partial.len() / (rows * state_len);
        self.start(partial);
        let (mut key, end) = self.item.keys;
        while key < end {
            let (slots, tile) = self.tile_at(key);
            if key + slots < end {
                self.prefetch_tile(key + slots, (end - key - slots).min(bs));
            }
            // SAFETY: the features are enabled; the tile holds `slots · dim` halves
            // (a multiple of 16), `slots <= MAX_TILE`, what `prepare` made room for.
            unsafe { wide.widen_avx2(&self.keys[tile..][..slots * dim], &self.values[tile..][..slots * dim]) };
            let (k_tile, v_tile) = (&wide.keys[..slots * dim], &wide.values[..slots * dim]);
            let (first_seeing, visible) = self.seeing(key, slots);
            for r in first_seeing..rows {
                let k = &k_tile[..visible(r) * dim];
                let mut g = 0;
                while g < group {
                    let heads = heads_per_step(group - g);
                    // SAFETY: the caller's contract; `visible(r) <= slots <= lanes.stride`.
                    unsafe { self.scores_avx2::<D>(lanes, k, r, g, heads, group) };
                    g += heads;
                }
            }
            for r in first_seeing..rows {
                super::softmax_step!(
                    lanes,
                    r * group..(r + 1) * group,
                    visible(r),
                    partial,
                    state_len,
                    |scores: &[f32], max: f32, weights: &mut [f32]| {
                        // SAFETY: the features are enabled here; any lengths.
                        unsafe { tile::avx2::exp_shifted(scores, max, weights) }
                    }
                );
            }
            lanes.add_sums(partial, state_len, group, first_seeing..rows, &visible);
            for r in first_seeing..rows {
                let v = &v_tile[..visible(r) * dim];
                let mut g = 0;
                while g < group {
                    let heads = heads_per_step(group - g);
                    let lane = r * group + g;
                    let states = &mut partial[lane * state_len..][..heads * state_len];
                    // SAFETY: the caller's contract; each state holds `2 + dim` floats.
                    unsafe { accumulate::<D>(lanes, heads, lane, v, states) };
                    g += heads;
                }
            }
            key += slots;
        }
    }

    /// Scores of `heads` lanes of row `r` from head `g` of its group against
    /// the (widened) keys `k`.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `D · 8 == layout.head_dim`; `k` holds
    /// at most `lanes.stride` rows.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn scores_avx2<const D: usize>(
        &self,
        lanes: &mut Lanes,
        k: &[f32],
        r: usize,
        g: usize,
        heads: usize,
        group: usize,
    ) {
        let dim = self.layout.head_dim;
        let row_len = self.q.len() / self.item.rows.1;
        let heads_q = &self.q[r * row_len + self.item.kv_head * group * dim..][..group * dim];
        let q = |h: usize| &heads_q[(g + h) * dim..][..dim];
        let stride = lanes.stride;
        let out = &mut lanes.scores[(r * group + g) * stride..][..heads * stride];
        let out = (out, &mut lanes.key_sums[..]);
        // SAFETY: the caller's contract; each query head holds `dim = D · 8` floats
        // and each lane's scores `stride` of them.
        unsafe {
            match heads {
                3 => scaled_dots::<3, D>([q(0), q(1), q(2)], k, self.scale, out, stride),
                2 => scaled_dots::<2, D>([q(0), q(1)], k, self.scale, out, stride),
                _ => scaled_dots::<1, D>([q(0)], k, self.scale, out, stride),
            }
        }
    }
}

/// `scores[h · stride + key] = dot(q[h], k[key]) · scale` for every row of
/// `k`, in `simd::dot`'s order: per key two accumulators (dimensions
/// `16i..16i + 8` and `16i + 8..16i + 16`), their sum, then the tree of
/// `tile::avx2::partial_sums` (four keys at a time) or `horizontal_sum`
/// (the last ones, one by one). The two accumulators are separate chains,
/// so they run one after the other, three keys at a time: 9 registers of
/// sums, six loads per nine FMAs; `key_sums` holds their eight lanes per key
/// until the reduction.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; each `q[h]` holds at least `D · 8`
/// floats; `k` (rows of `D · 8`) holds at most `stride` rows, `scores`
/// `H · stride` floats and `key_sums` `H · 8 · stride` (asserted: four scores
/// are stored at a time, unchecked).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn scaled_dots<const H: usize, const D: usize>(
    q: [&[f32]; H],
    k: &[f32],
    scale: f32,
    (scores, key_sums): (&mut [f32], &mut [f32]),
    stride: usize,
) {
    let dim = D * 8;
    let keys = k.len() / dim;
    assert!(
        keys <= stride && scores.len() >= H * stride && key_sums.len() >= H * 8 * stride,
        "scores shorter than the tile"
    );
    let queries = q.map(|q| q.as_ptr());
    let sums = key_sums.as_mut_ptr();
    // Keys `key..key + B <= keys` are rows of `k`, the queries hold `dim`
    // floats, and lane `h`'s sums of those keys lie inside `key_sums` (asserted).
    let block = |key: usize, len: usize| {
        // SAFETY: the features are enabled here; the bounds above.
        unsafe {
            let at = k.as_ptr().add(key * dim);
            match len {
                3 => key_block::<H, D, 3>(queries, at, sums, stride, key),
                2 => key_block::<H, D, 2>(queries, at, sums, stride, key),
                _ => key_block::<H, D, 1>(queries, at, sums, stride, key),
            }
        }
    };
    for key in (0..keys).step_by(3) {
        block(key, (keys - key).min(3));
    }
    for h in 0..H {
        // SAFETY: lane `h`'s `keys <= stride` sums of eight, inside `key_sums` (asserted).
        let sum = |key: usize| unsafe { _mm256_loadu_ps(sums.add((h * stride + key) * 8)) };
        let mut key = 0;
        while key + 4 <= keys {
            let four = reduce_four([sum(key), sum(key + 1), sum(key + 2), sum(key + 3)]);
            // SAFETY: `key + 4 <= keys <= stride`, inside lane `h`'s `stride` floats.
            unsafe {
                _mm_storeu_ps(
                    scores.as_mut_ptr().add(h * stride + key),
                    _mm_mul_ps(four, _mm_set1_ps(scale)),
                )
            };
            key += 4;
        }
        for key in key..keys {
            scores[h * stride + key] = crate::simd::avx2::horizontal_sum(sum(key)) * scale;
        }
    }
}

/// `B` keys' `acc0 + acc1` (see [`scaled_dots`]) for each of `H` heads, into
/// `sums` at lane `h`, key `first + j` (eight floats each, `stride` keys per
/// lane): first every `acc0`, stored, then every `acc1`, added.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `k` points at `B` readable rows of
/// `D · 8` floats; each `q[h]` at `D · 8` readable floats; `sums` holds
/// `(h · stride + first + B) · 8` floats for every `h < H`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn key_block<const H: usize, const D: usize, const B: usize>(
    q: [*const f32; H],
    k: *const f32,
    sums: *mut f32,
    stride: usize,
    first: usize,
) {
    let dim = D * 8;
    for half in [0, 8] {
        let mut acc = [[_mm256_setzero_ps(); B]; H];
        for i in (half..dim).step_by(16) {
            // SAFETY: `i + 8 <= dim`, inside every row and every query.
            let kv: [__m256; B] = std::array::from_fn(|j| unsafe { _mm256_loadu_ps(k.add(j * dim + i)) });
            for h in 0..H {
                // SAFETY: as above.
                let qv = unsafe { _mm256_loadu_ps(q[h].add(i)) };
                for j in 0..B {
                    acc[h][j] = _mm256_fmadd_ps(qv, kv[j], acc[h][j]);
                }
            }
        }
        for h in 0..H {
            for j in 0..B {
                // SAFETY: the caller's contract.
                unsafe {
                    let at = sums.add((h * stride + first + j) * 8);
                    let sum = if half == 0 {
                        acc[h][j]
                    } else {
                        _mm256_add_ps(_mm256_loadu_ps(at), acc[h][j])
                    };
                    _mm256_storeu_ps(at, sum);
                }
            }
        }
    }
}

/// The V rows `v` into `heads` lanes' accumulators from `lane` on
/// (`states`: their `[max, sum, acc]`, one after another).
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; each state holds `2 + D · 8` floats; `v`
/// holds at most `lanes.stride` rows of `D · 8` floats.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn accumulate<const D: usize>(lanes: &Lanes, heads: usize, lane: usize, v: &[f32], states: &mut [f32]) {
    let state_len = D * 8 + 2;
    match heads {
        3 => {
            let (states, rescales, weights) = lanes.heads::<3>(lane, states, state_len);
            // SAFETY: the caller's contract.
            unsafe { accumulate_rows::<3, D>(states, rescales, weights, lanes.stride, v) }
        }
        2 => {
            let (states, rescales, weights) = lanes.heads::<2>(lane, states, state_len);
            // SAFETY: the caller's contract.
            unsafe { accumulate_rows::<2, D>(states, rescales, weights, lanes.stride, v) }
        }
        _ => {
            let (states, rescales, weights) = lanes.heads::<1>(lane, states, state_len);
            // SAFETY: the caller's contract.
            unsafe { accumulate_rows::<1, D>(states, rescales, weights, lanes.stride, v) }
        }
    }
}

/// `acc_h = acc_h · rescale_h` (when not 1), then `acc_h += weights[h][i] · v_i`
/// for each V row in order, one FMA per element and row (`axpy_rows_f16`'s
/// arithmetic), 32 dimensions of every head at a time in registers.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and each state holds at least
/// `2 + D · 8` floats (loaded and stored unchecked). (`v` is taken as rows
/// of `D · 8` floats, at most `stride` of them: asserted.)
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn accumulate_rows<const H: usize, const D: usize>(
    states: [&mut [f32]; H],
    rescales: [f32; H],
    weights: &[f32],
    stride: usize,
    v: &[f32],
) {
    let dim = D * 8;
    let rows = v.len() / dim;
    assert!(
        rows <= stride && weights.len() >= (H - 1) * stride + rows,
        "more V rows than weights"
    );
    let accs = states.map(|state| state[2..].as_mut_ptr());
    for chunk in (0..dim).step_by(32) {
        let mut acc = [[_mm256_setzero_ps(); 4]; H];
        for h in 0..H {
            for (j, lanes) in acc[h].iter_mut().enumerate() {
                // SAFETY: the state holds `2 + dim` floats (the caller's contract), and
                // `chunk + 8j + 8 <= dim`.
                *lanes = unsafe { _mm256_loadu_ps(accs[h].add(chunk + 8 * j)) };
                if rescales[h] != 1.0 {
                    *lanes = _mm256_mul_ps(*lanes, _mm256_set1_ps(rescales[h]));
                }
            }
        }
        for i in 0..rows {
            let alphas: [__m256; H] = std::array::from_fn(|h| _mm256_set1_ps(weights[h * stride + i]));
            for j in 0..4 {
                // SAFETY: row `i < rows` holds `dim` floats, and `chunk + 8j + 8 <= dim`.
                let x = unsafe { _mm256_loadu_ps(v.as_ptr().add(i * dim + chunk + 8 * j)) };
                for h in 0..H {
                    acc[h][j] = _mm256_fmadd_ps(alphas[h], x, acc[h][j]);
                }
            }
        }
        for h in 0..H {
            for (j, lanes) in acc[h].iter().enumerate() {
                // SAFETY: as the loads above; the states are borrowed mutably.
                unsafe { _mm256_storeu_ps(accs[h].add(chunk + 8 * j), *lanes) };
            }
        }
    }
}
