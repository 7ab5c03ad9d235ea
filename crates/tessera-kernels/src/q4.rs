//! The 4-bit formats, Q4_0 (a scale `d` and 32 four-bit values per block:
//! `w = d·(q − 8)`) and Q4_1 (plus a minimum `m`: `w = d·q + m`), repacked at
//! load into groups of [`GROUP`] rows laid out for a kernel that computes the
//! eight rows' outputs in the eight 32-bit lanes of one register, with no
//! horizontal sums (the layout of llama.cpp's `q4_0_8x8` repack). Per group
//! and block (GGML's own 18 or 20 bytes per row, so decode reads what
//! llama.cpp reads):
//!
//! ```text
//! bytes   0..16   d of rows 0..8 (f16)
//! bytes  16..32   m of rows 0..8 (f16; Q4_1 only, Q4_0's registers start at 16)
//! bytes  32..160  four 32-byte registers; register t, lane r (bytes 4r..4r+4)
//!                 = row r's GGML nibble bytes 4t..4t+4: low nibbles are
//!                 values 4t..4t+4, high nibbles values 16+4t..16+4t+4
//! ```
//!
//! One `maddubs` of a register's low (or high) nibbles against four
//! activation bytes broadcast to every lane gives each row's products for
//! those four values; eight of them summed in 16 bits (|Σ| ≤ 8·2·15·128 <
//! 2¹⁵, exact) and one `madd` give each row's exact integer block dot `Σq·y`
//! (Q4_0 then subtracts `8·Σy`, from the activations' exact block sums).
//!
//! The 5-bit formats Q5_0 (`w = d·(q − 16)`) and Q5_1 (`w = d·q + m`) are
//! the same layout with one more 32-byte register after the headers whose
//! lane r holds row r's GGML `qh` (bit i: the fifth bit of value i), again
//! GGML's own 22 or 24 bytes per row and block. Their kernels spread the
//! fifth bits onto the nibbles' bytes and take each register's products to
//! 32 bits at once (|Σ| ≤ 2·2·31·128 < 2¹⁵ per register).

use crate::{KernelError, BLOCK};
use half::f16;

/// Rows computed together (one AVX2 register of f32 outputs).
pub const GROUP: usize = 8;

/// Which 4- or 5-bit format a [`NibbleGroups`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Q4Kind {
    /// `w = d·(q − 8)`.
    Q4_0,
    /// `w = d·q + m`.
    Q4_1,
    /// `w = d·(q − 16)`, `q` five bits.
    Q5_0,
    /// `w = d·q + m`, `q` five bits.
    Q5_1,
}

impl Q4Kind {
    /// Values per row and block before the nibbles (d, and m for Q4_1/Q5_1).
    fn headers(self) -> usize {
        match self {
            Q4Kind::Q4_0 | Q4Kind::Q5_0 => 1,
            Q4Kind::Q4_1 | Q4Kind::Q5_1 => 2,
        }
    }

    /// Whether blocks carry a minimum `m` (else a fixed offset).
    pub(crate) fn has_min(self) -> bool {
        self.headers() == 2
    }

    /// Whether values have a fifth bit (a `qh` word per row and block).
    pub(crate) fn has_high_bit(self) -> bool {
        matches!(self, Q4Kind::Q5_0 | Q4Kind::Q5_1)
    }

    /// The offset subtracted from `q` by the formats without a minimum.
    pub(crate) fn offset(self) -> i32 {
        if self.has_high_bit() {
            16
        } else {
            8
        }
    }

    /// Bytes of the `qh` word per row and block (0 for 4-bit formats).
    fn high_bytes(self) -> usize {
        if self.has_high_bit() {
            4
        } else {
            0
        }
    }

    /// Offset of the `qh` register in a group block (5-bit formats).
    pub(crate) fn high_at(self) -> usize {
        GROUP * self.header_bytes() * self.headers()
    }

    /// Bytes of one header value (f16).
    pub(crate) fn header_bytes(self) -> usize {
        2
    }

    /// A source block: the headers, (5-bit formats) the `qh` word, then 16
    /// bytes of nibbles (low nibbles are values 0–15, high nibbles values
    /// 16–31), as GGML's Q4_0/Q4_1/Q5_0/Q5_1 blocks.
    fn ggml_block_bytes(self) -> usize {
        self.header_bytes() * self.headers() + self.high_bytes() + BLOCK / 2
    }

    /// Offset of the nibble registers in a group block.
    pub(crate) fn nibbles_at(self) -> usize {
        self.high_at() + GROUP * self.high_bytes()
    }

    /// Bytes of one group's block.
    fn group_block_bytes(self) -> usize {
        self.nibbles_at() + GROUP * BLOCK / 2
    }
}

/// A `[rows, cols]` 4-bit matrix in row groups (rows past the last multiple
/// of 8 are zero blocks).
#[derive(Debug, Clone)]
pub(crate) struct NibbleGroups {
    kind: Q4Kind,
    rows: usize,
    cols: usize,
    /// Per group, per block: the bytes described in the module docs.
    data: Vec<u8>,
}

impl NibbleGroups {
    pub(crate) fn from_ggml(kind: Q4Kind, bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        if !cols.is_multiple_of(BLOCK) {
            return Err(KernelError::Cols { cols, block: BLOCK });
        }
        let (blocks, ggml_bytes, group_bytes) = (cols / BLOCK, kind.ggml_block_bytes(), kind.group_block_bytes());
        if bytes.len() != rows * blocks * ggml_bytes {
            return Err(KernelError::Size {
                what: "4- or 5-bit weights",
                expected: rows * blocks * ggml_bytes,
                got: bytes.len(),
            });
        }
        let mut data = vec![0u8; rows.div_ceil(GROUP) * blocks * group_bytes];
        for (index, src) in bytes.chunks_exact(ggml_bytes).enumerate() {
            let (row, b) = (index / blocks, index % blocks);
            let dst = &mut data[((row / GROUP) * blocks + b) * group_bytes..][..group_bytes];
            let lane = row % GROUP;
            let width = kind.header_bytes();
            for header in 0..kind.headers() {
                let at = (header * GROUP + lane) * width;
                dst[at..at + width].copy_from_slice(&src[header * width..(header + 1) * width]);
            }
            let high = &src[width * kind.headers()..];
            if kind.has_high_bit() {
                let at = kind.high_at() + lane * 4;
                dst[at..at + 4].copy_from_slice(&high[..4]);
            }
            let nibbles = &high[kind.high_bytes()..];
            for t in 0..4 {
                let at = kind.nibbles_at() + t * 32 + lane * 4;
                dst[at..at + 4].copy_from_slice(&nibbles[t * 4..t * 4 + 4]);
            }
        }
        Ok(Self { kind, rows, cols, data })
    }

    pub(crate) fn kind(&self) -> Q4Kind {
        self.kind
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    pub(crate) fn blocks(&self) -> usize {
        self.cols / BLOCK
    }

    /// Group `group`, block `block`: the bytes described in the module docs.
    pub(crate) fn group_block(&self, group: usize, block: usize) -> &[u8] {
        let bytes = self.kind.group_block_bytes();
        &self.data[(group * self.blocks() + block) * bytes..][..bytes]
    }

    /// The quants of row `row`, block `block` (0–15, or 0–31 with the fifth bit).
    pub(crate) fn block_quants(&self, row: usize, block: usize) -> [u8; BLOCK] {
        let (_, _, nibbles) = self.block(row, block);
        let high = self.high_bits(row, block);
        std::array::from_fn(|v| {
            let nibble = if v < BLOCK / 2 {
                nibbles[v] & 0x0F
            } else {
                nibbles[v - BLOCK / 2] >> 4
            };
            nibble | ((((high >> v) & 1) as u8) << 4)
        })
    }

    /// Row `row`'s `qh` word of block `block` (0 for 4-bit formats).
    fn high_bits(&self, row: usize, block: usize) -> u32 {
        if !self.kind.has_high_bit() {
            return 0;
        }
        let data = self.group_block(row / GROUP, block);
        let at = self.kind.high_at() + (row % GROUP) * 4;
        u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
    }

    /// `(d, m (0 without a minimum), GGML nibble bytes)` of row `row`, block `block`.
    pub(crate) fn block(&self, row: usize, block: usize) -> (f32, f32, [u8; BLOCK / 2]) {
        let data = self.group_block(row / GROUP, block);
        let lane = row % GROUP;
        let width = self.kind.header_bytes();
        let read = |header: usize| {
            let at = (header * GROUP + lane) * width;
            f16::from_le_bytes([data[at], data[at + 1]]).to_f32()
        };
        let mut nibbles = [0u8; BLOCK / 2];
        for t in 0..4 {
            let at = self.kind.nibbles_at() + t * 32 + lane * 4;
            nibbles[t * 4..t * 4 + 4].copy_from_slice(&data[at..at + 4]);
        }
        let m = if self.kind.has_min() { read(1) } else { 0.0 };
        (read(0), m, nibbles)
    }

    /// Row `row` dequantized as GGML (and candle) define it.
    fn dequantize_row(&self, row: usize) -> Vec<f32> {
        let (has_min, offset) = (self.kind.has_min(), self.kind.offset());
        (0..self.blocks())
            .flat_map(|b| {
                let (d, m, _) = self.block(row, b);
                self.block_quants(row, b).map(|q| {
                    if has_min {
                        q as f32 * d + m
                    } else {
                        (q as i32 - offset) as f32 * d
                    }
                })
            })
            .collect()
    }
}

/// One public 4-bit weight type over [`NibbleGroups`].
macro_rules! q4_weights {
    ($name:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone)]
        pub struct $name(pub(crate) NibbleGroups);

        impl $name {
            /// Output rows.
            pub fn rows(&self) -> usize {
                self.0.rows()
            }

            /// Blocks per row.
            pub fn blocks(&self) -> usize {
                self.0.blocks()
            }

            /// Bytes held (for bandwidth figures).
            pub fn bytes(&self) -> usize {
                self.0.data.len()
            }

            /// Row `row` dequantized (tests and references).
            pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
                self.0.dequantize_row(row)
            }
        }
    };
}

q4_weights!(Q4_0Weights, "A `[rows, cols]` Q4_0 matrix in row groups.");
q4_weights!(Q4_1Weights, "A `[rows, cols]` Q4_1 matrix in row groups.");
q4_weights!(Q5_0Weights, "A `[rows, cols]` Q5_0 matrix in row groups.");
q4_weights!(Q5_1Weights, "A `[rows, cols]` Q5_1 matrix in row groups.");

impl Q4_0Weights {
    /// Repack GGML Q4_0 bytes of a `[rows, cols]` matrix.
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        NibbleGroups::from_ggml(Q4Kind::Q4_0, bytes, rows, cols).map(Self)
    }
}

impl Q4_1Weights {
    /// Repack GGML Q4_1 bytes of a `[rows, cols]` matrix.
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        NibbleGroups::from_ggml(Q4Kind::Q4_1, bytes, rows, cols).map(Self)
    }
}

impl Q5_0Weights {
    /// Repack GGML Q5_0 bytes of a `[rows, cols]` matrix.
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        NibbleGroups::from_ggml(Q4Kind::Q5_0, bytes, rows, cols).map(Self)
    }
}

impl Q5_1Weights {
    /// Repack GGML Q5_1 bytes of a `[rows, cols]` matrix.
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        NibbleGroups::from_ggml(Q4Kind::Q5_1, bytes, rows, cols).map(Self)
    }
}
