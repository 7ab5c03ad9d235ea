//! Activations quantized per row in blocks of 32: one scale (rounded through
//! f16, as GGML stores it, and kept as f32) and 32 signed bytes per block.
//! Done once per matrix product, whatever the number of workers.

use crate::{KernelError, BLOCK};
use half::f16;

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
}

impl Q8Activations {
    /// Quantize `x`, row-major `[rows, cols]`.
    pub fn quantize(x: &[f32], rows: usize, cols: usize) -> Result<Self, KernelError> {
        let mut this = Self::default();
        this.quantize_into(x, rows, cols)?;
        Ok(this)
    }

    /// Quantize into this value's buffers (reused across calls).
    pub fn quantize_into(&mut self, x: &[f32], rows: usize, cols: usize) -> Result<(), KernelError> {
        if !cols.is_multiple_of(BLOCK) {
            return Err(KernelError::Cols { cols, block: BLOCK });
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
        self.scales.resize(rows * self.blocks, 0.0);
        self.sums.resize(rows * self.blocks, 0.0);
        self.isums.resize(rows * self.blocks, 0);
        self.half_sums.resize(rows * self.blocks, [0; 2]);
        self.quants.resize(rows * cols, 0);
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
        Ok(())
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
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let inverse = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut halves = [0i32; 2];
    for (i, (q, &v)) in quants.iter_mut().zip(x).enumerate() {
        *q = (v * inverse).round() as i8;
        halves[i / (BLOCK / 2)] += *q as i32;
    }
    let d = f16::from_f32(d);
    let sum = halves[0] + halves[1];
    (d.to_f32(), (f16::from_f32(sum as f32) * d).to_f32(), halves)
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
    fn scale_is_rounded_through_f16() {
        let x: Vec<f32> = (0..32).map(|i| 0.001 * i as f32 + 0.1).collect();
        let a = Q8Activations::quantize(&x, 1, 32).unwrap();
        let exact = x.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
        assert_eq!(a.row_scales(0)[0], f16::from_f32(exact).to_f32());
        assert_ne!(a.row_scales(0)[0], exact);
    }
}
