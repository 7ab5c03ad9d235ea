//! Q8_0 weights, repacked at load from GGML's 34-byte blocks (an f16 scale
//! then 32 signed bytes) into f32 scales and the bytes, both interleaved by
//! groups of [`GROUP`] rows: block `b` of rows `4g..4g+4` lies together, so a
//! decode tile over four rows reads one linear stream. (Row-major rows made
//! four short streams of 576 bytes each, which the hardware prefetcher never
//! caught up with: the LM head ran at half the bandwidth of the Q4_1
//! matrices, measured.) Scales are converted once, never in the inner loop.

use crate::{KernelError, BLOCK};
use half::f16;

/// GGML's Q8_0 block: 2 bytes of f16 scale, 32 bytes of quants.
pub const GGML_BLOCK_BYTES: usize = 2 + BLOCK;
/// Rows interleaved block by block.
pub(crate) const GROUP: usize = 4;
/// Distance in quants between a row's block and its next block.
pub(crate) const QUANT_STRIDE: usize = GROUP * BLOCK;

/// A `[rows, cols]` Q8_0 matrix (`y = x Wᵀ`: one row per output).
#[derive(Debug, Clone)]
pub struct Q8_0Weights {
    rows: usize,
    cols: usize,
    /// Per group of four rows, per block: the four rows' scales.
    scales: Vec<f32>,
    /// Per group of four rows, per block: the four rows' 32 quants.
    quants: Vec<i8>,
}

impl Q8_0Weights {
    /// Repack GGML Q8_0 bytes of a `[rows, cols]` matrix (rows past the last
    /// multiple of four are padded with zero blocks).
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        if !cols.is_multiple_of(BLOCK) {
            return Err(KernelError::Cols { cols, block: BLOCK });
        }
        let blocks = cols / BLOCK;
        if bytes.len() != rows * blocks * GGML_BLOCK_BYTES {
            return Err(KernelError::Size {
                what: "Q8_0 weights",
                expected: rows * blocks * GGML_BLOCK_BYTES,
                got: bytes.len(),
            });
        }
        let padded = rows.next_multiple_of(GROUP) * blocks;
        let mut weights = Self {
            rows,
            cols,
            scales: vec![0.0; padded],
            quants: vec![0; padded * BLOCK],
        };
        for (index, block) in bytes.chunks_exact(GGML_BLOCK_BYTES).enumerate() {
            let (row, b) = (index / blocks, index % blocks);
            let at = weights.slot(row, b);
            weights.scales[at] = f16::from_le_bytes([block[0], block[1]]).to_f32();
            for (dst, &src) in weights.quants[at * BLOCK..][..BLOCK].iter_mut().zip(&block[2..]) {
                *dst = src as i8;
            }
        }
        Ok(weights)
    }

    /// Index of row `row`, block `block` among the scales (× 32 among the quants).
    fn slot(&self, row: usize, block: usize) -> usize {
        ((row / GROUP) * self.blocks() + block) * GROUP + row % GROUP
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

    /// Scale of row `row`, block `block`.
    pub(crate) fn scale(&self, row: usize, block: usize) -> f32 {
        self.scales[self.slot(row, block)]
    }

    /// Quants of row `row`, block `block`.
    pub(crate) fn block_quants(&self, row: usize, block: usize) -> &[i8] {
        &self.quants[self.slot(row, block) * BLOCK..][..BLOCK]
    }

    /// Row `row`'s first scale and first quant; block `b`'s lie `b · GROUP`
    /// scales and `b · QUANT_STRIDE` quants further (the x86 tiles).
    pub(crate) fn row_start(&self, row: usize) -> (*const f32, *const i8) {
        let at = self.slot(row, 0);
        (self.scales[at..].as_ptr(), self.quants[at * BLOCK..].as_ptr())
    }

    /// Bytes held (for bandwidth figures).
    pub fn bytes(&self) -> usize {
        self.scales.len() * 4 + self.quants.len()
    }

    /// Row `row` dequantized (tests and references).
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        (0..self.blocks())
            .flat_map(|b| {
                let d = self.scale(row, b);
                self.block_quants(row, b).iter().map(move |&v| v as f32 * d)
            })
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
        assert_eq!(w.scale(1, 0), 2.0);
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
