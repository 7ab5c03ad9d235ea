//! Activations quantized per row in blocks of 32: one scale (rounded through
//! f16, as GGML stores it, and kept as f32) and 32 signed bytes per block;
//! and, for the K-quants, per 256 values (`super_activations.rs`). Done once
//! per matrix product, whatever the number of workers.

use crate::super_activations::{SuperQuants, SuperRow, SUPER_BLOCK};
use crate::{KernelError, BLOCK};
use half::f16;

/// Which quantizations of the activations a product reads (see
/// [`crate::Weights::quantization`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quantization {
    /// Blocks of 32 values with an f16 scale each (Q8_0, Q4_0 … Q5_1, Q2_K, Q3_K).
    pub blocks: bool,
    /// Super-blocks of 256 values with an f32 scale each (Q4_K, Q5_K, Q6_K).
    pub super_blocks: bool,
}

impl Quantization {
    /// Blocks of 32 only.
    pub const BLOCKS: Quantization = Quantization {
        blocks: true,
        super_blocks: false,
    };
    /// Super-blocks of 256 only.
    pub const SUPER_BLOCKS: Quantization = Quantization {
        blocks: false,
        super_blocks: true,
    };

    /// Both quantizations that either asks for.
    pub fn union(self, other: Quantization) -> Quantization {
        Quantization {
            blocks: self.blocks || other.blocks,
            super_blocks: self.super_blocks || other.super_blocks,
        }
    }
}

/// A `[rows, cols]` activation matrix in Q8 blocks.
#[derive(Debug, Clone, Default)]
pub struct Q8Activations {
    rows: usize,
    blocks: usize,
    scales: Vec<f32>,
    /// Per block, `d · Σq` as GGML's Q8_1 stores it (rounded through f16):
    /// what a Q4_1 block's minimum multiplies.
    sums: Vec<f32>,
    /// Per block, the exact `Σq` (what a Q4_0 block's `−8` offset multiplies).
    isums: Vec<i32>,
    /// Per block, the exact `Σq` of its first and of its last 16 values (Q6_K's `−32`).
    half_sums: Vec<[i32; 2]>,
    quants: Vec<i8>,
    /// Whether the blocks of 32 above were quantized (else they are empty).
    has_blocks: bool,
    /// The super-block quantization (empty unless asked for).
    supers: SuperQuants,
}

impl Q8Activations {
    /// Quantize `x`, row-major `[rows, cols]`, in blocks of 32, and in
    /// super-blocks of 256 as well when `cols` is a multiple of 256.
    pub fn quantize(x: &[f32], rows: usize, cols: usize) -> Result<Self, KernelError> {
        let needs = Quantization {
            blocks: true,
            super_blocks: cols.is_multiple_of(SUPER_BLOCK),
        };
        Self::quantize_for(x, rows, cols, needs)
    }

    /// Quantize `x`, row-major `[rows, cols]`, as `needs` says.
    pub fn quantize_for(x: &[f32], rows: usize, cols: usize, needs: Quantization) -> Result<Self, KernelError> {
        let mut this = Self::default();
        this.quantize_into(x, rows, cols, needs)?;
        Ok(this)
    }

    /// Quantize into this value's buffers (reused across calls).
    pub fn quantize_into(
        &mut self,
        x: &[f32],
        rows: usize,
        cols: usize,
        needs: Quantization,
    ) -> Result<(), KernelError> {
        let block = if needs.super_blocks { SUPER_BLOCK } else { BLOCK };
        if !cols.is_multiple_of(block) {
            return Err(KernelError::Cols { cols, block });
        }
        if x.len() != rows * cols {
            return Err(KernelError::Size {
                what: "activations",
                expected: rows * cols,
                got: x.len(),
            });
        }
        self.rows = rows;
        self.blocks = cols / BLOCK;
        self.has_blocks = needs.blocks;
        let quantized = if needs.blocks { rows * self.blocks } else { 0 };
        self.scales.resize(quantized, 0.0);
        self.sums.resize(quantized, 0.0);
        self.isums.resize(quantized, 0);
        self.half_sums.resize(quantized, [0; 2]);
        self.quants.resize(quantized * BLOCK, 0);
        for (((((block, scale), sum), isum), halves), quants) in x
            .chunks_exact(BLOCK)
            .zip(self.scales.iter_mut())
            .zip(self.sums.iter_mut())
            .zip(self.isums.iter_mut())
            .zip(self.half_sums.iter_mut())
            .zip(self.quants.chunks_exact_mut(BLOCK))
        {
            (*scale, *sum, *halves) = quantize_block(block, quants);
            *isum = halves[0] + halves[1];
        }
        if needs.super_blocks {
            self.supers.quantize_into(x, rows, cols);
        } else {
            self.supers = SuperQuants::default();
        }
        Ok(())
    }

    /// The quantizations this value holds.
    pub fn quantization(&self) -> Quantization {
        Quantization {
            blocks: self.has_blocks || self.rows == 0,
            super_blocks: self.supers.rows() == self.rows,
        }
    }

    /// Row `row` in super-blocks of 256 (present when
    /// [`quantization`](Self::quantization) says so). Always inlined: the
    /// VNNI tiles ask for 8 rows per tile, and as a call it was 3.5% of a
    /// prefill.
    #[inline(always)]
    pub(crate) fn super_row(&self, row: usize) -> SuperRow<'_> {
        self.supers.row(row)
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Blocks per row.
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// Scales of row `row`, one per block.
    pub(crate) fn row_scales(&self, row: usize) -> &[f32] {
        &self.scales[row * self.blocks..(row + 1) * self.blocks]
    }

    /// Q8_1 sums of row `row`, one per block.
    pub(crate) fn row_sums(&self, row: usize) -> &[f32] {
        &self.sums[row * self.blocks..(row + 1) * self.blocks]
    }

    /// Exact quant sums of row `row`, one per block.
    pub(crate) fn row_isums(&self, row: usize) -> &[i32] {
        &self.isums[row * self.blocks..(row + 1) * self.blocks]
    }

    /// Exact quant sums of each half block of row `row`.
    pub(crate) fn row_half_sums(&self, row: usize) -> &[[i32; 2]] {
        &self.half_sums[row * self.blocks..(row + 1) * self.blocks]
    }

    /// Quants of row `row`.
    pub(crate) fn row_quants(&self, row: usize) -> &[i8] {
        &self.quants[row * self.blocks * BLOCK..(row + 1) * self.blocks * BLOCK]
    }
}

/// GGML's Q8_0/Q8_1 rounding: `d = max|x| / 127`, `q = round(x / d)` (half
/// away from zero, through the reciprocal as GGML computes it); returns `d`
/// as stored (rounded to f16), Q8_1's `s = d · Σq` (an f16 product) and the
/// exact `Σq` of each half block.
fn quantize_block(x: &[f32], quants: &mut [i8]) -> (f32, f32, [i32; 2]) {
    let (d, inverse) = scale_of(block_amax(x));
    finish(d, quantize_scaled(x, inverse, quants))
}

/// The largest magnitude of a 32-value block. The AVX2 build computes the
/// same value (a maximum does not depend on the order).
pub(crate) fn block_amax(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if crate::Path::detect().has_avx2() {
        // SAFETY: the detected path means the CPU has AVX2; callers pass
        // whole 32-value blocks (asserted there).
        return unsafe { avx2::block_amax(x) };
    }
    block_amax_portable(x)
}

/// The definition [`block_amax`] follows on every path.
fn block_amax_portable(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |m, v| m.max(v.abs()))
}

/// `q = round(x · inverse)` (half away from zero) for a 32-value block;
/// returns the exact `Σq` of each half block. The AVX2 build computes the
/// same values bit for bit (`roundf` was a libm call per value, ~6% of a
/// long prefill).
pub(crate) fn quantize_scaled(x: &[f32], inverse: f32, quants: &mut [i8]) -> [i32; 2] {
    #[cfg(target_arch = "x86_64")]
    if crate::Path::detect().has_avx2() {
        // SAFETY: the detected path means the CPU has AVX2; callers pass
        // whole 32-value blocks (asserted there).
        return unsafe { avx2::quantize_scaled(x, inverse, quants) };
    }
    quantize_scaled_portable(x, inverse, quants)
}

/// The definition [`quantize_scaled`] follows on every path.
fn quantize_scaled_portable(x: &[f32], inverse: f32, quants: &mut [i8]) -> [i32; 2] {
    let mut halves = [0i32; 2];
    for (i, (q, &v)) in quants.iter_mut().zip(x).enumerate() {
        *q = (v * inverse).round() as i8;
        halves[i / (BLOCK / 2)] += *q as i32;
    }
    halves
}

/// `(d, 1/d)` for a block whose largest magnitude is `amax` (`1/d = 0` for an all-zero block).
pub(crate) fn scale_of(amax: f32) -> (f32, f32) {
    let d = amax / 127.0;
    (d, if d != 0.0 { 1.0 / d } else { 0.0 })
}

/// The stored scale, the Q8_1 sum and the half sums of a quantized block.
fn finish(d: f32, halves: [i32; 2]) -> (f32, f32, [i32; 2]) {
    let d = f16::from_f32(d);
    let sum = halves[0] + halves[1];
    (d.to_f32(), (f16::from_f32(sum as f32) * d).to_f32(), halves)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// The eight-lane registers of a 32-value block.
    ///
    /// # Safety
    /// The CPU has AVX2. (`x` must hold at least 32 values; that is
    /// asserted, so a short slice panics.)
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn load_block(x: &[f32]) -> [__m256; 4] {
        assert!(x.len() >= 32, "a whole block");
        // SAFETY: `x` holds 32 values (checked above).
        unsafe {
            [
                _mm256_loadu_ps(x.as_ptr()),
                _mm256_loadu_ps(x.as_ptr().add(8)),
                _mm256_loadu_ps(x.as_ptr().add(16)),
                _mm256_loadu_ps(x.as_ptr().add(24)),
            ]
        }
    }

    /// [`super::block_amax_portable`] with AVX2.
    ///
    /// # Safety
    /// As [`load_block`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn block_amax(x: &[f32]) -> f32 {
        // SAFETY: the caller's contract.
        let v = unsafe { load_block(x) };
        let sign = _mm256_set1_ps(-0.0);
        let m = _mm256_max_ps(
            _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
            _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])),
        );
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)))
    }

    /// [`super::quantize_scaled_portable`] with AVX2: rounding half away
    /// from zero as `trunc(y) ± (|y − trunc(y)| ≥ ½)`, which is exact (the
    /// fraction of a float is computed without error).
    ///
    /// # Safety
    /// The CPU has AVX2. (`x` and `quants` must hold at least 32 values each;
    /// that is asserted, so a short slice panics.)
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize_scaled(x: &[f32], inverse: f32, quants: &mut [i8]) -> [i32; 2] {
        assert!(quants.len() >= 32, "a whole block");
        // SAFETY: the caller's contract.
        let v = unsafe { load_block(x) };
        let inverse = _mm256_set1_ps(inverse);
        let q = [
            round_half_away(_mm256_mul_ps(v[0], inverse)),
            round_half_away(_mm256_mul_ps(v[1], inverse)),
            round_half_away(_mm256_mul_ps(v[2], inverse)),
            round_half_away(_mm256_mul_ps(v[3], inverse)),
        ];
        let halves = [sum(q[0], q[1]), sum(q[2], q[3])];
        // Packing interleaves the 128-bit lanes: four-byte units come out as
        // q0a q1a q2a q3a | q0b q1b q2b q3b; the permutation restores the order.
        let packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        let ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        // SAFETY: `quants` holds 32 bytes (checked above).
        unsafe { _mm256_storeu_si256(quants.as_mut_ptr().cast(), ordered) };
        halves
    }

    /// `round(y)` half away from zero, as integers (no closure: it would not
    /// inline under the caller's target features).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn round_half_away(y: __m256) -> __m256i {
        let sign = _mm256_set1_ps(-0.0);
        let t = _mm256_round_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        let away = _mm256_cmp_ps(
            _mm256_andnot_ps(sign, _mm256_sub_ps(y, t)),
            _mm256_set1_ps(0.5),
            _CMP_GE_OQ,
        );
        let step = _mm256_and_ps(away, _mm256_or_ps(_mm256_set1_ps(1.0), _mm256_and_ps(y, sign)));
        _mm256_cvttps_epi32(_mm256_add_ps(t, step))
    }

    /// The sum of the sixteen i32 lanes of `a` and `b`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn sum(a: __m256i, b: __m256i) -> i32 {
        let s = _mm256_add_epi32(a, b);
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
        _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_half_away_and_keep_the_f16_scale() {
        let mut x = vec![0f32; 32];
        x[0] = 127.0;
        x[1] = -0.5;
        x[2] = 0.5;
        x[3] = 2.5;
        x[4] = -127.0;
        let a = Q8Activations::quantize(&x, 1, 32).unwrap();
        assert_eq!(a.row_scales(0), &[1.0]);
        assert_eq!(&a.row_quants(0)[..5], &[127, -1, 1, 3, -127]);
        let zero = Q8Activations::quantize(&[0.0; 64], 2, 32).unwrap();
        assert!(zero.row_quants(1).iter().all(|&q| q == 0) && zero.row_scales(1) == [0.0]);
        let odd = Q8Activations::quantize(&[1.0; 3], 1, 3).unwrap_err();
        assert_eq!(odd, KernelError::Cols { cols: 3, block: 32 });
        assert!(matches!(
            Q8Activations::quantize(&[1.0; 33], 1, 32),
            Err(KernelError::Size { .. })
        ));
    }

    #[test]
    fn every_path_quantizes_a_block_alike() {
        // Exact halves after scaling (amax 127: d = 1), ties on both sides,
        // zeros, and pseudo-random blocks of several magnitudes.
        let mut blocks = vec![
            [
                0.5,
                -0.5,
                1.5,
                -1.5,
                2.5,
                -2.5,
                127.0,
                -0.49999997,
                0.49999997,
                126.5,
                -126.5,
                0.0,
                -0.0,
            ]
            .iter()
            .copied()
            .chain(std::iter::repeat_n(3.5, 19))
            .collect::<Vec<f32>>(),
            vec![0.0; 32],
        ];
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for scale in [1e-6f32, 0.3, 7.0, 3e4] {
            for _ in 0..50 {
                blocks.push(
                    (0..32)
                        .map(|_| {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            ((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * scale
                        })
                        .collect(),
                );
            }
        }
        for block in &blocks {
            let amax = block_amax_portable(block);
            assert_eq!(block_amax(block).to_bits(), amax.to_bits(), "amax of {block:?}");
            let (_, inverse) = scale_of(amax);
            let mut want = [0i8; 32];
            let expected = quantize_scaled_portable(block, inverse, &mut want);
            let mut got = [0i8; 32];
            let result = quantize_scaled(block, inverse, &mut got);
            assert_eq!(got, want, "quants of {block:?}");
            assert_eq!(result, expected);
        }
    }

    #[test]
    fn scale_is_rounded_through_f16() {
        let x: Vec<f32> = (0..32).map(|i| 0.001 * i as f32 + 0.1).collect();
        let a = Q8Activations::quantize(&x, 1, 32).unwrap();
        let exact = x.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
        assert_eq!(a.row_scales(0)[0], f16::from_f32(exact).to_f32());
        assert_ne!(a.row_scales(0)[0], exact);
    }
}
