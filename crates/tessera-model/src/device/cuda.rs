//! CUDA launches of `kernels/*.cu` (compiled to PTX by `build.rs` under the
//! `cuda` feature, loaded once per device by candle's module cache). Shapes
//! and dtypes are checked here, before any launch; the kernels trust them.

use super::ops::{check_pool, CacheWrite, PagedAttention};
use crate::attention::PARTITION_TOKENS;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
use candle_core::{bail, CudaDevice, CudaStorage, Layout, Result, Shape, Storage, Tensor};

const ATTENTION_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/paged_attention.ptx"));
const CACHE_WRITE_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/cache_write.ptx"));
/// A multiple of the warp size: the kernels' reductions shuffle over full warps.
const ATTENTION_THREADS: u32 = 128;
/// Dynamic shared memory a launch may take without opting in to more.
const MAX_SHARED_BYTES: usize = 48 * 1024;
const CACHE_WRITE_THREADS: u32 = 256;

/// The f32 view of a contiguous tensor's storage.
fn f32_view<'a>(storage: &'a CudaStorage, layout: &Layout, what: &str) -> Result<CudaView<'a, f32>> {
    let (start, end) = layout
        .contiguous_offsets()
        .ok_or_else(|| candle_core::Error::Msg(format!("{what} must be contiguous")))?;
    Ok(storage.as_cuda_slice::<f32>()?.slice(start..end))
}

/// Run `f` on the CUDA storage of a metadata tensor (`u32`, contiguous from offset 0,
/// exactly `len` values, on `device`).
fn with_u32<R>(
    tensor: &Tensor,
    len: usize,
    device: &CudaDevice,
    f: impl FnOnce(&CudaSlice<u32>) -> Result<R>,
) -> Result<R> {
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cuda(storage) = &*storage else {
        bail!("kernel metadata is not on the CUDA device")
    };
    if layout.start_offset() != 0 || !layout.is_contiguous() || layout.shape().elem_count() != len {
        bail!("kernel metadata must be a whole contiguous tensor of {len} values")
    }
    if storage.device.id() != device.id() {
        bail!("kernel metadata is on another CUDA device")
    }
    f(storage.as_cuda_slice::<u32>()?)
}

fn as_i32(value: usize, what: &str) -> Result<i32> {
    i32::try_from(value).map_err(|_| candle_core::Error::Msg(format!("{what} = {value} exceeds the kernels' i32")))
}

pub(super) fn cache_write(
    op: &CacheWrite<'_>,
    pool: &mut CudaStorage,
    pool_l: &Layout,
    src: &CudaStorage,
    src_l: &Layout,
) -> Result<()> {
    let layout = op.meta.host().layout();
    let rows = op.meta.host().rows();
    if src.device.id() != pool.device.id() {
        bail!("cache write: the rows are not on the pool's device")
    }
    let src = f32_view(src, src_l, "cache write rows")?;
    if src.len() != rows * layout.num_kv_heads * layout.head_dim {
        bail!("cache write: {} values for {rows} slots", src.len())
    }
    check_pool(pool_l, layout, "cache write")?;
    let dev = pool.device().clone();

    let (name, pool_slice) = match &mut pool.slice {
        CudaStorageSlice::F32(s) => ("tessera_cache_write_f32", PoolMut::F32(s)),
        CudaStorageSlice::F16(s) => ("tessera_cache_write_f16", PoolMut::F16(s)),
        CudaStorageSlice::BF16(s) => ("tessera_cache_write_bf16", PoolMut::Bf16(s)),
        _ => bail!("cache write: unsupported pool type"),
    };
    let func = dev.get_or_load_custom_func(name, "tessera_cache_write", CACHE_WRITE_PTX)?;
    let (heads, dim, block_size) = (
        as_i32(layout.num_kv_heads, "num_kv_heads")?,
        as_i32(layout.head_dim, "head_dim")?,
        as_i32(layout.block_size, "block_size")?,
    );
    let cfg = LaunchConfig {
        grid_dim: (rows as u32, 1, 1),
        block_dim: (CACHE_WRITE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    with_u32(&op.meta.slot_mapping, rows, &dev, |slots| {
        let mut builder = func.builder();
        match pool_slice {
            PoolMut::F32(s) => builder.arg(s),
            PoolMut::F16(s) => builder.arg(s),
            PoolMut::Bf16(s) => builder.arg(s),
        };
        builder.arg(&src).arg(slots).arg(&heads).arg(&dim).arg(&block_size);
        // SAFETY: the rows, the pool and the slot tensor have the checked sizes, and every
        // slot lies inside the pool (KernelMeta::new checks block ids against the layout).
        unsafe { builder.launch(cfg) }.w()?;
        Ok(())
    })
}

enum PoolMut<'a> {
    F32(&'a mut CudaSlice<f32>),
    F16(&'a mut CudaSlice<half::f16>),
    Bf16(&'a mut CudaSlice<half::bf16>),
}

/// Partial softmax states of one attention call.
struct Partials {
    max: CudaSlice<f32>,
    sum: CudaSlice<f32>,
    acc: CudaSlice<f32>,
}

impl Partials {
    fn alloc(dev: &CudaDevice, heads: usize, partitions: usize, dim: usize) -> Result<Self> {
        // SAFETY: the attention kernel writes every element before the merge reads it.
        unsafe {
            Ok(Self {
                max: dev.alloc::<f32>(heads * partitions)?,
                sum: dev.alloc::<f32>(heads * partitions)?,
                acc: dev.alloc::<f32>(heads * partitions * dim)?,
            })
        }
    }
}

pub(super) fn paged_attention(op: &PagedAttention<'_>, q: &CudaStorage, q_l: &Layout) -> Result<(CudaStorage, Shape)> {
    let meta = op.meta.host();
    let layout = meta.layout();
    let (rows, num_heads, dim) = (meta.rows(), op.shape.num_heads, layout.head_dim);
    let q_view = f32_view(q, q_l, "paged attention queries")?;
    if q_view.len() != rows * num_heads * dim || !num_heads.is_multiple_of(layout.num_kv_heads) || dim > 1024 {
        bail!(
            "paged attention: {} query values for {rows} rows × {num_heads} heads × {dim}",
            q_view.len()
        )
    }
    let dev = q.device().clone();
    let group = num_heads / layout.num_kv_heads;
    let shared = (group * dim + group * PARTITION_TOKENS + (ATTENTION_THREADS as usize).div_ceil(32)) * 4;
    if shared > MAX_SHARED_BYTES {
        bail!(
            "paged attention: a GQA group of {group} heads × {dim} needs {shared} bytes of shared memory, over {MAX_SHARED_BYTES}"
        )
    }
    let partials = Partials::alloc(&dev, rows * num_heads, meta.partitions, dim)?;
    let ints = [
        as_i32(num_heads, "num_heads")?,
        as_i32(layout.num_kv_heads, "num_kv_heads")?,
        as_i32(dim, "head_dim")?,
        as_i32(layout.block_size, "block_size")?,
        as_i32(meta.max_blocks, "max_blocks")?,
        as_i32(meta.partitions, "partitions")?,
    ];
    let (keys, keys_l) = op.keys.storage_and_layout();
    let (values, values_l) = op.values.storage_and_layout();
    check_pool(keys_l, layout, "paged attention keys")?;
    check_pool(values_l, layout, "paged attention values")?;
    let (Storage::Cuda(keys), Storage::Cuda(values)) = (&*keys, &*values) else {
        bail!("paged attention: the pools are not on the CUDA device")
    };
    if keys.device.id() != dev.id() || values.device.id() != dev.id() {
        bail!("paged attention: the pools are on another CUDA device")
    }
    let name = match (&keys.slice, &values.slice) {
        (CudaStorageSlice::F32(_), CudaStorageSlice::F32(_)) => "tessera_paged_attention_f32",
        (CudaStorageSlice::F16(_), CudaStorageSlice::F16(_)) => "tessera_paged_attention_f16",
        (CudaStorageSlice::BF16(_), CudaStorageSlice::BF16(_)) => "tessera_paged_attention_bf16",
        _ => bail!("paged attention: unsupported or mismatched pool types"),
    };
    let func = dev.get_or_load_custom_func(name, "tessera_paged_attention", ATTENTION_PTX)?;
    let cfg = LaunchConfig {
        grid_dim: (rows as u32, layout.num_kv_heads as u32, meta.partitions as u32),
        block_dim: (ATTENTION_THREADS, 1, 1),
        shared_mem_bytes: shared as u32,
    };
    let table_len = meta.seqs() * meta.max_blocks();
    with_u32(&op.meta.block_tables, table_len, &dev, |tables| {
        with_u32(&op.meta.row_seq, rows, &dev, |row_seq| {
            with_u32(&op.meta.row_pos, rows, &dev, |row_pos| {
                let mut builder = func.builder();
                builder.arg(&q_view);
                push_pool(&mut builder, &keys.slice);
                push_pool(&mut builder, &values.slice);
                builder.arg(tables).arg(row_seq).arg(row_pos);
                builder.arg(&partials.max).arg(&partials.sum).arg(&partials.acc);
                for value in &ints {
                    builder.arg(value);
                }
                builder.arg(&op.shape.scale);
                // SAFETY: queries, pools and metadata have the checked sizes on this device;
                // block ids were checked against the layout by KernelMeta::new, and a row
                // reads only the table entries under its position.
                unsafe { builder.launch(cfg) }.w()?;
                Ok(())
            })
        })
    })?;
    let out = merge(&dev, &partials, rows, num_heads, dim, meta.partitions)?;
    Ok((CudaStorage::wrap_cuda_slice(out, dev), q_l.shape().clone()))
}

fn push_pool<'a>(builder: &mut candle_core::cuda_backend::cudarc::driver::LaunchArgs<'a>, pool: &'a CudaStorageSlice) {
    match pool {
        CudaStorageSlice::F32(s) => builder.arg(s),
        CudaStorageSlice::F16(s) => builder.arg(s),
        CudaStorageSlice::BF16(s) => builder.arg(s),
        // Checked by the caller's kernel-name match.
        _ => builder,
    };
}

fn merge(
    dev: &CudaDevice,
    partials: &Partials,
    rows: usize,
    heads: usize,
    dim: usize,
    partitions: usize,
) -> Result<CudaSlice<f32>> {
    let func = dev.get_or_load_custom_func(
        "tessera_paged_attention_merge",
        "tessera_paged_attention",
        ATTENTION_PTX,
    )?;
    // SAFETY: the merge kernel writes every output element.
    let out = unsafe { dev.alloc::<f32>(rows * heads * dim)? };
    let (dim_i32, partitions_i32) = (as_i32(dim, "head_dim")?, as_i32(partitions, "partitions")?);
    let cfg = LaunchConfig {
        grid_dim: (rows as u32, heads as u32, 1),
        block_dim: (dim as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut builder = func.builder();
    builder
        .arg(&partials.max)
        .arg(&partials.sum)
        .arg(&partials.acc)
        .arg(&out)
        .arg(&dim_i32)
        .arg(&partitions_i32);
    // SAFETY: the buffers hold rows × heads × partitions states of `dim` values.
    unsafe { builder.launch(cfg) }.w()?;
    Ok(out)
}
