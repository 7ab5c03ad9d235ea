//! Weight matrices as the forward pass uses them: stored `[out, in]`, possibly
//! several checkpoint matrices fused along `out` (q/k/v, gate/up: one
//! activation pass instead of three), and split into row slices that run in
//! parallel on our pool. Rows of a quantized matrix are independent runs of
//! blocks, so fusing and splitting copy bytes and never change a result.

use crate::error::{ModelError, Result};
use crate::parallel;
use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{Device, Module, Tensor};
use std::ops::Range;
use tessera_kernels::{Format, HalfKind, HalfWeights, KernelError, Path, Q8Activations, Quantization, Weights};

/// A `[out, in]` weight matrix, quantized or dense f32.
#[derive(Debug)]
// A CUDA build's QTensor carries a large device-storage variant; matrices are
// built once at load and never moved in a loop, so the size does not matter.
#[cfg_attr(feature = "cuda", allow(clippy::large_enum_variant))]
pub enum Matrix {
    /// GGUF blocks (any type candle reads).
    Quantized(QTensor),
    /// GGUF blocks as read from the file, for a type with Tessera's own
    /// kernel: repacked straight from these bytes (no candle copy between).
    Ggml(GgmlMatrix),
    /// Dense f32.
    Dense(Tensor),
}

/// A `[rows, cols]` matrix of GGML blocks of `dtype`, rows in order.
#[derive(Debug)]
pub struct GgmlMatrix {
    /// The block type.
    pub dtype: GgmlDType,
    /// `out`.
    pub rows: usize,
    /// `in`.
    pub cols: usize,
    /// `rows × cols / block size` blocks.
    pub bytes: Vec<u8>,
}

impl Matrix {
    /// `(out, in)`.
    pub fn dims(&self) -> Result<(usize, usize)> {
        let dims = match self {
            Matrix::Quantized(q) => q.shape().dims2()?,
            Matrix::Ggml(g) => (g.rows, g.cols),
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
        let dtype = storage_type(&parts[0]);
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
                (Matrix::Ggml(g), Some(d)) if g.dtype == d => bytes.extend_from_slice(&g.bytes),
                (Matrix::Dense(t), None) => dense.push(t),
                _ => {
                    return Err(ModelError::InvalidConfig(
                        "cannot fuse matrices of different types".into(),
                    ))
                }
            }
        }
        match dtype {
            Some(dtype) => Ok(Matrix::Ggml(GgmlMatrix {
                dtype,
                rows,
                cols,
                bytes,
            })),
            None => Ok(Matrix::Dense(Tensor::cat(&dense, 0)?)),
        }
    }

    /// Rows `[start, start + len)` as a matmul operand.
    fn row_slice(&self, start: usize, len: usize) -> Result<QMatMul> {
        let (rows, cols) = self.dims()?;
        let slice_of = |data: &[u8], dtype: GgmlDType| -> Result<QMatMul> {
            let row_bytes = data.len() / rows;
            let slice = data[start * row_bytes..(start + len) * row_bytes].to_vec();
            let storage = QStorage::from_data(slice.into(), &Device::Cpu, dtype)?;
            Ok(QMatMul::from_qtensor(QTensor::new(storage, (len, cols))?)?)
        };
        match self {
            Matrix::Quantized(q) => slice_of(&q.data()?, q.dtype()),
            Matrix::Ggml(g) => slice_of(&g.bytes, g.dtype),
            Matrix::Dense(t) => Ok(QMatMul::Tensor(t.narrow(0, start, len)?.contiguous()?)),
        }
    }
}

/// A weight matrix split into row slices computed in parallel: `y = x Wᵀ`.
///
/// Built from one checkpoint matrix or several stacked along `out` (q/k/v,
/// gate/up). Adjacent parts of one type are fused into one matrix; parts of
/// different types stay separate products written side by side into one
/// output (llama.cpp's K-quant presets store `attn_v` as Q6_K beside Q4_K
/// `attn_q`/`attn_k` in some layers), so a mixed group costs no refusal and no
/// re-encode. Activations are quantized once per product for every part, and
/// every part's row slices run in one parallel job.
#[derive(Debug)]
pub struct ParallelMatMul {
    parts: Vec<Part>,
    rows: usize,
    cols: usize,
}

/// Rows `offset..offset + rows` of a [`ParallelMatMul`], one weight type.
#[derive(Debug)]
struct Part {
    offset: usize,
    rows: usize,
    kernel: Kernel,
}

/// Who computes a part's product.
#[derive(Debug)]
enum Kernel {
    /// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and Q2_K to Q6_K weights (Q4_1 repacked
    /// to Q8_0 with `repack_q4_1`): Tessera's own kernels
    /// (`tessera-kernels`), activations quantized once per product. Q8_0,
    /// Q4_1, Q5_0 and Q5_1 are bit-identical to candle's products; Q4_0,
    /// Q2_K to Q6_K agree to rounding.
    Tessera {
        weights: Weights,
        slices: Vec<Range<usize>>,
    },
    /// F16 and BF16 weights as stored, times the f32 activations
    /// (`tessera_kernels::HalfWeights`).
    Half {
        weights: HalfWeights,
        slices: Vec<Range<usize>>,
    },
    /// Every other type: candle's quantized (or dense) matmul per row slice.
    Candle(Vec<(Range<usize>, QMatMul)>),
}

/// The half-precision kind of a GGML type, if it is one.
pub(crate) fn half_kind(dtype: GgmlDType) -> Option<HalfKind> {
    match dtype {
        GgmlDType::F16 => Some(HalfKind::F16),
        GgmlDType::BF16 => Some(HalfKind::Bf16),
        _ => None,
    }
}

/// The `tessera-kernels` format of a GGML type, if it has one.
pub(crate) fn kernel_format(dtype: GgmlDType) -> Option<Format> {
    match dtype {
        GgmlDType::Q8_0 => Some(Format::Q8_0),
        GgmlDType::Q4_0 => Some(Format::Q4_0),
        GgmlDType::Q4_1 => Some(Format::Q4_1),
        GgmlDType::Q5_0 => Some(Format::Q5_0),
        GgmlDType::Q5_1 => Some(Format::Q5_1),
        GgmlDType::Q2K => Some(Format::Q2K),
        GgmlDType::Q3K => Some(Format::Q3K),
        GgmlDType::Q4K => Some(Format::Q4K),
        GgmlDType::Q5K => Some(Format::Q5K),
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

/// The type a matrix is stored in, for grouping parts (`None`: dense).
fn storage_type(matrix: &Matrix) -> Option<GgmlDType> {
    match matrix {
        Matrix::Quantized(q) => Some(q.dtype()),
        Matrix::Ggml(g) => Some(g.dtype),
        Matrix::Dense(_) => None,
    }
}

/// One unit of a product's parallel job: a row slice of one part.
struct Task<'a> {
    part: &'a Part,
    slice: usize,
}

impl Part {
    fn new(offset: usize, matrix: Matrix) -> Result<Self> {
        let (rows, cols) = matrix.dims()?;
        let slices = row_ranges(rows);
        let half = storage_type(&matrix)
            .and_then(half_kind)
            .filter(|_| cols.is_multiple_of(8));
        let bytes = match &matrix {
            Matrix::Quantized(q) => Some(q.data()?),
            Matrix::Ggml(g) => Some(std::borrow::Cow::Borrowed(&g.bytes[..])),
            Matrix::Dense(_) => None,
        };
        let kernel = match (bytes, storage_type(&matrix).and_then(kernel_format), half) {
            (Some(bytes), Some(format), _) => Kernel::Tessera {
                weights: Weights::from_ggml(format, &bytes, rows, cols)
                    .map_err(|e| ModelError::InvalidConfig(format!("{format:?} weights: {e}")))?,
                slices,
            },
            (Some(bytes), None, Some(kind)) => Kernel::Half {
                weights: HalfWeights::from_ggml(kind, &bytes, rows, cols)
                    .map_err(|e| ModelError::InvalidConfig(format!("{kind:?} weights: {e}")))?,
                slices,
            },
            _ => {
                let mut parts = Vec::with_capacity(slices.len());
                for range in slices {
                    let slice = matrix.row_slice(range.start, range.len())?;
                    parts.push((range, slice));
                }
                Kernel::Candle(parts)
            }
        };
        Ok(Self { offset, rows, kernel })
    }

    /// Whether Tessera's own kernels compute the part.
    fn is_own(&self) -> bool {
        !matches!(self.kernel, Kernel::Candle(_))
    }

    /// The storage type of a part on candle's generic kernels (`None` on Tessera's own).
    fn generic_type(&self) -> Option<String> {
        let Kernel::Candle(slices) = &self.kernel else {
            return None;
        };
        Some(match slices.first().map(|(_, matmul)| matmul) {
            Some(QMatMul::QTensor(q)) => format!("{:?}", q.dtype()),
            _ => "dense f32".to_string(),
        })
    }

    fn slice_count(&self) -> usize {
        match &self.kernel {
            Kernel::Tessera { slices, .. } | Kernel::Half { slices, .. } => slices.len(),
            Kernel::Candle(slices) => slices.len(),
        }
    }

    /// The part's rows computed by slice `slice`.
    fn slice_rows(&self, slice: usize) -> Range<usize> {
        match &self.kernel {
            Kernel::Tessera { slices, .. } | Kernel::Half { slices, .. } => slices[slice].clone(),
            Kernel::Candle(slices) => slices[slice].0.clone(),
        }
    }

    /// Slice `slice` of `x` (as quantized activations and as a tensor):
    /// `[n, slice rows]`.
    fn compute(&self, slice: usize, inputs: &Inputs<'_>, n: usize) -> Result<Vec<f32>> {
        match &self.kernel {
            Kernel::Tessera { weights, slices } => {
                let range = slices[slice].clone();
                let activations = inputs.activations.as_ref().ok_or_else(missing_input)?;
                let mut out = vec![0f32; n * range.len()];
                let stride = range.len();
                weights
                    .matmul(Path::detect(), range, activations, &mut out, stride)
                    .map_err(kernel_error)?;
                Ok(out)
            }
            Kernel::Half { weights, slices } => {
                let range = slices[slice].clone();
                let mut out = vec![0f32; n * range.len()];
                let stride = range.len();
                weights
                    .matmul(Path::detect(), range, inputs.x, n, &mut out, stride)
                    .map_err(kernel_error)?;
                Ok(out)
            }
            Kernel::Candle(slices) => {
                let input = inputs.tensor.as_ref().ok_or_else(missing_input)?;
                Ok(slices[slice].1.forward(input)?.flatten_all()?.to_vec1::<f32>()?)
            }
        }
    }

    /// Row `row` of the part's weights as f32 (an embedding lookup).
    fn row(&self, row: usize, cols: usize) -> Result<Vec<f32>> {
        match &self.kernel {
            Kernel::Tessera { weights, .. } => Ok(weights.dequantize_row(row)),
            Kernel::Half { weights, .. } => Ok(weights.dequantize_row(row)),
            Kernel::Candle(slices) => {
                let (range, slice) = slices
                    .iter()
                    .find(|(range, _)| range.contains(&row))
                    .ok_or_else(|| ModelError::InvalidConfig(format!("row {row} is past the matrix")))?;
                let local = row - range.start;
                match slice {
                    QMatMul::QTensor(q) => dequantize_row(q.dtype(), &q.data()?, range.len(), local, cols),
                    QMatMul::Tensor(t) | QMatMul::TensorF16(t) => Ok(t
                        .narrow(0, local, 1)?
                        .to_dtype(candle_core::DType::F32)?
                        .flatten_all()?
                        .to_vec1::<f32>()?),
                }
            }
        }
    }
}

/// What a product's parts read: the activations as given (half-precision
/// weights), quantized once (own kernels) and as a tensor (candle's), the
/// last two only when a part needs them.
struct Inputs<'x> {
    x: &'x [f32],
    activations: Option<Q8Activations>,
    tensor: Option<Tensor>,
}

fn kernel_error(e: KernelError) -> ModelError {
    ModelError::InvalidConfig(format!("quantized matmul: {e}"))
}

fn missing_input() -> ModelError {
    ModelError::InvalidConfig("quantized matmul: an input was not prepared".into())
}

/// Row `row` of a `[rows, cols]` matrix of GGML blocks of `dtype`,
/// dequantized by candle (exactly what dequantizing the whole matrix gives).
pub(crate) fn dequantize_row(dtype: GgmlDType, bytes: &[u8], rows: usize, row: usize, cols: usize) -> Result<Vec<f32>> {
    let row_bytes = bytes.len() / rows.max(1);
    if row >= rows || row_bytes * rows != bytes.len() {
        return Err(ModelError::InvalidConfig(format!(
            "row {row} of a {rows}-row matrix of {} bytes",
            bytes.len()
        )));
    }
    let data = bytes[row * row_bytes..(row + 1) * row_bytes].to_vec();
    let tensor = QTensor::new(QStorage::from_data(data.into(), &Device::Cpu, dtype)?, (1, cols))?;
    Ok(tensor.dequantize(&Device::Cpu)?.flatten_all()?.to_vec1::<f32>()?)
}

impl ParallelMatMul {
    /// Split `matrix` into one slice per worker thread.
    pub fn new(matrix: Matrix) -> Result<Self> {
        Self::stacked(vec![matrix])
    }

    /// Matrices of equal `in` stacked along `out`, in order: adjacent ones of
    /// one type fused, the rest separate parts of one product.
    pub fn stacked(matrices: Vec<Matrix>) -> Result<Self> {
        let cols = match matrices.first() {
            Some(first) => first.dims()?.1,
            None => return Err(ModelError::InvalidConfig("no matrix to multiply by".into())),
        };
        let mut groups: Vec<Vec<Matrix>> = Vec::new();
        for matrix in matrices {
            let (_, c) = matrix.dims()?;
            if c != cols {
                return Err(ModelError::InvalidConfig(format!(
                    "cannot stack matrices of widths {cols} and {c}"
                )));
            }
            match groups.last_mut() {
                Some(group) if storage_type(&group[0]) == storage_type(&matrix) => group.push(matrix),
                _ => groups.push(vec![matrix]),
            }
        }
        let mut parts = Vec::with_capacity(groups.len());
        let mut rows = 0;
        for group in groups {
            let part = Part::new(rows, Matrix::concat_rows(group)?)?;
            rows += part.rows;
            parts.push(part);
        }
        Ok(Self { parts, rows, cols })
    }

    /// Output width.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Separate products this matrix runs (1 unless it stacks several types).
    pub fn part_count(&self) -> usize {
        self.parts.len()
    }

    /// The storage types of the parts that run on candle's generic kernels
    /// (slower than Tessera's own; a load reports them).
    pub fn generic_types(&self) -> Vec<String> {
        self.parts.iter().filter_map(Part::generic_type).collect()
    }

    /// Row `row` of the weights as f32, as candle dequantizes it (tied
    /// embeddings read the LM head's rows).
    pub fn row(&self, row: usize) -> Result<Vec<f32>> {
        let part = self
            .parts
            .iter()
            .find(|part| (part.offset..part.offset + part.rows).contains(&row))
            .ok_or_else(|| ModelError::InvalidConfig(format!("row {row} is past a {}-row matrix", self.rows)))?;
        part.row(row - part.offset, self.cols)
    }

    /// The activations' quantizations that the own-kernel parts read (none
    /// when every part is half precision or candle's).
    fn quantization(&self) -> Quantization {
        self.parts
            .iter()
            .filter_map(|part| match &part.kernel {
                Kernel::Tessera { weights, .. } => Some(weights.quantization()),
                _ => None,
            })
            .fold(Quantization::default(), Quantization::union)
    }

    /// `x` is `[n, cols]`; returns `[n, rows]`.
    pub fn forward(&self, x: &[f32], n: usize) -> Result<Vec<f32>> {
        let mut y = Vec::new();
        self.forward_into(x, n, &mut y)?;
        Ok(y)
    }

    /// [`forward`](Self::forward) into `y`, resized to `[n, rows]`: every
    /// value is written, so a buffer reused across layers shows nothing stale
    /// (and a prefill's products do not each map and fault in fresh pages).
    pub fn forward_into(&self, x: &[f32], n: usize, y: &mut Vec<f32>) -> Result<()> {
        y.resize(n * self.rows, 0.0);
        if n >= TOKEN_SPLIT_MIN && self.parts.iter().all(Part::is_own) {
            return self.forward_by_tokens(x, n, y);
        }
        let quantization = self.quantization();
        let own = quantization != Quantization::default();
        let candle = self.parts.iter().any(|p| matches!(p.kernel, Kernel::Candle(_)));
        let inputs = Inputs {
            x,
            activations: own
                .then(|| Q8Activations::quantize_for(x, n, self.cols, quantization))
                .transpose()
                .map_err(kernel_error)?,
            tensor: candle
                .then(|| Tensor::from_slice(x, (n, self.cols), &Device::Cpu))
                .transpose()?,
        };
        let tasks: Vec<Task> = self
            .parts
            .iter()
            .flat_map(|part| (0..part.slice_count()).map(move |slice| Task { part, slice }))
            .collect();
        let outputs = parallel::map(&tasks, |task| task.part.compute(task.slice, &inputs, n));
        for (task, output) in tasks.iter().zip(outputs) {
            let output = output?;
            let range = task.part.slice_rows(task.slice);
            let first = task.part.offset + range.start;
            for (row, values) in output.chunks_exact(range.len()).enumerate() {
                y[row * self.rows + first..][..range.len()].copy_from_slice(values);
            }
        }
        Ok(())
    }

    /// [`forward`](Self::forward) split by activation rows (prefill): each
    /// task quantizes its own rows once and runs every part's whole product
    /// straight into its rows of the output (no per-slice buffers to gather,
    /// no serial quantization). The same kernels and arithmetic per output as
    /// the split by weight rows, so the same bits.
    fn forward_by_tokens(&self, x: &[f32], n: usize, y: &mut [f32]) -> Result<()> {
        let threads = parallel::num_threads();
        let chunk_rows = n.div_ceil(2 * threads).next_multiple_of(8);
        let failure = std::sync::Mutex::new(None);
        parallel::for_each_chunk_mut(y, chunk_rows * self.rows, |index, out| {
            let first = index * chunk_rows;
            let rows = out.len() / self.rows;
            let x = &x[first * self.cols..(first + rows) * self.cols];
            if let Err(e) = self.forward_rows(x, rows, out) {
                *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            }
        });
        match failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Every part's product for the `n` rows of `x` into `out` (`[n, rows]`), on this thread.
    fn forward_rows(&self, x: &[f32], n: usize, out: &mut [f32]) -> Result<()> {
        let mut activations = None;
        for part in &self.parts {
            let out = &mut out[part.offset..];
            match &part.kernel {
                Kernel::Tessera { weights, .. } => {
                    if activations.is_none() {
                        let quantized = Q8Activations::quantize_for(x, n, self.cols, self.quantization());
                        activations = Some(quantized.map_err(kernel_error)?);
                    }
                    let activations = activations.as_ref().ok_or_else(missing_input)?;
                    weights
                        .matmul(Path::detect(), 0..part.rows, activations, out, self.rows)
                        .map_err(kernel_error)?;
                }
                Kernel::Half { weights, .. } => weights
                    .matmul(Path::detect(), 0..part.rows, x, n, out, self.rows)
                    .map_err(kernel_error)?,
                Kernel::Candle(_) => return Err(missing_input()),
            }
        }
        Ok(())
    }
}

/// Activation rows from which a product splits by activation rows rather
/// than by weight rows: enough rows per task that each pass over the
/// weights feeds full register tiles.
const TOKEN_SPLIT_MIN: usize = 128;

#[cfg(test)]
mod tests;
