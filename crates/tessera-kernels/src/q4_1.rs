//! Q4_1 weights (a scale `d`, a minimum `m` and 32 four-bit values per
//! block: `w = d·q + m`), repacked at load into groups of [`GROUP`] rows: for
//! each block, the group's eight `d`, eight `m` (f32) and eight rows of 16
//! nibble bytes lie together, so a kernel computing eight outputs at once
//! reads one linear stream. Four bits per weight is what llama.cpp reads
//! per token; Q8_0 reads twice as much.

use crate::{KernelError, BLOCK};
use half::f16;

/// GGML's Q4_1 block: f16 `d`, f16 `m`, 16 bytes of nibbles (low nibbles
/// are values 0–15, high nibbles values 16–31).
pub const GGML_BLOCK_BYTES: usize = 4 + BLOCK / 2;
/// Rows computed together (one AVX2 register of f32 outputs).
pub const GROUP: usize = 8;
/// Bytes of one group's block: 8 `d`, 8 `m`, 8 × 16 nibble bytes.
pub(crate) const GROUP_BLOCK_BYTES: usize = GROUP * 4 * 2 + GROUP * BLOCK / 2;

/// A `[rows, cols]` Q4_1 matrix in row groups.
#[derive(Debug, Clone)]
pub struct Q4_1Weights {
    rows: usize,
    cols: usize,
    /// Per group, per block: `d[8]`, `m[8]` as f32 bytes, then nibbles.
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
                let d = f16::from_le_bytes([src[0], src[1]]).to_f32();
                let m = f16::from_le_bytes([src[2], src[3]]).to_f32();
                dst[lane * 4..lane * 4 + 4].copy_from_slice(&d.to_le_bytes());
                dst[32 + lane * 4..32 + lane * 4 + 4].copy_from_slice(&m.to_le_bytes());
                dst[64 + lane * 16..64 + lane * 16 + 16].copy_from_slice(&src[4..]);
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

    /// Group `group`, block `block`: the 192 bytes described above.
    pub(crate) fn group_block(&self, group: usize, block: usize) -> &[u8] {
        &self.data[(group * self.blocks() + block) * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES]
    }

    /// `(d, m, nibbles)` of row `row`, block `block`.
    pub(crate) fn block(&self, row: usize, block: usize) -> (f32, f32, &[u8]) {
        let data = self.group_block(row / GROUP, block);
        let lane = row % GROUP;
        let read = |at: usize| f32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
        (
            read(lane * 4),
            read(32 + lane * 4),
            &data[64 + lane * 16..64 + lane * 16 + 16],
        )
    }

    /// Row `row` dequantized (tests and references).
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        (0..self.blocks())
            .flat_map(|b| {
                let (d, m, nibbles) = self.block(row, b);
                let low = nibbles.iter().map(move |&q| (q & 0x0F) as f32 * d + m);
                let high = nibbles.iter().map(move |&q| (q >> 4) as f32 * d + m);
                low.chain(high).collect::<Vec<_>>()
            })
            .collect()
    }
}
