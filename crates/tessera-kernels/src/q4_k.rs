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
//! Q5_K is the same with a fifth bit per value: GGML adds 32 bytes `qh` per
//! row and super-block (bit `j` of byte `l`: the fifth bit of value `l` of
//! sub-block `j`), kept here as eight registers after the factors (lane r,
//! register t = row r's `qh` bytes 4t..4t+4), so the nibbles start 256 bytes
//! later (176 bytes per row and super-block, GGML's 5.5 bits per weight).
//!
//! The products pair each super-block with the activations' super-block of
//! 256 values (one scale `D`, `super_activations.rs`), as GGML's Q8_K does:
//! in integers, exactly, `A = Σ_j scale_j·Σq·y` and `B = Σ_j min_j·Σy` over
//! the eight sub-blocks, then one float step per super-block,
//! `sum += A·(d·D) − B·(dmin·D)`, unfused, super-blocks in order.

use crate::q4::GROUP;
use crate::super_rows::{super_rows_accessors, SuperRows};
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
/// Where Q5_K's `qh` registers start (Q4_K's nibbles start there).
pub(crate) const QH_AT: usize = HIGH_BITS_AT + 32;
/// Bytes of Q5_K's `qh` registers.
const QH_BYTES: usize = GROUP * 32;
/// Bytes of one sub-block pair's registers.
pub(crate) const PAIR_BYTES: usize = GROUP * 32;
/// Where the nibble registers start in a group super-block.
pub(crate) const fn nibbles_at(five_bit: bool) -> usize {
    if five_bit {
        QH_AT + QH_BYTES
    } else {
        QH_AT
    }
}

/// Bytes of one group's super-block (= 8 × GGML's 144, or 176 for Q5_K).
const fn group_super_bytes(five_bit: bool) -> usize {
    nibbles_at(five_bit) + 4 * PAIR_BYTES
}

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
/// last multiple of 8 are zero blocks); also the body of [`Q5KWeights`].
#[derive(Debug, Clone)]
pub struct Q4KWeights {
    groups: SuperRows,
    /// Q5_K: values have a fifth bit (`qh` registers after the factors).
    five_bit: bool,
}

super_rows_accessors!(Q4KWeights, groups);

/// A `[rows, cols]` Q5_K matrix: Q4_K's layout plus `qh` registers (see the module docs).
#[derive(Debug, Clone)]
pub struct Q5KWeights(pub(crate) Q4KWeights);

/// GGML's Q5_K block: `d`, `dmin`, 12 bytes of scales, 32 of `qh`, 128 of nibbles.
pub const GGML_Q5_K_BLOCK_BYTES: usize = GGML_BLOCK_BYTES + SUPER_BLOCK / 8;

impl Q5KWeights {
    /// Repack GGML Q5_K bytes of a `[rows, cols]` matrix (`cols` a multiple of 256).
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        Q4KWeights::repack(bytes, rows, cols, true).map(Self)
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.0.rows()
    }

    /// Blocks of 32 per row.
    pub fn blocks(&self) -> usize {
        self.0.blocks()
    }

    /// Bytes held (for bandwidth figures).
    pub fn bytes(&self) -> usize {
        self.0.bytes()
    }

    /// Row `row` dequantized as GGML (and candle) define it: `d·scale·q − dmin·min`.
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        self.0.dequantize_row(row)
    }
}

impl Q4KWeights {
    /// Repack GGML Q4_K bytes of a `[rows, cols]` matrix (`cols` a multiple of 256).
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        Self::repack(bytes, rows, cols, false)
    }

    fn repack(bytes: &[u8], rows: usize, cols: usize, five_bit: bool) -> Result<Self, KernelError> {
        let (what, block_bytes) = if five_bit {
            ("Q5_K weights", GGML_Q5_K_BLOCK_BYTES)
        } else {
            ("Q4_K weights", GGML_BLOCK_BYTES)
        };
        let sizes = (block_bytes, group_super_bytes(five_bit));
        let place = |dst: &mut [u8], lane: usize, src: &[u8]| place(dst, lane, src, five_bit);
        let groups = SuperRows::repack(what, bytes, (rows, cols), sizes, place)?;
        Ok(Self { groups, five_bit })
    }

    /// Whether values have a fifth bit (Q5_K).
    pub(crate) fn five_bit(&self) -> bool {
        self.five_bit
    }

    /// `(d, dmin, scales, mins)` of row `row`, super-block `sb`: the two f16
    /// factors as f32 and the eight 6-bit sub-block scales and mins.
    pub(crate) fn super_factors(&self, row: usize, sb: usize) -> (f32, f32, [u8; SUB_BLOCKS], [u8; SUB_BLOCKS]) {
        let data = self.group_super(row / GROUP, sb);
        let lane = row % GROUP;
        let half = |at: usize| f16::from_le_bytes([data[at + 2 * lane], data[at + 2 * lane + 1]]).to_f32();
        let six_bits = |j: usize, at: usize, high_shift: usize| {
            let (k, upper) = ((j * GROUP + lane) % 32, j >= 4);
            let low = if upper { data[at + k] >> 4 } else { data[at + k] & 0x0F };
            let high = data[HIGH_BITS_AT + k] >> (if upper { 2 } else { 0 } + high_shift);
            low | ((high & 3) << 4)
        };
        let scales = std::array::from_fn(|j| six_bits(j, SCALES_AT, 0));
        let mins = std::array::from_fn(|j| six_bits(j, MINS_AT, 4));
        (half(0), half(DMIN_AT), scales, mins)
    }

    /// The 32 quants (0–15, or 0–31 for Q5_K) of row `row`, block `b`.
    pub(crate) fn block_quants(&self, row: usize, b: usize) -> [u8; BLOCK] {
        let data = self.group_super(row / GROUP, b / SUB_BLOCKS);
        let (lane, j) = (row % GROUP, b % SUB_BLOCKS);
        let pair = &data[nibbles_at(self.five_bit) + (j / 2) * PAIR_BYTES..][..PAIR_BYTES];
        let mut quants = [0u8; BLOCK];
        for (l, q) in quants.iter_mut().enumerate() {
            let at = (l / 4) * 32 + lane * 4 + l % 4;
            let byte = pair[at];
            *q = if j % 2 == 0 { byte & 0x0F } else { byte >> 4 };
            if self.five_bit {
                *q |= ((data[QH_AT + at] >> j) & 1) << 4;
            }
        }
        quants
    }

    /// Row `row` dequantized as GGML (and candle) define it: `d·scale·q − dmin·min`.
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        (0..self.blocks())
            .flat_map(|b| {
                let (d, dmin, scales, mins) = self.super_factors(row, b / SUB_BLOCKS);
                let j = b % SUB_BLOCKS;
                let (scale, min) = (d * scales[j] as f32, dmin * mins[j] as f32);
                self.block_quants(row, b).map(|q| q as f32 * scale - min)
            })
            .collect()
    }
}

/// Write a row's GGML super-block `src` into lane `lane` of its group
/// super-block `dst` (`five_bit`: a Q5_K block, with `qh`).
fn place(dst: &mut [u8], lane: usize, src: &[u8], five_bit: bool) {
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
    let mut nibbles = &src[16..];
    if five_bit {
        for t in 0..8 {
            let at = QH_AT + t * 32 + lane * 4;
            dst[at..at + 4].copy_from_slice(&nibbles[t * 4..][..4]);
        }
        nibbles = &nibbles[32..];
    }
    let nibbles_at = nibbles_at(five_bit);
    for p in 0..SUB_BLOCKS / 2 {
        for t in 0..8 {
            let at = nibbles_at + p * PAIR_BYTES + t * 32 + lane * 4;
            dst[at..at + 4].copy_from_slice(&nibbles[p * 32 + t * 4..][..4]);
        }
    }
}
