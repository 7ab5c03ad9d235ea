//! A work item's scratch for the phased tiles (AVX-512 and AVX2): each lane's scores,
//! weights and rescale against the current tile, and the tile widened once.

use super::{accumulate_rows, Element};
use half::f16;
use std::arch::x86_64::*;

/// One tile's K and V rows widened to `f32` once, for every lane of the item.
#[derive(Default)]
pub(super) struct WideTile {
    pub(super) keys: Vec<f32>,
    pub(super) values: Vec<f32>,
}

impl WideTile {
    /// Room for `len` floats of each.
    pub(super) fn prepare(&mut self, len: usize) {
        if self.keys.len() < len {
            self.keys.resize(len, f32::NAN);
            self.values.resize(len, f32::NAN);
        }
    }

    /// The tile's rows (`keys`, `values`: as many halves of each), widened.
    ///
    /// # Safety
    /// The CPU has AVX-512 F; the tile holds a multiple of 16 halves, at most
    /// what [`Self::prepare`] made room for (asserted).
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    #[inline]
    pub(super) unsafe fn widen(&mut self, keys: &[f16], values: &[f16]) {
        assert!(keys.len() <= self.keys.len() && keys.len() == values.len() && keys.len().is_multiple_of(16));
        for (src, dst) in [(keys, &mut self.keys), (values, &mut self.values)] {
            for (i, out) in dst[..src.len()].chunks_exact_mut(16).enumerate() {
                // SAFETY: 16 halves at `16 i < src.len()` (a multiple of 16), into 16 floats.
                unsafe { _mm512_storeu_ps(out.as_mut_ptr(), super::widen(src.as_ptr().add(16 * i))) };
            }
        }
    }

    /// [`Self::widen`] on AVX2 (F16C: eight halves per conversion).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; the tile holds a multiple of 16 halves,
    /// at most what [`Self::prepare`] made room for (asserted).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(super) unsafe fn widen_avx2(&mut self, keys: &[f16], values: &[f16]) {
        assert!(keys.len() <= self.keys.len() && keys.len() == values.len() && keys.len().is_multiple_of(16));
        for (src, dst) in [(keys, &mut self.keys), (values, &mut self.values)] {
            for (i, out) in dst[..src.len()].chunks_exact_mut(8).enumerate() {
                // SAFETY: 8 halves at `8 i < src.len()` (a multiple of 16), into 8 floats.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr(), crate::simd::avx2::load_f16(src.as_ptr().add(8 * i))) };
            }
        }
    }
}

/// One work item's per-tile lanes (a lane: one query row and head): each
/// lane's scores and softmax weights against the current tile (`stride`
/// floats apart, a multiple of 16), and the factor its accumulator takes
/// before the tile's V rows.
#[derive(Default)]
pub(super) struct Lanes {
    pub(super) stride: usize,
    pub(super) scores: Vec<f32>,
    pub(super) weights: Vec<f32>,
    pub(super) rescales: Vec<f32>,
    /// Three lanes' eight partial sums per key before their reduction
    /// (the AVX2 scores, `8 · stride` floats per lane).
    pub(super) key_sums: Vec<f32>,
}

impl Lanes {
    /// Room for `lanes` lanes of tiles up to `tile` keys (what a lane
    /// reads, a step has written first: nothing is cleared).
    pub(super) fn prepare(&mut self, lanes: usize, tile: usize) {
        self.stride = tile.next_multiple_of(16);
        for (buffer, len) in [
            (&mut self.scores, lanes * self.stride),
            (&mut self.weights, lanes * self.stride),
        ] {
            if buffer.len() < len {
                buffer.resize(len, f32::NAN);
            }
        }
        if self.rescales.len() < lanes {
            self.rescales.resize(lanes, f32::NAN);
        }
        if self.key_sums.len() < 3 * 8 * self.stride {
            self.key_sums.resize(3 * 8 * self.stride, f32::NAN);
        }
    }

    /// Each lane's running sum (`states[lane · state_len + 1]`) plus its
    /// weights in key order. A sum is a chain of dependent additions, so
    /// the lanes of a row run theirs side by side, up to four at a time.
    pub(super) fn add_sums(
        &self,
        states: &mut [f32],
        state_len: usize,
        group: usize,
        rows: std::ops::Range<usize>,
        visible: &impl Fn(usize) -> usize,
    ) {
        for r in rows {
            let keys = visible(r);
            let mut lane = r * group;
            while lane < (r + 1) * group {
                let chains = ((r + 1) * group - lane).min(4);
                match chains {
                    4 => self.sum_chains::<4>(states, state_len, lane, keys),
                    3 => self.sum_chains::<3>(states, state_len, lane, keys),
                    2 => self.sum_chains::<2>(states, state_len, lane, keys),
                    _ => self.sum_chains::<1>(states, state_len, lane, keys),
                }
                lane += chains;
            }
        }
    }

    /// `N` lanes' sums from `lane` on plus their first `keys` weights, the
    /// sums held in registers.
    #[inline]
    fn sum_chains<const N: usize>(&self, states: &mut [f32], state_len: usize, lane: usize, keys: usize) {
        let mut sums: [f32; N] = std::array::from_fn(|j| states[(lane + j) * state_len + 1]);
        let weights: [&[f32]; N] = std::array::from_fn(|j| &self.weights[(lane + j) * self.stride..][..keys]);
        for key in 0..keys {
            for j in 0..N {
                sums[j] += weights[j][key];
            }
        }
        for (j, sum) in sums.into_iter().enumerate() {
            states[(lane + j) * state_len + 1] = sum;
        }
    }

    /// What the V step of `H` lanes from `lane` on takes: their states
    /// (`states`: theirs, `state_len` floats each, one after another; a
    /// shorter slice panics), rescales, and weights (`stride` apart).
    #[allow(clippy::type_complexity)] // the three arguments of `accumulate_rows`
    pub(super) fn heads<'l, const H: usize>(
        &'l self,
        lane: usize,
        states: &'l mut [f32],
        state_len: usize,
    ) -> ([&'l mut [f32]; H], [f32; H], &'l [f32]) {
        let mut chunks = states[..H * state_len].chunks_exact_mut(state_len);
        // `H` whole chunks: the slice above holds exactly that many.
        let states = std::array::from_fn(|_| chunks.next().unwrap_or_default());
        let rescales = std::array::from_fn(|h| self.rescales[lane + h]);
        (states, rescales, &self.weights[lane * self.stride..][..H * self.stride])
    }

    /// The V rows `v` into `heads` lanes' accumulators from `lane` on
    /// (`states`: their `[max, sum, acc]`, one after another).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA, F16C and AVX-512 F; each state holds `2 + D · 16`
    /// floats; `v` holds at most `stride` rows of `D · 16` halves.
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    #[inline]
    pub(super) unsafe fn accumulate<E: Element, const D: usize>(
        &self,
        heads: usize,
        lane: usize,
        v: &[E],
        states: &mut [f32],
    ) {
        let state_len = D * 16 + 2;
        match heads {
            3 => {
                let (states, rescales, weights) = self.heads::<3>(lane, states, state_len);
                // SAFETY: the caller's contract.
                unsafe { accumulate_rows::<E, 3, D>(states, rescales, weights, self.stride, v) }
            }
            2 => {
                let (states, rescales, weights) = self.heads::<2>(lane, states, state_len);
                // SAFETY: the caller's contract.
                unsafe { accumulate_rows::<E, 2, D>(states, rescales, weights, self.stride, v) }
            }
            _ => {
                let (states, rescales, weights) = self.heads::<1>(lane, states, state_len);
                // SAFETY: the caller's contract.
                unsafe { accumulate_rows::<E, 1, D>(states, rescales, weights, self.stride, v) }
            }
        }
    }
}
