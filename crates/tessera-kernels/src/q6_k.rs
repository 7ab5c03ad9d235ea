//! Q6_K (GGML's 6-bit K-quant): super-blocks of 256 values, an f16 `d`, 16
//! signed 8-bit scales (one per 16 values) and 6-bit quants split into low
//! nibbles (`ql`) and 2-bit high parts (`qh`); value `v` is
//! `d·scale_{v/16}·(q_v − 32)`.
//!
//! At load the quants are unpacked to bytes (0–63) and the scales to f32
//! `d·scale`, in groups of [`GROUP`] rows laid out like the 4-bit formats
//! (eight rows in the eight 32-bit lanes of a register, no horizontal sums).
//! Per group and 32-value block (320 bytes):
//!
//! ```text
//! bytes   0..32   d·scale of the block's first 16 values, rows 0..8 (f32)
//! bytes  32..64   d·scale of its last 16 values, rows 0..8 (f32)
//! bytes  64..320  eight 32-byte registers; register t, lane r = row r's
//!                 quants 4t..4t+4
//! ```
//!
//! Per half block the kernel sums exact integer products `Σq·y` (two
//! `maddubs` in 16 bits: |Σ| ≤ 2·2·63·128 < 2¹⁵), subtracts `32·Σy` (the
//! activations' exact half-block sums) and scales:
//! `sum += ((Σ(q−32)·y)·ds_lo)·d_y`, then the same for the high half.
//! Cost: 40 bytes per 32 weights against Q6_K's 26 (decode reads half again
//! as much as llama.cpp on these matrices).

use crate::{KernelError, BLOCK};
use half::f16;

/// Rows computed together.
pub const GROUP: usize = 8;
/// Values per super-block.
pub const SUPER_BLOCK: usize = 256;
/// GGML's Q6_K block: `ql[128]`, `qh[64]`, `scales[16]`, `d`.
pub const GGML_BLOCK_BYTES: usize = SUPER_BLOCK / 2 + SUPER_BLOCK / 4 + SUPER_BLOCK / 16 + 2;
/// Offset of the quant registers in a group block.
pub(crate) const QUANTS_AT: usize = 2 * GROUP * 4;
/// Bytes of one group's block.
const GROUP_BLOCK_BYTES: usize = QUANTS_AT + GROUP * BLOCK;

/// A `[rows, cols]` Q6_K matrix in row groups (rows past the last multiple
/// of 8 are zero blocks).
#[derive(Debug, Clone)]
pub struct Q6KWeights {
    rows: usize,
    cols: usize,
    data: Vec<u8>,
}

/// One super-block unpacked: quants 0–63 and the 16 scales `d·scale`.
fn unpack(src: &[u8]) -> ([u8; SUPER_BLOCK], [f32; SUPER_BLOCK / 16]) {
    let (ql, qh, scales) = (&src[..128], &src[128..192], &src[192..208]);
    let d = f16::from_le_bytes([src[208], src[209]]).to_f32();
    let mut quants = [0u8; SUPER_BLOCK];
    for chunk in 0..2 {
        let (ql, qh) = (&ql[chunk * 64..][..64], &qh[chunk * 32..][..32]);
        for l in 0..32 {
            let q = &mut quants[chunk * 128..][..128];
            q[l] = (ql[l] & 0x0F) | ((qh[l] & 3) << 4);
            q[l + 32] = (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4);
            q[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            q[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
    let scales = std::array::from_fn(|i| d * scales[i] as i8 as f32);
    (quants, scales)
}

impl Q6KWeights {
    /// Convert GGML Q6_K bytes of a `[rows, cols]` matrix (`cols` a multiple of 256).
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        crate::q4_k::check_super_blocks("Q6_K weights", bytes.len(), (rows, cols), GGML_BLOCK_BYTES)?;
        let blocks = cols / BLOCK;
        let mut this = Self {
            rows,
            cols,
            data: vec![0u8; rows.div_ceil(GROUP) * blocks * GROUP_BLOCK_BYTES],
        };
        let supers = cols / SUPER_BLOCK;
        for (index, src) in bytes.chunks_exact(GGML_BLOCK_BYTES).enumerate() {
            let (row, first_block) = (index / supers, (index % supers) * (SUPER_BLOCK / BLOCK));
            let (quants, scales) = unpack(src);
            for sub in 0..SUPER_BLOCK / BLOCK {
                let lane = row % GROUP;
                let dst = this.group_block_mut(row / GROUP, first_block + sub);
                for half in 0..2 {
                    let at = (half * GROUP + lane) * 4;
                    dst[at..at + 4].copy_from_slice(&scales[sub * 2 + half].to_le_bytes());
                }
                for t in 0..BLOCK / 4 {
                    let at = QUANTS_AT + t * 32 + lane * 4;
                    dst[at..at + 4].copy_from_slice(&quants[sub * BLOCK + t * 4..][..4]);
                }
            }
        }
        Ok(this)
    }

    fn group_block_mut(&mut self, group: usize, block: usize) -> &mut [u8] {
        let at = (group * self.blocks() + block) * GROUP_BLOCK_BYTES;
        &mut self.data[at..at + GROUP_BLOCK_BYTES]
    }

    /// Group `group`, block `block`: the 320 bytes described above.
    pub(crate) fn group_block(&self, group: usize, block: usize) -> &[u8] {
        &self.data[(group * self.blocks() + block) * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES]
    }

    /// `([scale of the low half, of the high half], quants 0–63)` of row `row`, block `block`.
    pub(crate) fn block(&self, row: usize, block: usize) -> ([f32; 2], [u8; BLOCK]) {
        let data = self.group_block(row / GROUP, block);
        let lane = row % GROUP;
        let scale = |half: usize| {
            let at = (half * GROUP + lane) * 4;
            f32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
        };
        let quants = std::array::from_fn(|v| data[QUANTS_AT + (v / 4) * 32 + lane * 4 + v % 4]);
        ([scale(0), scale(1)], quants)
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Blocks of 32 per row.
    pub fn blocks(&self) -> usize {
        self.cols / BLOCK
    }

    /// Bytes held (for bandwidth figures).
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Row `row` dequantized (tests and references).
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        (0..self.blocks())
            .flat_map(|b| {
                let (scales, quants) = self.block(row, b);
                (0..BLOCK).map(move |v| scales[v / 16] * (quants[v] as f32 - 32.0))
            })
            .collect()
    }
}
