//! Q2_K (GGML's 2-bit K-quant): super-blocks of 256 values, an f16 `d` and
//! `dmin`, 16 bytes of 4-bit scale and min pairs (one per 16 values) and
//! 2-bit quants (`qs`, four sub-blocks per byte); value `v` is
//! `d·scale·q − dmin·min` with `q` in 0..4.
//!
//! Repacked at load into groups of [`GROUP`] rows at GGML's own 84 bytes per
//! row and super-block (2.625 bits per weight). Per group and super-block
//! (672 bytes):
//!
//! ```text
//! bytes     0..16    d of rows 0..8 (f16)
//! bytes    16..32    dmin of rows 0..8 (f16)
//! bytes    32..160   scale/min byte i of row r at 8i + r (low nibble scale)
//! bytes   160..672   per 128-value chunk, eight registers; register t,
//!                    lane r = row r's qs bytes 4t..4t+4 of the chunk (bits
//!                    2k..2k+2: sub-block k of the chunk)
//! ```
//!
//! Per half block: `sum += ((Σq·y)·(d·scale) − Σy·(dmin·min))·d_y`, the
//! integer sums exact (`Σy` from the activations' half-block sums).

use crate::q4::GROUP;
use crate::q4_k::SUPER_BLOCK;
use crate::super_rows::{super_rows_accessors, SuperRows};
use crate::{KernelError, BLOCK};
use half::f16;

/// GGML's Q2_K block: `scales[16]`, `qs[64]`, `d`, `dmin`.
pub const GGML_BLOCK_BYTES: usize = SUPER_BLOCK / 16 + SUPER_BLOCK / 4 + 2 + 2;
/// Offsets inside a group's super-block.
pub(crate) const DMIN_AT: usize = 2 * GROUP;
pub(crate) const SCALES_AT: usize = 4 * GROUP;
pub(crate) const QS_AT: usize = SCALES_AT + 16 * GROUP;
/// Bytes of one group's super-block (= 8 × GGML's 84).
const GROUP_SUPER_BYTES: usize = QS_AT + 2 * 8 * 32;
/// Sub-blocks of 32 values per super-block.
pub(crate) const SUB_BLOCKS: usize = SUPER_BLOCK / BLOCK;

/// A `[rows, cols]` Q2_K matrix in row groups at GGML's bytes (rows past the
/// last multiple of 8 are zero blocks).
#[derive(Debug, Clone)]
pub struct Q2KWeights(SuperRows);

super_rows_accessors!(Q2KWeights, 0);

/// Where register `t` of chunk `chunk`'s `qs` starts.
pub(crate) fn qs_at(chunk: usize, t: usize) -> usize {
    QS_AT + (chunk * 8 + t) * 32
}

impl Q2KWeights {
    /// Repack GGML Q2_K bytes of a `[rows, cols]` matrix (`cols` a multiple of 256).
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        let sizes = (GGML_BLOCK_BYTES, GROUP_SUPER_BYTES);
        SuperRows::repack("Q2_K weights", bytes, (rows, cols), sizes, place).map(Self)
    }
}

/// Write a row's GGML super-block `src` into lane `lane` of its group super-block `dst`.
fn place(dst: &mut [u8], lane: usize, src: &[u8]) {
    let (scales, qs) = (&src[..16], &src[16..80]);
    dst[2 * lane..2 * lane + 2].copy_from_slice(&src[80..82]);
    dst[DMIN_AT + 2 * lane..DMIN_AT + 2 * lane + 2].copy_from_slice(&src[82..84]);
    for (i, &scale) in scales.iter().enumerate() {
        dst[SCALES_AT + i * GROUP + lane] = scale;
    }
    for chunk in 0..2 {
        for t in 0..8 {
            let at = qs_at(chunk, t) + lane * 4;
            dst[at..at + 4].copy_from_slice(&qs[chunk * 32 + t * 4..][..4]);
        }
    }
}

impl Q2KWeights {
    /// `([(d·scale, dmin·min) of the low half, of the high half], quants 0–3)`
    /// of row `row`, block `b`, as every path forms them.
    pub(crate) fn block(&self, row: usize, b: usize) -> ([(f32, f32); 2], [u8; BLOCK]) {
        let data = self.group_super(row / GROUP, b / SUB_BLOCKS);
        let (lane, j) = (row % GROUP, b % SUB_BLOCKS);
        let (chunk, k) = (j / 4, j % 4);
        let half_of = |at: usize| f16::from_le_bytes([data[at + 2 * lane], data[at + 2 * lane + 1]]).to_f32();
        let (d, dmin) = (half_of(0), half_of(DMIN_AT));
        let factors = |half: usize| {
            let packed = data[SCALES_AT + (2 * j + half) * GROUP + lane];
            (d * (packed & 0x0F) as f32, dmin * (packed >> 4) as f32)
        };
        let quants = std::array::from_fn(|v| (data[qs_at(chunk, v / 4) + lane * 4 + v % 4] >> (2 * k)) & 3);
        ([factors(0), factors(1)], quants)
    }

    /// Row `row` dequantized as GGML (and candle) define it: `d·scale·q − dmin·min`.
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        (0..self.blocks())
            .flat_map(|b| {
                let (factors, quants) = self.block(row, b);
                (0..BLOCK).map(move |v| {
                    let (scale, min) = factors[v / 16];
                    scale * quants[v] as f32 - min
                })
            })
            .collect()
    }
}
