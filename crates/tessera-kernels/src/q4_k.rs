//! Q4_K (GGML's 4-bit K-quant): super-blocks of 256 values, an f16 `d` and
//! `dmin`, eight 6-bit scales and mins packed in 12 bytes, 128 bytes of
//! nibbles; value `l` of sub-block `j` is `d·scale_j·q − dmin·min_j`.
//!
//! Repacked at load into groups of [`GROUP`] rows at GGML's own 144 bytes per
//! row and super-block (4.5 bits per weight: decode reads what llama.cpp
//! reads). Per group and super-block (1,152 bytes), with `s[8j + r]` and
//! `m[8j + r]` the 6-bit scale and min of sub-block `j` of row `r`:
//!
//! ```text
//! bytes     0..16    d of rows 0..8 (f16)
//! bytes    16..32    dmin of rows 0..8 (f16)
//! bytes    32..64    byte k: low 4 bits of s[k] | low 4 bits of s[k + 32] << 4
//! bytes    64..96    byte k: the same for m
//! bytes    96..128   byte k: high 2 bits of s[k], s[k + 32], m[k], m[k + 32]
//!                    (bits 0–1, 2–3, 4–5, 6–7)
//! bytes   128..1152  four sub-block pairs of 256 bytes: eight 32-byte
//!                    registers; register t, lane r = row r's GGML bytes
//!                    4t..4t+4 of the pair (low nibbles: sub-block 2p,
//!                    values 4t..4t+4; high nibbles: sub-block 2p + 1)
//! ```
//!
//! The kernels unpack a super-block's 64 scales and 64 mins with a few
//! vector operations, then per sub-block run the 4-bit kernel's arithmetic
//! with `d·scale` and `−dmin·min` formed in f32 (exact products of an f16
//! and a 6-bit integer): `sum += (Σq·y · d·scale) · d_y + (−dmin·min) · s_y`,
//! paired with the same 32-value activation blocks as Q4_1 (candle's Q8_K
//! uses one scale per 256 values, so results agree to activation rounding).

use crate::q4::GROUP;
use crate::{KernelError, BLOCK};
use half::f16;

/// Values per super-block.
pub const SUPER_BLOCK: usize = 256;
/// GGML's Q4_K block: `d`, `dmin`, 12 bytes of scales, 128 of nibbles.
pub const GGML_BLOCK_BYTES: usize = 2 + 2 + 12 + SUPER_BLOCK / 2;
/// Sub-blocks of 32 values per super-block.
pub(crate) const SUB_BLOCKS: usize = SUPER_BLOCK / BLOCK;
/// Offsets inside a group's super-block.
pub(crate) const DMIN_AT: usize = 2 * GROUP;
pub(crate) const SCALES_AT: usize = 4 * GROUP;
pub(crate) const MINS_AT: usize = SCALES_AT + 32;
pub(crate) const HIGH_BITS_AT: usize = MINS_AT + 32;
pub(crate) const NIBBLES_AT: usize = HIGH_BITS_AT + 32;
/// Bytes of one sub-block pair's registers.
pub(crate) const PAIR_BYTES: usize = GROUP * 32;
/// Bytes of one group's super-block (= 8 × GGML's 144).
const GROUP_SUPER_BYTES: usize = NIBBLES_AT + 4 * PAIR_BYTES;

/// `cols` a multiple of 256 and `len` the bytes of `rows × cols / 256` blocks.
pub(crate) fn check_super_blocks(
    what: &'static str,
    len: usize,
    (rows, cols): (usize, usize),
    block_bytes: usize,
) -> Result<(), KernelError> {
    if !cols.is_multiple_of(SUPER_BLOCK) {
        return Err(KernelError::Cols {
            cols,
            block: SUPER_BLOCK,
        });
    }
    let expected = rows * cols / SUPER_BLOCK * block_bytes;
    if len != expected {
        return Err(KernelError::Size {
            what,
            expected,
            got: len,
        });
    }
    Ok(())
}

/// Scale and min of sub-block `j` (GGML's `get_scale_min_k4`).
fn scale_min(j: usize, packed: &[u8]) -> (u8, u8) {
    if j < 4 {
        (packed[j] & 63, packed[j + 4] & 63)
    } else {
        (
            (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4),
            (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
        )
    }
}

/// A `[rows, cols]` Q4_K matrix in row groups at GGML's bytes (rows past the
/// last multiple of 8 are zero blocks).
#[derive(Debug, Clone)]
pub struct Q4KWeights {
    rows: usize,
    cols: usize,
    data: Vec<u8>,
}

impl Q4KWeights {
    /// Repack GGML Q4_K bytes of a `[rows, cols]` matrix (`cols` a multiple of 256).
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        check_super_blocks("Q4_K weights", bytes.len(), (rows, cols), GGML_BLOCK_BYTES)?;
        let supers = cols / SUPER_BLOCK;
        let mut this = Self {
            rows,
            cols,
            data: vec![0u8; rows.div_ceil(GROUP) * supers * GROUP_SUPER_BYTES],
        };
        for (index, src) in bytes.chunks_exact(GGML_BLOCK_BYTES).enumerate() {
            this.place(index / supers, index % supers, src);
        }
        Ok(this)
    }

    /// Write row `row`'s GGML super-block `sb` into its group's lane.
    fn place(&mut self, row: usize, sb: usize, src: &[u8]) {
        let lane = row % GROUP;
        let start = ((row / GROUP) * self.supers() + sb) * GROUP_SUPER_BYTES;
        let dst = &mut self.data[start..start + GROUP_SUPER_BYTES];
        dst[2 * lane..2 * lane + 2].copy_from_slice(&src[0..2]);
        dst[DMIN_AT + 2 * lane..DMIN_AT + 2 * lane + 2].copy_from_slice(&src[2..4]);
        for j in 0..SUB_BLOCKS {
            let (scale, min) = scale_min(j, &src[4..16]);
            let (k, upper) = ((j * GROUP + lane) % 32, j >= 4);
            let shift = if upper { 4 } else { 0 };
            dst[SCALES_AT + k] |= (scale & 0x0F) << shift;
            dst[MINS_AT + k] |= (min & 0x0F) << shift;
            let high = if upper { 2 } else { 0 };
            dst[HIGH_BITS_AT + k] |= ((scale >> 4) << high) | ((min >> 4) << (high + 4));
        }
        let nibbles = &src[16..];
        for p in 0..SUB_BLOCKS / 2 {
            for t in 0..8 {
                let at = NIBBLES_AT + p * PAIR_BYTES + t * 32 + lane * 4;
                dst[at..at + 4].copy_from_slice(&nibbles[p * 32 + t * 4..][..4]);
            }
        }
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Blocks of 32 per row.
    pub fn blocks(&self) -> usize {
        self.cols / BLOCK
    }

    /// Super-blocks per row.
    pub(crate) fn supers(&self) -> usize {
        self.cols / SUPER_BLOCK
    }

    /// Bytes held (for bandwidth figures).
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Group `group`, super-block `sb`: the bytes described in the module docs.
    pub(crate) fn group_super(&self, group: usize, sb: usize) -> &[u8] {
        &self.data[(group * self.supers() + sb) * GROUP_SUPER_BYTES..][..GROUP_SUPER_BYTES]
    }

    /// `(d·scale, −dmin·min)` of row `row`, block `b` (sub-block `b % 8` of
    /// super-block `b / 8`), as every path forms them.
    pub(crate) fn block_factors(&self, row: usize, b: usize) -> (f32, f32) {
        let data = self.group_super(row / GROUP, b / SUB_BLOCKS);
        let lane = row % GROUP;
        let half = |at: usize| f16::from_le_bytes([data[at + 2 * lane], data[at + 2 * lane + 1]]).to_f32();
        let (d, dmin) = (half(0), half(DMIN_AT));
        let j = b % SUB_BLOCKS;
        let (k, upper) = ((j * GROUP + lane) % 32, j >= 4);
        let low = |at: usize| if upper { data[at + k] >> 4 } else { data[at + k] & 0x0F };
        let high = data[HIGH_BITS_AT + k] >> if upper { 2 } else { 0 };
        let scale = low(SCALES_AT) | ((high & 3) << 4);
        let min = low(MINS_AT) | (((high >> 4) & 3) << 4);
        (d * scale as f32, -(dmin * min as f32))
    }

    /// The 32 quants (0–15) of row `row`, block `b`.
    pub(crate) fn block_quants(&self, row: usize, b: usize) -> [u8; BLOCK] {
        let data = self.group_super(row / GROUP, b / SUB_BLOCKS);
        let (lane, j) = (row % GROUP, b % SUB_BLOCKS);
        let pair = &data[NIBBLES_AT + (j / 2) * PAIR_BYTES..][..PAIR_BYTES];
        let mut quants = [0u8; BLOCK];
        for (l, q) in quants.iter_mut().enumerate() {
            let byte = pair[(l / 4) * 32 + lane * 4 + l % 4];
            *q = if j % 2 == 0 { byte & 0x0F } else { byte >> 4 };
        }
        quants
    }

    /// Row `row` dequantized as GGML (and candle) define it: `d·scale·q − dmin·min`.
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        (0..self.blocks())
            .flat_map(|b| {
                let (d, m) = self.block_factors(row, b);
                self.block_quants(row, b).map(|q| q as f32 * d + m)
            })
            .collect()
    }
}
