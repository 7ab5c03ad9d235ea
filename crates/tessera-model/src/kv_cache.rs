//! K/V storage for the paged cache: one pair of flat `f32` pools per layer,
//! laid out `[block][kv_head][slot][head_dim]`, outside candle tensors.
//!
//! Block-major order keeps one block's rows for one KV head contiguous
//! (`block_size × head_dim` floats), which is the tile the attention kernel
//! reads; block ids come from `tessera_kv::BlockPool`, which owns the bookkeeping.
//! Memory: `2 × layers × blocks × block_size × kv_heads × head_dim × 4` bytes.

use crate::{ModelConfig, ModelError, Result};
use tessera_kv::{BlockId, Slot};

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
    /// Floats in one block (all KV heads).
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

/// One layer's key and value pools.
#[derive(Debug, Clone)]
pub struct LayerKv {
    /// Keys, `[block][kv_head][slot][head_dim]`.
    pub keys: Vec<f32>,
    /// Values, same layout.
    pub values: Vec<f32>,
}

/// The whole model's K/V storage.
#[derive(Debug, Clone)]
pub struct KvCache {
    layout: KvLayout,
    layers: Vec<LayerKv>,
}

impl KvCache {
    /// Zeroed storage for `num_blocks` blocks of `block_size` tokens for `config`'s model.
    pub fn new(config: &ModelConfig, num_blocks: usize, block_size: usize) -> Result<Self> {
        let layout = KvLayout {
            num_blocks,
            block_size,
            num_kv_heads: config.num_kv_heads,
            head_dim: config.head_dim,
        };
        let len = num_blocks
            .checked_mul(layout.block_len())
            .filter(|&len| len <= isize::MAX as usize / 4)
            .ok_or_else(|| ModelError::InvalidConfig(format!("KV cache of {num_blocks} blocks is too large")))?;
        let layers = (0..config.num_layers)
            .map(|_| LayerKv {
                keys: vec![0.0; len],
                values: vec![0.0; len],
            })
            .collect();
        Ok(Self { layout, layers })
    }

    /// Bytes needed per token slot across all layers (K and V).
    pub fn bytes_per_token(config: &ModelConfig) -> usize {
        2 * config.num_layers * config.num_kv_heads * config.head_dim * std::mem::size_of::<f32>()
    }

    /// Bytes the K/V pools hold, all layers (what the cache actually allocated).
    pub fn allocated_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|layer| (layer.keys.len() + layer.values.len()) * std::mem::size_of::<f32>())
            .sum()
    }

    /// The cache's shape.
    pub fn layout(&self) -> KvLayout {
        self.layout
    }

    /// One layer's pools.
    pub fn layer(&self, index: usize) -> &LayerKv {
        &self.layers[index]
    }

    /// Store one token's K and V rows (`num_kv_heads × head_dim` each) at `slot` of `layer`.
    pub fn write(&mut self, layer: usize, slot: Slot, key: &[f32], value: &[f32]) {
        let layout = self.layout;
        let pools = &mut self.layers[layer];
        let dim = layout.head_dim;
        for head in 0..layout.num_kv_heads {
            let at = layout.row_offset(slot.block, head, slot.offset);
            pools.keys[at..at + dim].copy_from_slice(&key[head * dim..(head + 1) * dim]);
            pools.values[at..at + dim].copy_from_slice(&value[head * dim..(head + 1) * dim]);
        }
    }

    /// One layer's K and V rows of `block` (all KV heads, every slot).
    pub fn block_rows(&self, layer: usize, block: BlockId) -> (&[f32], &[f32]) {
        let len = self.layout.block_len();
        let at = block.index() * len;
        let pools = &self.layers[layer];
        (&pools.keys[at..at + len], &pools.values[at..at + len])
    }

    /// Overwrite one layer's K and V rows of `block` (slices of `block_len` floats).
    pub fn set_block_rows(&mut self, layer: usize, block: BlockId, keys: &[f32], values: &[f32]) {
        let len = self.layout.block_len();
        let at = block.index() * len;
        let pools = &mut self.layers[layer];
        pools.keys[at..at + len].copy_from_slice(&keys[..len]);
        pools.values[at..at + len].copy_from_slice(&values[..len]);
    }

    /// Number of layers.
    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Copy the first `num_slots` token rows of `src` into `dst`, in every layer
    /// (copy-on-write of a partially shared block).
    pub fn copy_block_prefix(&mut self, src: BlockId, dst: BlockId, num_slots: usize) {
        let layout = self.layout;
        let len = num_slots.min(layout.block_size) * layout.head_dim;
        for pools in &mut self.layers {
            for head in 0..layout.num_kv_heads {
                let from = layout.tile_offset(src, head);
                let to = layout.tile_offset(dst, head);
                pools.keys.copy_within(from..from + len, to);
                pools.values.copy_within(from..from + len, to);
            }
        }
    }
}
