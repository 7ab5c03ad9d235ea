//! Weight matrices as the forward pass uses them: stored `[out, in]`, possibly
//! several checkpoint matrices fused along `out` (q/k/v, gate/up: one
//! activation pass instead of three), and split into row slices that run in
//! parallel on our pool. Rows of a quantized matrix are independent runs of
//! blocks, so fusing and splitting copy bytes and never change a result.

use crate::parallel;
use crate::{ModelError, Result};
use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{Device, Module, Tensor};
use std::ops::Range;
use tessera_kernels::{Format, KernelError, Path, Q8Activations, Weights};

/// A `[out, in]` weight matrix, quantized or dense f32.
#[derive(Debug)]
// A CUDA build's QTensor carries a large device-storage variant; matrices are
// built once at load and never moved in a loop, so the size does not matter.
#[cfg_attr(feature = "cuda", allow(clippy::large_enum_variant))]
pub enum Matrix {
    /// GGUF blocks (any type candle reads).
    Quantized(QTensor),
    /// Dense f32.
    Dense(Tensor),
}

impl Matrix {
    /// `(out, in)`.
    pub fn dims(&self) -> Result<(usize, usize)> {
        let dims = match self {
            Matrix::Quantized(q) => q.shape().dims2()?,
            Matrix::Dense(t) => t.dims2()?,
        };
        Ok(dims)
    }

    /// Stack matrices with equal `in` along `out` (all quantized alike, or all dense).
    pub fn concat_rows(parts: Vec<Matrix>) -> Result<Matrix> {
        if parts.len() == 1 {
            return parts
                .into_iter()
                .next()
                .ok_or_else(|| ModelError::InvalidConfig("no matrix".into()));
        }
        let cols = parts[0].dims()?.1;
        let mut rows = 0;
        let mut bytes = Vec::new();
        let mut dense = Vec::new();
        let dtype = match &parts[0] {
            Matrix::Quantized(q) => Some(q.dtype()),
            Matrix::Dense(_) => None,
        };
        for part in parts {
            let (r, c) = part.dims()?;
            if c != cols {
                return Err(ModelError::InvalidConfig(format!(
                    "cannot fuse matrices of widths {cols} and {c}"
                )));
            }
            rows += r;
            match (part, dtype) {
                (Matrix::Quantized(q), Some(d)) if q.dtype() == d => bytes.extend_from_slice(&q.data()?),
                (Matrix::Dense(t), None) => dense.push(t),
                _ => {
                    return Err(ModelError::InvalidConfig(
                        "cannot fuse matrices of different types".into(),
                    ))
                }
            }
        }
        match dtype {
            Some(d) => Ok(Matrix::Quantized(QTensor::new(
                QStorage::from_data(bytes.into(), &Device::Cpu, d)?,
                (rows, cols),
            )?)),
            None => Ok(Matrix::Dense(Tensor::cat(&dense, 0)?)),
        }
    }

    /// Rows `[start, start + len)` as a matmul operand.
    fn row_slice(&self, start: usize, len: usize) -> Result<QMatMul> {
        let (rows, cols) = self.dims()?;
        match self {
            Matrix::Quantized(q) => {
                let data = q.data()?;
                let row_bytes = data.len() / rows;
                let slice = data[start * row_bytes..(start + len) * row_bytes].to_vec();
                let storage = QStorage::from_data(slice.into(), &Device::Cpu, q.dtype())?;
                Ok(QMatMul::from_qtensor(QTensor::new(storage, (len, cols))?)?)
            }
            Matrix::Dense(t) => Ok(QMatMul::Tensor(t.narrow(0, start, len)?.contiguous()?)),
        }
    }
}

/// A matrix split into row slices computed in parallel: `y = x Wᵀ`.
#[derive(Debug)]
pub struct ParallelMatMul {
    kernel: Kernel,
    rows: usize,
    cols: usize,
}

/// Who computes the product.
#[derive(Debug)]
enum Kernel {
    /// Q8_0, Q4_0, Q4_1, Q4_K and Q6_K weights (Q4_1 repacked to Q8_0 with
    /// `repack_q4_1`): Tessera's own kernels (`tessera-kernels`), activations
    /// quantized once per product. Q8_0 and Q4_1 are bit-identical to
    /// candle's products; Q4_0, Q4_K and Q6_K agree to rounding.
    Tessera {
        weights: Weights,
        slices: Vec<Range<usize>>,
    },
    /// Every other type: candle's quantized (or dense) matmul per row slice.
    Candle(Vec<(usize, QMatMul)>),
}

/// The `tessera-kernels` format of a GGML type, if it has one.
fn kernel_format(dtype: GgmlDType) -> Option<Format> {
    match dtype {
        GgmlDType::Q8_0 => Some(Format::Q8_0),
        GgmlDType::Q4_0 => Some(Format::Q4_0),
        GgmlDType::Q4_1 => Some(Format::Q4_1),
        GgmlDType::Q4K => Some(Format::Q4K),
        GgmlDType::Q6K => Some(Format::Q6K),
        _ => None,
    }
}

/// Row ranges of `rows`, one per worker thread (heights multiples of 16).
fn row_ranges(rows: usize) -> Vec<Range<usize>> {
    let parts = parallel::num_threads().min(rows.div_ceil(16)).max(1);
    let height = rows.div_ceil(parts).div_ceil(16) * 16;
    (0..rows)
        .step_by(height.max(1))
        .map(|start| start..(start + height).min(rows))
        .collect()
}

impl ParallelMatMul {
    /// Split `matrix` into one slice per worker thread.
    pub fn new(matrix: Matrix) -> Result<Self> {
        let (rows, cols) = matrix.dims()?;
        let slices = row_ranges(rows);
        let format = match &matrix {
            Matrix::Quantized(q) => kernel_format(q.dtype()),
            Matrix::Dense(_) => None,
        };
        let kernel = match (&matrix, format) {
            (Matrix::Quantized(q), Some(format)) => Kernel::Tessera {
                weights: Weights::from_ggml(format, &q.data()?, rows, cols)
                    .map_err(|e| ModelError::InvalidConfig(format!("{format:?} weights: {e}")))?,
                slices,
            },
            _ => {
                let mut parts = Vec::with_capacity(slices.len());
                for range in slices {
                    parts.push((range.len(), matrix.row_slice(range.start, range.len())?));
                }
                Kernel::Candle(parts)
            }
        };
        Ok(Self { kernel, rows, cols })
    }

    /// Output width.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// `x` is `[n, cols]`; returns `[n, rows]`.
    pub fn forward(&self, x: &[f32], n: usize) -> Result<Vec<f32>> {
        match &self.kernel {
            Kernel::Tessera { weights, slices } => self.forward_kernel(slices, x, n, |path, range, a, part, stride| {
                weights.matmul(path, range, a, part, stride)
            }),
            Kernel::Candle(slices) => self.forward_candle(slices, x, n),
        }
    }

    /// Quantize `x` once, run `kernel` on every row slice in parallel, gather.
    fn forward_kernel<K>(&self, slices: &[Range<usize>], x: &[f32], n: usize, kernel: K) -> Result<Vec<f32>>
    where
        K: Fn(Path, Range<usize>, &Q8Activations, &mut [f32], usize) -> std::result::Result<(), KernelError> + Sync,
    {
        let kernel_error = |e: KernelError| ModelError::InvalidConfig(format!("quantized matmul: {e}"));
        let activations = Q8Activations::quantize(x, n, self.cols).map_err(kernel_error)?;
        let path = Path::detect();
        let parts = parallel::map(slices, |range| {
            let mut part = vec![0f32; n * range.len()];
            kernel(path, range.clone(), &activations, &mut part, range.len()).map(|()| part)
        });
        let mut y = vec![0f32; n * self.rows];
        for (range, part) in slices.iter().zip(parts) {
            let part = part.map_err(kernel_error)?;
            for (row, values) in part.chunks_exact(range.len()).enumerate() {
                y[row * self.rows + range.start..row * self.rows + range.end].copy_from_slice(values);
            }
        }
        Ok(y)
    }

    fn forward_candle(&self, slices: &[(usize, QMatMul)], x: &[f32], n: usize) -> Result<Vec<f32>> {
        let input = Tensor::from_slice(x, (n, self.cols), &Device::Cpu)?;
        let outputs = parallel::map(slices, |(_, slice)| -> Result<Vec<f32>> {
            Ok(slice.forward(&input)?.flatten_all()?.to_vec1::<f32>()?)
        });
        if outputs.len() == 1 {
            return outputs.into_iter().next().unwrap_or_else(|| Ok(Vec::new()));
        }
        let mut y = vec![0f32; n * self.rows];
        let mut offset = 0;
        for ((len, _), part) in slices.iter().zip(outputs) {
            let part = part?;
            for (row, values) in part.chunks_exact(*len).enumerate() {
                y[row * self.rows + offset..row * self.rows + offset + len].copy_from_slice(values);
            }
            offset += len;
        }
        Ok(y)
    }
}
