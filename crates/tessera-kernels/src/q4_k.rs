//! Q4_K (GGML's 4-bit K-quant): super-blocks of 256 values, an f16 `d` and
//! `dmin`, eight 6-bit scales and mins packed in 12 bytes, 128 bytes of
//! nibbles; value `l` of sub-block `j` is `d·scale_j·q − dmin·min_j`.
//!
//! At load each 32-value sub-block becomes a Q4_1-shaped block with f32
//! `d = d·scale_j` and `m = −dmin·min_j` (exact in f32, not in f16) and its
//! nibbles reordered to Q4_1's (Q4_K keeps sub-blocks `2i` and `2i+1` in the
//! low and high nibbles of the same 32 bytes), then goes through the 4-bit
//! kernel. Products pair it with the same 32-value activation blocks as
//! Q4_1 (candle's Q8_K uses one scale per 256 values, so results agree to
//! activation rounding, not bit for bit). Cost: 24 bytes per 32 weights
//! instead of 18 (decode reads a third more than llama.cpp on Q4_K files).

use crate::q4::{NibbleGroups, Q4Kind};
use crate::{KernelError, Q4KWeights, BLOCK};
use half::f16;

/// Values per super-block.
pub const SUPER_BLOCK: usize = 256;
/// GGML's Q4_K block: `d`, `dmin`, 12 bytes of scales, 128 of nibbles.
pub const GGML_BLOCK_BYTES: usize = 2 + 2 + 12 + SUPER_BLOCK / 2;
/// One converted sub-block: f32 `d`, f32 `m`, 16 nibble bytes.
const SUB_BLOCK_BYTES: usize = 4 + 4 + BLOCK / 2;

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

/// One GGML Q4_K super-block as eight converted sub-blocks.
fn convert_super_block(src: &[u8], dst: &mut Vec<u8>) {
    let d = f16::from_le_bytes([src[0], src[1]]).to_f32();
    let dmin = f16::from_le_bytes([src[2], src[3]]).to_f32();
    let (packed, quants) = (&src[4..16], &src[16..]);
    for j in 0..SUPER_BLOCK / BLOCK {
        let (scale, min) = scale_min(j, packed);
        dst.extend_from_slice(&(d * scale as f32).to_le_bytes());
        dst.extend_from_slice(&(-(dmin * min as f32)).to_le_bytes());
        let bytes = &quants[(j / 2) * 32..][..32];
        let value = |l: usize| if j % 2 == 0 { bytes[l] & 0x0F } else { bytes[l] >> 4 };
        dst.extend((0..BLOCK / 2).map(|l| value(l) | (value(l + 16) << 4)));
    }
}

impl Q4KWeights {
    /// Convert GGML Q4_K bytes of a `[rows, cols]` matrix (`cols` a multiple of 256).
    pub fn from_ggml(bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        check_super_blocks("Q4_K weights", bytes.len(), (rows, cols), GGML_BLOCK_BYTES)?;
        let mut blocks = Vec::with_capacity(rows * cols / BLOCK * SUB_BLOCK_BYTES);
        for src in bytes.chunks_exact(GGML_BLOCK_BYTES) {
            convert_super_block(src, &mut blocks);
        }
        NibbleGroups::from_ggml(Q4Kind::Q4K, &blocks, rows, cols).map(Self)
    }
}
