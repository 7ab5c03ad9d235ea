//! [`KvCache`]: the model's K/V storage beside [`Model`](crate::model::Model), in
//! host memory (the CPU path's pools, `kv_cache.rs`) or on the model's device
//! (`device::DeviceKv`). The host storage knows nothing of devices; this type
//! is where the two meet, as `Model` is for the forward pass.

use crate::config::ModelConfig;
use crate::device::{DeviceKv, DeviceSpec};
use crate::error::Result;
use crate::kv_cache::{HostKv, KvDtype, KvLayout, LayerKv};
use tessera_kv::BlockId;

/// The whole model's K/V storage, in host memory (the CPU path) or on a device.
#[derive(Debug)]
pub struct KvCache {
    layout: KvLayout,
    dtype: KvDtype,
    store: KvStore,
}

#[derive(Debug)]
enum KvStore {
    Host(HostKv),
    Device(DeviceKv),
}

impl KvCache {
    /// Zeroed storage for `num_blocks` blocks of `block_size` tokens for `config`'s model.
    pub fn new(config: &ModelConfig, num_blocks: usize, block_size: usize, dtype: KvDtype) -> Result<Self> {
        let layout = KvLayout::checked(config, num_blocks, block_size)?;
        Ok(Self {
            layout,
            dtype,
            store: KvStore::Host(HostKv::zeroed(layout, config.num_layers, dtype)),
        })
    }

    /// Wrap device pools (see [`crate::model::Model::new_kv_cache`]).
    pub(crate) fn on_device(kv: DeviceKv, layout: KvLayout, dtype: KvDtype) -> Self {
        Self {
            layout,
            dtype,
            store: KvStore::Device(kv),
        }
    }

    /// Where the pools live.
    pub fn device(&self) -> DeviceSpec {
        match &self.store {
            KvStore::Host(_) => DeviceSpec::Cpu,
            KvStore::Device(kv) => kv.spec(),
        }
    }

    /// The host pools, `None` when they live on a device.
    pub(crate) fn host_layers_mut(&mut self) -> Option<&mut [LayerKv]> {
        match &mut self.store {
            KvStore::Host(host) => Some(host.layers_mut()),
            KvStore::Device(_) => None,
        }
    }

    /// The device pools, `None` when they live in host memory.
    pub(crate) fn device_pools(&self) -> Option<&DeviceKv> {
        match &self.store {
            KvStore::Host(_) => None,
            KvStore::Device(kv) => Some(kv),
        }
    }

    /// Bytes needed per token slot across all layers (K and V).
    pub fn bytes_per_token(config: &ModelConfig, dtype: KvDtype) -> usize {
        2 * config.num_layers * config.num_kv_heads * config.head_dim * dtype.bytes()
    }

    /// Bytes the K/V pools hold, all layers (what the cache actually allocated).
    pub fn allocated_bytes(&self) -> usize {
        2 * self.num_layers() * self.layout.num_blocks * self.layout.block_len() * self.dtype.bytes()
    }

    /// The cache's shape.
    pub fn layout(&self) -> KvLayout {
        self.layout
    }

    /// The pools' element type.
    pub fn dtype(&self) -> KvDtype {
        self.dtype
    }

    /// One layer's host pools (`None` when the pools live on a device).
    pub fn layer(&self, index: usize) -> Option<&LayerKv> {
        match &self.store {
            KvStore::Host(host) => host.layer(index),
            KvStore::Device(_) => None,
        }
    }

    /// Append one layer's K then V rows of `block` (all KV heads, every slot) as
    /// little-endian bytes: `2 × block_len × dtype bytes` of them.
    pub fn append_block_bytes(&self, layer: usize, block: BlockId, out: &mut Vec<u8>) -> Result<()> {
        match &self.store {
            KvStore::Host(host) => host.append_block_bytes(self.layout, layer, block, out),
            KvStore::Device(kv) => kv.append_block_bytes(layer, block, out)?,
        }
        Ok(())
    }

    /// Overwrite one layer's K and V rows of `block` from bytes written by
    /// [`append_block_bytes`](Self::append_block_bytes).
    pub fn set_block_bytes(&mut self, layer: usize, block: BlockId, bytes: &[u8]) -> Result<()> {
        match &mut self.store {
            KvStore::Host(host) => host.set_block_bytes(self.layout, layer, block, bytes),
            KvStore::Device(kv) => kv.set_block_bytes(layer, block, bytes)?,
        }
        Ok(())
    }

    /// Bytes one layer's block takes in [`append_block_bytes`](Self::append_block_bytes).
    pub fn block_bytes_len(&self) -> usize {
        2 * self.layout.block_len() * self.dtype.bytes()
    }

    /// Number of layers.
    pub fn num_layers(&self) -> usize {
        match &self.store {
            KvStore::Host(host) => host.num_layers(),
            KvStore::Device(kv) => kv.num_layers(),
        }
    }

    /// Copy the first `num_slots` token rows of `src` into `dst`, in every layer
    /// (copy-on-write of a partially shared block). On a device the whole block is
    /// copied (the rows past `num_slots` are written before they are read).
    pub fn copy_block_prefix(&mut self, src: BlockId, dst: BlockId, num_slots: usize) -> Result<()> {
        match &mut self.store {
            KvStore::Host(host) => host.copy_block_prefix(self.layout, src, dst, num_slots),
            KvStore::Device(kv) => kv.copy_block(src, dst)?,
        }
        Ok(())
    }
}
