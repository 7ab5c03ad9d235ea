//! Q8_0 weights, repacked at load from GGML's 34-byte blocks (an f16 scale
//! then 32 signed bytes) into two linear arrays: f32 scales and the bytes,
//! row-major. The kernels then read each row as one stream and never convert
//! a scale in the inner loop.

use crate::{KernelError, BLOCK};
use half::f16;

/// GGML's Q8_0 block: 2 bytes of f16 scale, 32 bytes of quants.
pub const GGML_BLOCK_BYTES: usize = 2 + BLOCK;

/// A `[rows, cols]` Q8_0 matrix (`y = x Wᵀ`: one row per output).
#[derive(Debug, Clone)]
pub struct Q8_0Weights {
    rows: usize,
    cols: usize,
    scales: Vec<f32>,
    quants: Vec<i8>,
}

impl Q8_0Weights {
    /// Repack GGML Q8_0 bytes of a `[rows, cols]` matrix.
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        if !cols.is_multiple_of(BLOCK) {
            return Err(KernelError::Cols { cols, block: BLOCK });
        }
        let blocks = rows * cols / BLOCK;
        if bytes.len() != blocks * GGML_BLOCK_BYTES {
            return Err(KernelError::Size {
                what: "Q8_0 weights",
                expected: blocks * GGML_BLOCK_BYTES,
                got: bytes.len(),
            });
        }
        let mut scales = Vec::with_capacity(blocks);
        let mut quants = Vec::with_capacity(blocks * BLOCK);
        for block in bytes.chunks_exact(GGML_BLOCK_BYTES) {
            scales.push(f16::from_le_bytes([block[0], block[1]]).to_f32());
            quants.extend(block[2..].iter().map(|&b| b as i8));
        }
        Ok(Self {
            rows,
            cols,
            scales,
            quants,
        })
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Inner dimension.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Blocks per row.
    pub fn blocks(&self) -> usize {
        self.cols / BLOCK
    }

    /// Scales of row `row`.
    pub(crate) fn row_scales(&self, row: usize) -> &[f32] {
        let blocks = self.blocks();
        &self.scales[row * blocks..(row + 1) * blocks]
    }

    /// Quants of row `row`.
    pub(crate) fn row_quants(&self, row: usize) -> &[i8] {
        &self.quants[row * self.cols..(row + 1) * self.cols]
    }

    /// Bytes held (for bandwidth figures).
    pub fn bytes(&self) -> usize {
        self.scales.len() * 4 + self.quants.len()
    }

    /// Row `row` dequantized (tests and references).
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        let scales = self.row_scales(row);
        self.row_quants(row)
            .chunks_exact(BLOCK)
            .zip(scales)
            .flat_map(|(q, &d)| q.iter().map(move |&v| v as f32 * d))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repacks_ggml_blocks() {
        let mut bytes = Vec::new();
        for (scale, first) in [(0.5f32, 4i8), (2.0, -3)] {
            bytes.extend_from_slice(&f16::from_f32(scale).to_le_bytes());
            bytes.extend((0..32).map(|i| if i == 0 { first as u8 } else { 1u8 }));
        }
        let w = Q8_0Weights::from_ggml(&bytes, 2, 32).unwrap();
        assert_eq!(w.row_scales(1), &[2.0]);
        assert_eq!(w.dequantize_row(0)[..2], [2.0, 0.5]);
        assert_eq!(w.dequantize_row(1)[0], -6.0);
        assert!(matches!(
            Q8_0Weights::from_ggml(&bytes, 3, 32),
            Err(KernelError::Size { .. })
        ));
        assert!(matches!(
            Q8_0Weights::from_ggml(&[], 1, 20),
            Err(KernelError::Cols { .. })
        ));
    }
}
