//! Q6_K (GGML's 6-bit K-quant): super-blocks of 256 values, an f16 `d`, 16
//! signed 8-bit scales (one per 16 values) and 6-bit quants split into low
//! nibbles (`ql`) and 2-bit high parts (`qh`); value `v` is
//! `d·scale_{v/16}·(q_v − 32)`.
//!
//! Repacked at load into groups of [`GROUP`] rows at GGML's own 210 bytes per
//! row and super-block (6.5625 bits per weight: decode reads what llama.cpp
//! reads). GGML splits each 128-value half ("chunk") of a super-block into
//! four 32-value sub-blocks `k`: `ql` bytes `0..32` hold sub-blocks 0 (low
//! nibbles) and 2 (high nibbles), bytes `32..64` sub-blocks 1 and 3, and `qh`
//! byte `l` the high bit pairs of value `l` of sub-blocks 0–3 (bits 0–1, 2–3,
//! 4–5, 6–7). Per group and super-block (1,680 bytes):
//!
//! ```text
//! bytes     0..16    d of rows 0..8 (f16)
//! bytes    16..144   scale i of row r at 8i + r (i8)
//! bytes   144..1680  per chunk (768 bytes) and register position t (0..8),
//!                    three 32-byte registers whose lane r holds row r's
//!                    ql bytes 4t..4t+4, ql bytes 32 + 4t..32 + 4t + 4 and
//!                    qh bytes 4t..4t+4 of the chunk
//! ```
//!
//! in the order the kernel reads them (one linear stream: three interleaved
//! ones ran at half Q4_K's bandwidth).
//!
//! The products pair each super-block with the activations' super-block of
//! 256 values (one scale `D`, `super_activations.rs`): in integers, exactly,
//! `A = Σ_i scale_i·Σq·y` and `B = Σ_i scale_i·Σy` over the sixteen runs of
//! 16 values, then one float step per super-block,
//! `sum += (A − 32·B)·(d·D)`, super-blocks in order.

use crate::super_rows::{super_rows_accessors, SuperRows};
use crate::{KernelError, BLOCK};
use half::f16;

/// Rows computed together.
pub const GROUP: usize = 8;
/// Values per super-block.
pub const SUPER_BLOCK: usize = 256;
/// GGML's Q6_K block: `ql[128]`, `qh[64]`, `scales[16]`, `d`.
pub const GGML_BLOCK_BYTES: usize = SUPER_BLOCK / 2 + SUPER_BLOCK / 4 + SUPER_BLOCK / 16 + 2;
/// Offsets inside a group's super-block.
pub(crate) const SCALES_AT: usize = 2 * GROUP;
pub(crate) const QUANTS_AT: usize = SCALES_AT + 16 * GROUP;
/// Bytes of one chunk's registers.
const CHUNK_BYTES: usize = 8 * 3 * 32;
/// Bytes of one group's super-block (= 8 × GGML's 210).
const GROUP_SUPER_BYTES: usize = QUANTS_AT + 2 * CHUNK_BYTES;
/// Sub-blocks of 32 values per super-block.
pub(crate) const SUB_BLOCKS: usize = SUPER_BLOCK / BLOCK;

/// A `[rows, cols]` Q6_K matrix in row groups at GGML's bytes (rows past the
/// last multiple of 8 are zero blocks).
#[derive(Debug, Clone)]
pub struct Q6KWeights(SuperRows);

super_rows_accessors!(Q6KWeights, 0);

/// Where register `t` of `ql` part `part` (bytes `32·part..`) of chunk `chunk` starts.
pub(crate) fn ql_at(chunk: usize, part: usize, t: usize) -> usize {
    QUANTS_AT + chunk * CHUNK_BYTES + t * 96 + part * 32
}

/// Where register `t` of `qh` of chunk `chunk` starts.
pub(crate) fn qh_at(chunk: usize, t: usize) -> usize {
    QUANTS_AT + chunk * CHUNK_BYTES + t * 96 + 64
}

impl Q6KWeights {
    /// Repack GGML Q6_K bytes of a `[rows, cols]` matrix (`cols` a multiple of 256).
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        let sizes = (GGML_BLOCK_BYTES, GROUP_SUPER_BYTES);
        SuperRows::repack("Q6_K weights", bytes, (rows, cols), sizes, place).map(Self)
    }
}

/// Write a row's GGML super-block `src` into lane `lane` of its group super-block `dst`.
fn place(dst: &mut [u8], lane: usize, src: &[u8]) {
    let (ql, qh, scales) = (&src[..128], &src[128..192], &src[192..208]);
    dst[2 * lane..2 * lane + 2].copy_from_slice(&src[208..210]);
    for (i, &scale) in scales.iter().enumerate() {
        dst[SCALES_AT + i * GROUP + lane] = scale;
    }
    for chunk in 0..2 {
        for t in 0..8 {
            for part in 0..2 {
                let at = ql_at(chunk, part, t) + lane * 4;
                dst[at..at + 4].copy_from_slice(&ql[chunk * 64 + part * 32 + t * 4..][..4]);
            }
            let at = qh_at(chunk, t) + lane * 4;
            dst[at..at + 4].copy_from_slice(&qh[chunk * 32 + t * 4..][..4]);
        }
    }
}

impl Q6KWeights {
    /// `(d, scales)` of row `row`, super-block `sb`: the f16 factor as f32
    /// and the sixteen signed scales (one per 16 values).
    pub(crate) fn super_factors(&self, row: usize, sb: usize) -> (f32, [i8; 16]) {
        let data = self.group_super(row / GROUP, sb);
        let lane = row % GROUP;
        let d = f16::from_le_bytes([data[2 * lane], data[2 * lane + 1]]).to_f32();
        (d, std::array::from_fn(|i| data[SCALES_AT + i * GROUP + lane] as i8))
    }

    /// The quants (0–63) of row `row`, block `b`.
    pub(crate) fn block_quants(&self, row: usize, b: usize) -> [u8; BLOCK] {
        let data = self.group_super(row / GROUP, b / SUB_BLOCKS);
        let (lane, j) = (row % GROUP, b % SUB_BLOCKS);
        let (chunk, k) = (j / 4, j % 4);
        std::array::from_fn(|v| {
            let (t, byte) = (v / 4, lane * 4 + v % 4);
            let low = data[ql_at(chunk, k % 2, t) + byte];
            let low = if k < 2 { low & 0x0F } else { low >> 4 };
            let high = (data[qh_at(chunk, t) + byte] >> (2 * k)) & 3;
            low | (high << 4)
        })
    }

    /// Row `row` dequantized as GGML (and candle) define it: `d·scale·(q − 32)`.
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        (0..self.blocks())
            .flat_map(|b| {
                let (d, scales) = self.super_factors(row, b / SUB_BLOCKS);
                let first = 2 * (b % SUB_BLOCKS);
                let scales = [d * scales[first] as f32, d * scales[first + 1] as f32];
                let quants = self.block_quants(row, b);
                (0..BLOCK).map(move |v| scales[v / 16] * (quants[v] as f32 - 32.0))
            })
            .collect()
    }
}
