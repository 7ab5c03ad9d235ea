//! K/V storage for the paged cache: one pair of flat pools per layer, in
//! `f16` (the default, as llama.cpp stores it) or `f32`, laid out
//! `[block][kv_head][slot][head_dim]`, outside candle tensors.
//!
//! Block-major order keeps one block's rows for one KV head contiguous
//! (`block_size × head_dim` elements), which is the tile the attention kernel
//! reads; block ids come from `tessera_kv::BlockPool`, which owns the bookkeeping.
//! Rows are rounded to `f16` once, when written (round to nearest even); the
//! attention kernel widens them back to `f32` exactly as it reads them. A value
//! beyond f16's range (|x| > 65504) becomes ±inf, as in llama.cpp's f16 cache;
//! Llama-family K/V stay orders of magnitude below it, and `--kv-dtype f32` is
//! there for models that do not.
//! Memory: `2 × layers × blocks × block_size × kv_heads × head_dim × bytes` (2 or 4).
//! With `--device cuda` the same layout lives in device memory (`device::DeviceKv`;
//! [`KvCache`](crate::cache::KvCache) holds either).

use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use half::f16;
use half::slice::HalfFloatSliceExt;
use tessera_kv::{BlockId, Slot};

/// The element type of the K/V pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvDtype {
    /// Half precision: half the memory and bandwidth of `f32` (the default).
    #[default]
    F16,
    /// Single precision: what the forward computes, bit for bit.
    F32,
}

impl KvDtype {
    /// Bytes per stored element.
    pub fn bytes(self) -> usize {
        match self {
            Self::F16 => 2,
            Self::F32 => 4,
        }
    }

    /// The name `--kv-dtype` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::F16 => "f16",
            Self::F32 => "f32",
        }
    }
}

impl std::fmt::Display for KvDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for KvDtype {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "f16" => Ok(Self::F16),
            "f32" => Ok(Self::F32),
            other => Err(format!("KV dtype '{other}' is not one of f16, f32")),
        }
    }
}

/// Shape of the cache, shared by every layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvLayout {
    /// Blocks in each pool.
    pub num_blocks: usize,
    /// Token slots per block.
    pub block_size: usize,
    /// Key/value heads.
    pub num_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
}

impl KvLayout {
    /// The layout of `num_blocks` blocks of `block_size` tokens for `config`'s model,
    /// refused when a pool's element count would not be addressable.
    pub(crate) fn checked(config: &ModelConfig, num_blocks: usize, block_size: usize) -> Result<Self> {
        let layout = KvLayout {
            num_blocks,
            block_size,
            num_kv_heads: config.num_kv_heads,
            head_dim: config.head_dim,
        };
        match num_blocks.checked_mul(layout.block_len()) {
            Some(len) if len <= isize::MAX as usize / 4 => Ok(layout),
            _ => Err(ModelError::InvalidConfig(format!(
                "KV cache of {num_blocks} blocks is too large"
            ))),
        }
    }

    /// Elements in one block (all KV heads).
    pub fn block_len(&self) -> usize {
        self.num_kv_heads * self.block_size * self.head_dim
    }

    /// Offset of `(block, kv_head, slot)`'s row.
    #[inline]
    pub fn row_offset(&self, block: BlockId, kv_head: usize, slot: usize) -> usize {
        ((block.index() * self.num_kv_heads + kv_head) * self.block_size + slot) * self.head_dim
    }

    /// Offset of the `block_size × head_dim` tile of `(block, kv_head)`.
    #[inline]
    pub fn tile_offset(&self, block: BlockId, kv_head: usize) -> usize {
        self.row_offset(block, kv_head, 0)
    }
}

/// One layer's key and value pools, `[block][kv_head][slot][head_dim]` each.
#[derive(Debug, Clone)]
pub enum LayerKv {
    /// Half-precision pools.
    F16 {
        /// Keys.
        keys: Vec<f16>,
        /// Values.
        values: Vec<f16>,
    },
    /// Single-precision pools.
    F32 {
        /// Keys.
        keys: Vec<f32>,
        /// Values.
        values: Vec<f32>,
    },
}

impl LayerKv {
    /// Zeroed pools of `len` elements each.
    pub fn zeroed(dtype: KvDtype, len: usize) -> Self {
        match dtype {
            KvDtype::F16 => Self::F16 {
                keys: vec![f16::ZERO; len],
                values: vec![f16::ZERO; len],
            },
            KvDtype::F32 => Self::F32 {
                keys: vec![0.0; len],
                values: vec![0.0; len],
            },
        }
    }

    /// The pools' element type.
    pub fn dtype(&self) -> KvDtype {
        match self {
            Self::F16 { .. } => KvDtype::F16,
            Self::F32 { .. } => KvDtype::F32,
        }
    }

    /// Elements in each pool.
    pub fn len(&self) -> usize {
        match self {
            Self::F16 { keys, .. } => keys.len(),
            Self::F32 { keys, .. } => keys.len(),
        }
    }

    /// Whether the pools are empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Store `key` and `value` (equal lengths) at element offset `at`, rounding to the pool's type.
    pub fn write(&mut self, at: usize, key: &[f32], value: &[f32]) {
        let n = key.len();
        match self {
            Self::F16 { keys, values } => {
                keys[at..at + n].convert_from_f32_slice(key);
                values[at..at + n].convert_from_f32_slice(value);
            }
            Self::F32 { keys, values } => {
                keys[at..at + n].copy_from_slice(key);
                values[at..at + n].copy_from_slice(value);
            }
        }
    }

    /// Store one token's K and V rows (`num_kv_heads × head_dim` each) at `slot`.
    pub fn write_token(&mut self, layout: KvLayout, slot: Slot, key: &[f32], value: &[f32]) {
        let dim = layout.head_dim;
        for head in 0..layout.num_kv_heads {
            let at = layout.row_offset(slot.block, head, slot.offset);
            self.write(
                at,
                &key[head * dim..(head + 1) * dim],
                &value[head * dim..(head + 1) * dim],
            );
        }
    }

    /// Copy `len` elements of both pools from offset `from` to offset `to`.
    fn copy_within(&mut self, from: usize, len: usize, to: usize) {
        match self {
            Self::F16 { keys, values } => {
                keys.copy_within(from..from + len, to);
                values.copy_within(from..from + len, to);
            }
            Self::F32 { keys, values } => {
                keys.copy_within(from..from + len, to);
                values.copy_within(from..from + len, to);
            }
        }
    }

    /// Append the little-endian bytes of `len` keys then `len` values from offset `at`.
    fn append_le_bytes(&self, at: usize, len: usize, out: &mut Vec<u8>) {
        match self {
            Self::F16 { keys, values } => {
                for x in keys[at..at + len].iter().chain(&values[at..at + len]) {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
            Self::F32 { keys, values } => {
                for x in keys[at..at + len].iter().chain(&values[at..at + len]) {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
    }

    /// Overwrite `len` keys then `len` values from offset `at` with little-endian `bytes`
    /// (`2 × len × dtype bytes` of them).
    fn read_le_bytes(&mut self, at: usize, len: usize, bytes: &[u8]) {
        match self {
            Self::F16 { keys, values } => {
                let mut chunks = bytes.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]));
                keys[at..at + len].iter_mut().zip(&mut chunks).for_each(|(x, v)| *x = v);
                values[at..at + len]
                    .iter_mut()
                    .zip(&mut chunks)
                    .for_each(|(x, v)| *x = v);
            }
            Self::F32 { keys, values } => {
                let mut chunks = bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                keys[at..at + len].iter_mut().zip(&mut chunks).for_each(|(x, v)| *x = v);
                values[at..at + len]
                    .iter_mut()
                    .zip(&mut chunks)
                    .for_each(|(x, v)| *x = v);
            }
        }
    }
}

/// The whole model's K/V pools in host memory (the CPU path): one
/// [`LayerKv`] per layer. [`KvCache`](crate::cache::KvCache) holds these or a
/// device's pools.
#[derive(Debug)]
pub(crate) struct HostKv {
    layers: Vec<LayerKv>,
}

impl HostKv {
    /// Zeroed pools for `num_layers` layers of `layout`'s blocks.
    pub fn zeroed(layout: KvLayout, num_layers: usize, dtype: KvDtype) -> Self {
        let len = layout.num_blocks * layout.block_len();
        Self {
            layers: (0..num_layers).map(|_| LayerKv::zeroed(dtype, len)).collect(),
        }
    }

    /// Every layer's pools.
    pub fn layers_mut(&mut self) -> &mut [LayerKv] {
        &mut self.layers
    }

    /// One layer's pools.
    pub fn layer(&self, index: usize) -> Option<&LayerKv> {
        self.layers.get(index)
    }

    /// Number of layers.
    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Append one layer's K then V rows of `block` as little-endian bytes.
    pub fn append_block_bytes(&self, layout: KvLayout, layer: usize, block: BlockId, out: &mut Vec<u8>) {
        let len = layout.block_len();
        self.layers[layer].append_le_bytes(block.index() * len, len, out)
    }

    /// Overwrite one layer's K and V rows of `block` from such bytes.
    pub fn set_block_bytes(&mut self, layout: KvLayout, layer: usize, block: BlockId, bytes: &[u8]) {
        let len = layout.block_len();
        self.layers[layer].read_le_bytes(block.index() * len, len, bytes)
    }

    /// Copy the first `num_slots` token rows of `src` into `dst`, in every layer.
    pub fn copy_block_prefix(&mut self, layout: KvLayout, src: BlockId, dst: BlockId, num_slots: usize) {
        let len = num_slots.min(layout.block_size) * layout.head_dim;
        for pools in &mut self.layers {
            for head in 0..layout.num_kv_heads {
                pools.copy_within(layout.tile_offset(src, head), len, layout.tile_offset(dst, head));
            }
        }
    }
}
