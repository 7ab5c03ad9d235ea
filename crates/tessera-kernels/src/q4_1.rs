//! Q4_1 weights (a scale `d`, a minimum `m` and 32 four-bit values per
//! block: `w = d·q + m`), repacked at load into groups of [`GROUP`] rows laid
//! out for a kernel that computes the eight rows' outputs in the eight 32-bit
//! lanes of one register, with no horizontal sums (the layout of llama.cpp's
//! `q4_0_8x8` repack, for Q4_1). Per group and block (160 bytes, GGML's own
//! 20 bytes per row, so decode reads what llama.cpp reads):
//!
//! ```text
//! bytes   0..16   d of rows 0..8 (f16)
//! bytes  16..32   m of rows 0..8 (f16)
//! bytes  32..160  four 32-byte registers; register t, lane r (bytes 4r..4r+4)
//!                 = row r's GGML nibble bytes 4t..4t+4: low nibbles are
//!                 values 4t..4t+4, high nibbles values 16+4t..16+4t+4
//! ```
//!
//! One `maddubs` of a register's low (or high) nibbles against four
//! activation bytes broadcast to every lane gives each row's products for
//! those four values; eight of them summed in 16 bits (|Σ| ≤ 8·2·15·128 <
//! 2¹⁵, exact) and one `madd` give each row's exact integer block dot.

use crate::{KernelError, BLOCK};
use half::f16;

/// GGML's Q4_1 block: f16 `d`, f16 `m`, 16 bytes of nibbles (low nibbles
/// are values 0–15, high nibbles values 16–31).
pub const GGML_BLOCK_BYTES: usize = 4 + BLOCK / 2;
/// Rows computed together (one AVX2 register of f32 outputs).
pub const GROUP: usize = 8;
/// Bytes of one group's block: 8 `d`, 8 `m` (f16), 8 × 16 nibble bytes.
pub(crate) const GROUP_BLOCK_BYTES: usize = GROUP * 2 * 2 + GROUP * BLOCK / 2;
/// Offset of the nibble registers in a group block.
pub(crate) const NIBBLES_AT: usize = GROUP * 2 * 2;

/// A `[rows, cols]` Q4_1 matrix in row groups.
#[derive(Debug, Clone)]
pub struct Q4_1Weights {
    rows: usize,
    cols: usize,
    /// Per group, per block: the 160 bytes described in the module docs.
    data: Vec<u8>,
}

impl Q4_1Weights {
    /// Repack GGML Q4_1 bytes of a `[rows, cols]` matrix (rows past the last
    /// multiple of 8 are padded with zero blocks).
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        if !cols.is_multiple_of(BLOCK) {
            return Err(KernelError::Cols { cols, block: BLOCK });
        }
        let blocks = cols / BLOCK;
        if bytes.len() != rows * blocks * GGML_BLOCK_BYTES {
            return Err(KernelError::Size {
                what: "Q4_1 weights",
                expected: rows * blocks * GGML_BLOCK_BYTES,
                got: bytes.len(),
            });
        }
        let groups = rows.div_ceil(GROUP);
        let mut data = vec![0u8; groups * blocks * GROUP_BLOCK_BYTES];
        for row in 0..rows {
            for b in 0..blocks {
                let src = &bytes[(row * blocks + b) * GGML_BLOCK_BYTES..][..GGML_BLOCK_BYTES];
                let dst = &mut data[((row / GROUP) * blocks + b) * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES];
                let lane = row % GROUP;
                dst[lane * 2..lane * 2 + 2].copy_from_slice(&src[0..2]);
                dst[16 + lane * 2..16 + lane * 2 + 2].copy_from_slice(&src[2..4]);
                for t in 0..4 {
                    let at = NIBBLES_AT + t * 32 + lane * 4;
                    dst[at..at + 4].copy_from_slice(&src[4 + t * 4..8 + t * 4]);
                }
            }
        }
        Ok(Self { rows, cols, data })
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Blocks per row.
    pub fn blocks(&self) -> usize {
        self.cols / BLOCK
    }

    /// Bytes held (for bandwidth figures).
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Group `group`, block `block`: the 160 bytes described above.
    pub(crate) fn group_block(&self, group: usize, block: usize) -> &[u8] {
        &self.data[(group * self.blocks() + block) * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES]
    }

    /// `(d, m, GGML nibble bytes)` of row `row`, block `block`.
    pub(crate) fn block(&self, row: usize, block: usize) -> (f32, f32, [u8; BLOCK / 2]) {
        let data = self.group_block(row / GROUP, block);
        let lane = row % GROUP;
        let read = |at: usize| f16::from_le_bytes([data[at], data[at + 1]]).to_f32();
        let mut nibbles = [0u8; BLOCK / 2];
        for t in 0..4 {
            let at = NIBBLES_AT + t * 32 + lane * 4;
            nibbles[t * 4..t * 4 + 4].copy_from_slice(&data[at..at + 4]);
        }
        (read(lane * 2), read(16 + lane * 2), nibbles)
    }

    /// Row `row` dequantized (tests and references).
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        (0..self.blocks())
            .flat_map(|b| {
                let (d, m, nibbles) = self.block(row, b);
                let low = nibbles.into_iter().map(move |q| (q & 0x0F) as f32 * d + m);
                let high = nibbles.into_iter().map(move |q| (q >> 4) as f32 * d + m);
                low.chain(high).collect::<Vec<_>>()
            })
            .collect()
    }
}
