//! The two device kernels as candle ops, so the forward is plain candle code on
//! any device: [`CacheWrite`] (in place on a pool) and [`PagedAttention`]. On
//! `Device::Cpu` they run the Rust contract in [`super::reference`]; on CUDA they
//! launch `kernels/*.cu` (see `cuda.rs`). Metal has no launch code yet: it is
//! refused when the device is opened, never silently run on the CPU.

use super::meta::KernelMeta;
use super::reference::{self, HeadShape, KvElement};
use crate::kv_cache::KvLayout;
use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp1, InplaceOp2, Layout, Shape, Tensor};
use std::sync::Arc;

/// A batch's kernel metadata, on the host and uploaded to the device (built only by
/// [`DeviceMeta::upload`] from a checked [`KernelMeta`]).
#[derive(Debug, Clone)]
// The tensors are read by the CUDA launches only; the CPU contract reads `host`.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct DeviceMeta {
    /// The host arrays (the CPU contract reads these).
    pub(crate) host: Arc<KernelMeta>,
    /// `row_seq` as a `u32` tensor.
    pub(crate) row_seq: Tensor,
    /// `row_pos` as a `u32` tensor.
    pub(crate) row_pos: Tensor,
    /// `slot_mapping` as a `u32` tensor.
    pub(crate) slot_mapping: Tensor,
    /// `block_tables` as a `u32` tensor `[seqs, max_blocks]`.
    pub(crate) block_tables: Tensor,
}

impl DeviceMeta {
    /// The host arrays.
    pub fn host(&self) -> &KernelMeta {
        &self.host
    }

    /// Upload `meta` to `device`.
    pub fn upload(meta: KernelMeta, device: &candle_core::Device) -> candle_core::Result<Self> {
        let upload = |values: &[u32]| Tensor::from_slice(values, values.len(), device);
        Ok(Self {
            row_seq: upload(&meta.row_seq)?,
            row_pos: upload(&meta.row_pos)?,
            slot_mapping: upload(&meta.slot_mapping)?,
            block_tables: upload(&meta.block_tables)?,
            host: Arc::new(meta),
        })
    }
}

/// Write `[rows, num_kv_heads, head_dim]` f32 rows into a pool at the batch's slots.
pub struct CacheWrite<'a> {
    /// The batch's metadata (the pool's shape included).
    pub meta: &'a DeviceMeta,
}

fn contiguous<'s, T>(values: &'s [T], layout: &Layout, what: &str) -> candle_core::Result<&'s [T]> {
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&values[start..end]),
        None => bail!("{what} must be contiguous"),
    }
}

impl InplaceOp2 for CacheWrite<'_> {
    fn name(&self) -> &'static str {
        "tessera-cache-write"
    }

    fn cpu_fwd(
        &self,
        pool: &mut CpuStorage,
        pool_l: &Layout,
        src: &CpuStorage,
        src_l: &Layout,
    ) -> candle_core::Result<()> {
        let CpuStorage::F32(rows) = src else {
            bail!("cache write: rows must be f32, got {:?}", src.dtype())
        };
        let rows = contiguous(rows, src_l, "cache write rows")?;
        let (layout, slots) = (self.meta.host.layout, &self.meta.host.slot_mapping);
        if rows.len() != slots.len() * layout.num_kv_heads * layout.head_dim {
            bail!("cache write: {} values for {} slots", rows.len(), slots.len())
        }
        check_pool(pool_l, layout, "cache write")?;
        match pool {
            CpuStorage::F32(pool) => reference::cache_write(layout, slots, rows, pool),
            CpuStorage::F16(pool) => reference::cache_write(layout, slots, rows, pool),
            CpuStorage::BF16(pool) => reference::cache_write(layout, slots, rows, pool),
            other => bail!("cache write: unsupported pool type {:?}", other.dtype()),
        }
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        pool: &mut candle_core::CudaStorage,
        pool_l: &Layout,
        src: &candle_core::CudaStorage,
        src_l: &Layout,
    ) -> candle_core::Result<()> {
        super::cuda::cache_write(self, pool, pool_l, src, src_l)
    }
}

/// Paged attention of `q` (`[rows, num_heads, head_dim]` f32) over one layer's pools.
pub struct PagedAttention<'a> {
    /// Query heads and softmax scale.
    pub shape: HeadShape,
    /// The layer's key pool.
    pub keys: &'a Tensor,
    /// The layer's value pool.
    pub values: &'a Tensor,
    /// The batch's metadata (the pools' shape included).
    pub meta: &'a DeviceMeta,
}

impl PagedAttention<'_> {
    fn attend<T: KvElement>(&self, q: &[f32], keys: &[T], values: &[T]) -> Vec<f32> {
        reference::paged_attention(self.shape, self.meta.host.layout, &self.meta.host, q, keys, values)
    }
}

/// A pool is a whole contiguous tensor of `num_blocks × block_len` elements.
pub(crate) fn check_pool(pool: &Layout, layout: KvLayout, what: &str) -> candle_core::Result<()> {
    let want = layout.num_blocks * layout.block_len();
    if pool.start_offset() != 0 || !pool.is_contiguous() || pool.shape().elem_count() != want {
        bail!(
            "{what}: the pool must be a whole contiguous tensor of {want} elements, got {:?}",
            pool.shape()
        )
    }
    Ok(())
}

impl CustomOp1 for PagedAttention<'_> {
    fn name(&self) -> &'static str {
        "tessera-paged-attention"
    }

    fn cpu_fwd(&self, q: &CpuStorage, q_l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(q) = q else {
            bail!("paged attention: queries must be f32, got {:?}", q.dtype())
        };
        let q = contiguous(q, q_l, "paged attention queries")?;
        let layout = self.meta.host.layout;
        if q.len() != self.meta.host.rows() * self.shape.num_heads * layout.head_dim
            || !self.shape.num_heads.is_multiple_of(layout.num_kv_heads)
        {
            bail!(
                "paged attention: {} query values for {} rows × {} heads",
                q.len(),
                self.meta.host.rows(),
                self.shape.num_heads
            )
        }
        let (keys, keys_l) = self.keys.storage_and_layout();
        let (values, values_l) = self.values.storage_and_layout();
        check_pool(keys_l, layout, "paged attention keys")?;
        check_pool(values_l, layout, "paged attention values")?;
        let out = match (&*keys, &*values) {
            (candle_core::Storage::Cpu(keys), candle_core::Storage::Cpu(values)) => match (keys, values) {
                (CpuStorage::F32(k), CpuStorage::F32(v)) => self.attend(q, k, v),
                (CpuStorage::F16(k), CpuStorage::F16(v)) => self.attend(q, k, v),
                (CpuStorage::BF16(k), CpuStorage::BF16(v)) => self.attend(q, k, v),
                _ => bail!("paged attention: unsupported pool types {:?}", keys.dtype()),
            },
            _ => bail!("paged attention: the pools are not on the queries' device"),
        };
        Ok((CpuStorage::F32(out), q_l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        q: &candle_core::CudaStorage,
        q_l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        super::cuda::paged_attention(self, q, q_l)
    }
}
