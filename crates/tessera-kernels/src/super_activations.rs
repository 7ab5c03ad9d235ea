//! Activations quantized per 256 values for the K-quants (GGML's Q8_K in
//! spirit): one f32 scale per super-block (`d = max|x| / 127`, not rounded),
//! 256 signed bytes rounded as the 32-value blocks are, and the exact sums of
//! each run of 16 and of 32 quants (what the formats' minimums and offsets
//! multiply). With one activation scale per 256 values a K-quant kernel
//! applies its sub-block scales in integers and takes one float step per
//! super-block instead of one per 16 or 32 values.

use crate::activations::{block_amax, quantize_scaled, scale_of};
use crate::BLOCK;

/// Values per super-block.
pub const SUPER_BLOCK: usize = 256;

/// The super-block quantization of a `[rows, cols]` activation matrix.
#[derive(Debug, Clone, Default)]
pub(crate) struct SuperQuants {
    rows: usize,
    supers: usize,
    scales: Vec<f32>,
    quants: Vec<i8>,
    sums16: Vec<i16>,
    sums32: Vec<i16>,
}

/// One activation row's super-block quantization.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SuperRow<'a> {
    /// One scale per super-block.
    pub(crate) scales: &'a [f32],
    /// The quants, `cols` of them.
    pub(crate) quants: &'a [i8],
    /// The exact sum of each run of 16 quants (|Σ| ≤ 16·127).
    pub(crate) sums16: &'a [i16],
    /// The exact sum of each run of 32 quants (|Σ| ≤ 32·127).
    pub(crate) sums32: &'a [i16],
}

impl SuperQuants {
    /// Quantize `x`, `[rows, cols]` with `cols` a multiple of 256 (the
    /// caller checks), reusing this value's buffers.
    pub(crate) fn quantize_into(&mut self, x: &[f32], rows: usize, cols: usize) {
        self.rows = rows;
        self.supers = cols / SUPER_BLOCK;
        let supers = rows * self.supers;
        self.scales.resize(supers, 0.0);
        self.quants.resize(supers * SUPER_BLOCK, 0);
        self.sums16.resize(supers * SUPER_BLOCK / 16, 0);
        self.sums32.resize(supers * SUPER_BLOCK / BLOCK, 0);
        let parts = x
            .chunks_exact(SUPER_BLOCK)
            .zip(self.scales.iter_mut())
            .zip(self.quants.chunks_exact_mut(SUPER_BLOCK))
            .zip(self.sums16.chunks_exact_mut(SUPER_BLOCK / 16))
            .zip(self.sums32.chunks_exact_mut(SUPER_BLOCK / BLOCK));
        for ((((values, scale), quants), sums16), sums32) in parts {
            let amax = values.chunks_exact(BLOCK).map(block_amax).fold(0f32, f32::max);
            let (d, inverse) = scale_of(amax);
            *scale = d;
            for (b, (block, quants)) in values
                .chunks_exact(BLOCK)
                .zip(quants.chunks_exact_mut(BLOCK))
                .enumerate()
            {
                let halves = quantize_scaled(block, inverse, quants);
                // |Σ| ≤ 16·127 and 32·127: exact in 16 bits.
                sums16[2 * b] = halves[0] as i16;
                sums16[2 * b + 1] = halves[1] as i16;
                sums32[b] = (halves[0] + halves[1]) as i16;
            }
        }
    }

    /// Rows quantized (0 when the activations were not asked for per 256 values).
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Row `row` (inlined: the tiles ask for it per weight group).
    #[inline(always)]
    pub(crate) fn row(&self, row: usize) -> SuperRow<'_> {
        let supers = self.supers;
        SuperRow {
            scales: &self.scales[row * supers..(row + 1) * supers],
            quants: &self.quants[row * supers * SUPER_BLOCK..(row + 1) * supers * SUPER_BLOCK],
            sums16: &self.sums16[row * supers * 16..(row + 1) * supers * 16],
            sums32: &self.sums32[row * supers * 8..(row + 1) * supers * 8],
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Q8Activations, Quantization};

    #[test]
    fn one_scale_per_super_block_and_exact_run_sums() {
        let mut x: Vec<f32> = (0..512).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.01).collect();
        x[300] = 2.54;
        let a = Q8Activations::quantize_for(&x, 1, 512, Quantization::SUPER_BLOCKS).unwrap();
        let row = a.super_row(0);
        assert_eq!(row.scales[1], 2.54 / 127.0);
        assert_eq!(row.quants[300], 127);
        for (run, &sum) in row.sums16.iter().enumerate() {
            let want: i32 = row.quants[run * 16..run * 16 + 16].iter().map(|&q| q as i32).sum();
            assert_eq!(sum as i32, want);
        }
        for (run, &sum) in row.sums32.iter().enumerate() {
            assert_eq!(sum, row.sums16[2 * run] + row.sums16[2 * run + 1]);
        }
        let odd = Q8Activations::quantize_for(&x[..320], 1, 320, Quantization::SUPER_BLOCKS).unwrap_err();
        assert_eq!(odd, crate::KernelError::Cols { cols: 320, block: 256 });
    }
}
