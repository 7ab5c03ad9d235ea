//! Q3_K (GGML's 3-bit K-quant): super-blocks of 256 values, an f16 `d`, 16
//! 6-bit scales packed in 12 bytes (one per 16 values), 2-bit low parts
//! (`qs`, four sub-blocks per byte) and a high-bit mask (`hmask`); value `v`
//! is `d·(scale_{v/16} − 32)·(q_v − 4)` with `q = low | high << 2` in 0..8.
//!
//! Repacked at load into groups of [`GROUP`] rows, the scales unpacked to one
//! signed byte each (`scale − 32`; 114 bytes per row and super-block against
//! GGML's 110: 3.56 bits per weight instead of 3.44). Per group and
//! super-block (912 bytes):
//!
//! ```text
//! bytes     0..16    d of rows 0..8 (f16)
//! bytes    16..144   scale i − 32 of row r at 8i + r (i8)
//! bytes   144..400   eight registers; register t, lane r = row r's hmask
//!                    bytes 4t..4t+4 (bit j: sub-block j's high bit)
//! bytes   400..912   per 128-value chunk, eight registers; register t,
//!                    lane r = row r's qs bytes 4t..4t+4 of the chunk (bits
//!                    2k..2k+2: sub-block k of the chunk)
//! ```
//!
//! Per half block the kernel sums exact products `Σq·y` with `q` in 0..8,
//! subtracts `4·Σy` (the activations' half-block sums) and scales:
//! `sum += ((Σ(q−4)·y)·(d·(scale − 32)))·d_y`, as Q6_K does with 32.

use crate::q4::GROUP;
use crate::q4_k::SUPER_BLOCK;
use crate::super_rows::{super_rows_accessors, SuperRows};
use crate::{KernelError, BLOCK};
use half::f16;

/// GGML's Q3_K block: `hmask[32]`, `qs[64]`, `scales[12]`, `d`.
pub const GGML_BLOCK_BYTES: usize = SUPER_BLOCK / 8 + SUPER_BLOCK / 4 + 12 + 2;
/// Offsets inside a group's super-block.
pub(crate) const SCALES_AT: usize = 2 * GROUP;
pub(crate) const HMASK_AT: usize = SCALES_AT + 16 * GROUP;
pub(crate) const QS_AT: usize = HMASK_AT + 8 * 32;
/// Bytes of one group's super-block.
const GROUP_SUPER_BYTES: usize = QS_AT + 2 * 8 * 32;
/// Sub-blocks of 32 values per super-block.
pub(crate) const SUB_BLOCKS: usize = SUPER_BLOCK / BLOCK;

/// The 16 scales of a GGML Q3_K block, `scale − 32` (GGML's unpacking of
/// twelve bytes into sixteen 6-bit values).
fn unpack_scales(packed: &[u8]) -> [i8; 16] {
    const LOW: u32 = 0x0F0F_0F0F;
    const HIGH: u32 = 0x0303_0303;
    let word = |i: usize| u32::from_le_bytes([packed[4 * i], packed[4 * i + 1], packed[4 * i + 2], packed[4 * i + 3]]);
    let (a, b, tmp) = (word(0), word(1), word(2));
    let aux = [
        (a & LOW) | ((tmp & HIGH) << 4),
        (b & LOW) | (((tmp >> 2) & HIGH) << 4),
        ((a >> 4) & LOW) | (((tmp >> 4) & HIGH) << 4),
        ((b >> 4) & LOW) | (((tmp >> 6) & HIGH) << 4),
    ];
    std::array::from_fn(|i| (aux[i / 4].to_le_bytes()[i % 4] as i32 - 32) as i8)
}

/// A `[rows, cols]` Q3_K matrix in row groups (rows past the last multiple
/// of 8 are zero blocks).
#[derive(Debug, Clone)]
pub struct Q3KWeights(SuperRows);

super_rows_accessors!(Q3KWeights, 0);

impl Q3KWeights {
    /// Repack GGML Q3_K bytes of a `[rows, cols]` matrix (`cols` a multiple of 256).
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        let sizes = (GGML_BLOCK_BYTES, GROUP_SUPER_BYTES);
        SuperRows::repack("Q3_K weights", bytes, (rows, cols), sizes, place).map(Self)
    }
}

/// Write a row's GGML super-block `src` into lane `lane` of its group super-block `dst`.
fn place(dst: &mut [u8], lane: usize, src: &[u8]) {
    let (hmask, qs, scales) = (&src[..32], &src[32..96], &src[96..108]);
    dst[2 * lane..2 * lane + 2].copy_from_slice(&src[108..110]);
    for (i, scale) in unpack_scales(scales).into_iter().enumerate() {
        dst[SCALES_AT + i * GROUP + lane] = scale as u8;
    }
    for t in 0..8 {
        let at = HMASK_AT + t * 32 + lane * 4;
        dst[at..at + 4].copy_from_slice(&hmask[t * 4..][..4]);
        for chunk in 0..2 {
            let at = qs_at(chunk, t) + lane * 4;
            dst[at..at + 4].copy_from_slice(&qs[chunk * 32 + t * 4..][..4]);
        }
    }
}

impl Q3KWeights {
    /// `([d·(scale − 32) of the low half, of the high half], quants 0–7)` of
    /// row `row`, block `b`, as every path forms them.
    pub(crate) fn block(&self, row: usize, b: usize) -> ([f32; 2], [u8; BLOCK]) {
        let data = self.group_super(row / GROUP, b / SUB_BLOCKS);
        let (lane, j) = (row % GROUP, b % SUB_BLOCKS);
        let (chunk, k) = (j / 4, j % 4);
        let d = f16::from_le_bytes([data[2 * lane], data[2 * lane + 1]]).to_f32();
        let scale = |half: usize| d * data[SCALES_AT + (2 * j + half) * GROUP + lane] as i8 as f32;
        let quants = std::array::from_fn(|v| {
            let byte = lane * 4 + v % 4;
            let low = (data[qs_at(chunk, v / 4) + byte] >> (2 * k)) & 3;
            let high = (data[HMASK_AT + (v / 4) * 32 + byte] >> j) & 1;
            low | (high << 2)
        });
        ([scale(0), scale(1)], quants)
    }

    /// Row `row` dequantized as GGML (and candle) define it: `d·(scale − 32)·(q − 4)`.
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        (0..self.blocks())
            .flat_map(|b| {
                let (scales, quants) = self.block(row, b);
                (0..BLOCK).map(move |v| scales[v / 16] * (quants[v] as i32 - 4) as f32)
            })
            .collect()
    }
}

/// Where register `t` of chunk `chunk`'s `qs` starts.
pub(crate) fn qs_at(chunk: usize, t: usize) -> usize {
    QS_AT + (chunk * 8 + t) * 32
}
