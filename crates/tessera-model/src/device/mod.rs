//! The device path (issue 8): the forward pass as candle operations on a
//! `candle_core::Device`, K/V pools in device memory, and Tessera's paged
//! attention and cache-write kernels as custom ops.
//!
//! - `spec.rs`: `--device cpu|cuda[:N]|metal[:N]` and opening it;
//! - `meta.rs`: the per-batch arrays the kernels read (slot mapping, block tables);
//! - `reference.rs`: the kernels' algorithm in Rust (what runs on `Device::Cpu`
//!   and what the CUDA kernels are checked against);
//! - `ops.rs`: the candle custom ops; `cuda.rs`: their CUDA launches (feature `cuda`);
//! - `kv.rs`: device pools; `model.rs`: the device decoder;
//! - `check.rs`: the kernels against the contract on random odd shapes (`tessera check-device`).
//!
//! `--device cpu` does not come here: the CPU runs Tessera's own kernels
//! ([`crate::model::Model`]'s host path). This path runs on `Device::Cpu` only in tests.

#[cfg(feature = "diagnostics")]
pub(crate) mod check;
#[cfg(feature = "cuda")]
mod cuda;
mod kv;
mod meta;
mod model;
mod ops;
pub mod reference;
pub(crate) mod spec;

#[cfg(feature = "diagnostics")]
pub use check::{check_kernels, KernelCheck};
pub use kv::DeviceKv;
pub use meta::KernelMeta;
pub use model::DeviceModel;
pub use ops::{CacheWrite, DeviceMeta, PagedAttention};
pub use spec::{DeviceError, DeviceSpec};
