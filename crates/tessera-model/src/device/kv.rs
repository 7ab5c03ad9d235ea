//! K/V pools in device memory: one candle tensor per layer and kind,
//! `[num_blocks, num_kv_heads, block_size, head_dim]`, the layout of the CPU
//! pools, so block ids, copy-on-write and the persisted format are the same.

use super::meta::KernelMeta;
use super::ops::{CacheWrite, DeviceMeta};
use super::DeviceSpec;
use crate::error::{ModelError, Result};
use crate::kv_cache::{KvDtype, KvLayout};
use candle_core::{DType, Device, Tensor};
use half::f16;
use tessera_kv::BlockId;

/// Every layer's pools on one device (not `Clone`: a clone would alias the device memory).
#[derive(Debug)]
pub struct DeviceKv {
    spec: DeviceSpec,
    device: Device,
    layout: KvLayout,
    dtype: KvDtype,
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
}

fn candle_dtype(dtype: KvDtype) -> DType {
    match dtype {
        KvDtype::F16 => DType::F16,
        KvDtype::F32 => DType::F32,
    }
}

fn device_error(what: &str, error: candle_core::Error) -> ModelError {
    ModelError::Device(format!("{what}: {error}"))
}

impl DeviceKv {
    /// Zeroed pools for `num_layers` layers of `layout` on `device`.
    pub fn new(spec: DeviceSpec, device: &Device, num_layers: usize, layout: KvLayout, dtype: KvDtype) -> Result<Self> {
        let shape = (
            layout.num_blocks,
            layout.num_kv_heads,
            layout.block_size,
            layout.head_dim,
        );
        let zeros = || {
            Tensor::zeros(shape, candle_dtype(dtype), device).map_err(|e| device_error("allocating the KV pools", e))
        };
        let keys = (0..num_layers).map(|_| zeros()).collect::<Result<Vec<_>>>()?;
        let values = (0..num_layers).map(|_| zeros()).collect::<Result<Vec<_>>>()?;
        Ok(Self {
            spec,
            device: device.clone(),
            layout,
            dtype,
            keys,
            values,
        })
    }

    /// The device the pools live on.
    pub fn spec(&self) -> DeviceSpec {
        self.spec
    }

    /// The candle device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Layer `layer`'s key and value pools.
    pub fn pools(&self, layer: usize) -> (&Tensor, &Tensor) {
        (&self.keys[layer], &self.values[layer])
    }

    /// Number of layers.
    pub fn num_layers(&self) -> usize {
        self.keys.len()
    }

    /// Upload a batch's kernel metadata to this device.
    pub fn upload(&self, meta: KernelMeta) -> Result<DeviceMeta> {
        DeviceMeta::upload(meta, &self.device).map_err(|e| device_error("uploading the batch metadata", e))
    }

    /// Write the batch's new K and V rows (`[rows, num_kv_heads, head_dim]` f32) to their slots.
    pub fn write(&self, layer: usize, keys: &Tensor, values: &Tensor, meta: &DeviceMeta) -> Result<()> {
        let op = CacheWrite { meta };
        self.keys[layer]
            .inplace_op2(keys, &op)
            .and_then(|()| self.values[layer].inplace_op2(values, &op))
            .map_err(|e| device_error("writing the KV cache", e))
    }

    /// Copy-on-write of a partially shared block: `dst` gets `src`'s rows in every layer.
    /// The whole block is copied; rows past the shared ones are overwritten before
    /// anything reads them (a sequence writes a slot before attending to it).
    pub fn copy_block(&self, src: BlockId, dst: BlockId) -> Result<()> {
        for pool in self.keys.iter().chain(&self.values) {
            let rows = pool
                .narrow(0, src.index(), 1)
                .and_then(|rows| rows.copy())
                .and_then(|rows| pool.slice_set(&rows, 0, dst.index()));
            rows.map_err(|e| device_error("copying a KV block", e))?;
        }
        Ok(())
    }

    /// Append one layer's K then V rows of `block` as little-endian bytes (the CPU cache's format).
    pub fn append_block_bytes(&self, layer: usize, block: BlockId, out: &mut Vec<u8>) -> Result<()> {
        for pool in [&self.keys[layer], &self.values[layer]] {
            let rows = pool
                .narrow(0, block.index(), 1)
                .and_then(|rows| rows.flatten_all())
                .map_err(|e| device_error("reading a KV block", e))?;
            match self.dtype {
                KvDtype::F16 => rows
                    .to_vec1::<f16>()
                    .map(|v| v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes()))),
                KvDtype::F32 => rows
                    .to_vec1::<f32>()
                    .map(|v| v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes()))),
            }
            .map_err(|e| device_error("reading a KV block", e))?;
        }
        Ok(())
    }

    /// Overwrite one layer's K and V rows of `block` from [`append_block_bytes`](Self::append_block_bytes)'s bytes.
    pub fn set_block_bytes(&self, layer: usize, block: BlockId, bytes: &[u8]) -> Result<()> {
        let shape = (
            1,
            self.layout.num_kv_heads,
            self.layout.block_size,
            self.layout.head_dim,
        );
        let half_len = bytes.len() / 2;
        for (pool, part) in [
            (&self.keys[layer], &bytes[..half_len]),
            (&self.values[layer], &bytes[half_len..]),
        ] {
            let rows = match self.dtype {
                KvDtype::F16 => Tensor::from_vec(
                    part.chunks_exact(2)
                        .map(|c| f16::from_le_bytes([c[0], c[1]]))
                        .collect::<Vec<_>>(),
                    shape,
                    &self.device,
                ),
                KvDtype::F32 => Tensor::from_vec(
                    part.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect::<Vec<_>>(),
                    shape,
                    &self.device,
                ),
            };
            rows.and_then(|rows| pool.slice_set(&rows, 0, block.index()))
                .map_err(|e| device_error("restoring a KV block", e))?;
        }
        Ok(())
    }
}
