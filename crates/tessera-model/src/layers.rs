//! The building blocks of a Llama block, on flat `[rows, width]` f32 buffers:
//! linear layers (quantized or dense weights through candle's matmul), RMSNorm
//! and the SwiGLU activation.

use crate::matrix::{Matrix, ParallelMatMul};
use crate::Result;

/// `y = x Wᵀ (+ b)`, weights quantized (GGUF) or dense (safetensors), computed
/// as parallel row slices.
#[derive(Debug)]
pub struct Linear {
    weight: ParallelMatMul,
    bias: Option<Vec<f32>>,
}

impl Linear {
    /// A linear layer over `weight` (`[out, in]`), with an optional bias of length `out`.
    pub fn new(weight: Matrix, bias: Option<Vec<f32>>) -> Result<Self> {
        let weight = ParallelMatMul::new(weight)?;
        if let Some(bias) = &bias {
            if bias.len() != weight.rows() {
                return Err(crate::ModelError::InvalidConfig(format!(
                    "bias of length {} for a layer of width {}",
                    bias.len(),
                    weight.rows()
                )));
            }
        }
        Ok(Self { weight, bias })
    }

    /// Output width.
    pub fn out_features(&self) -> usize {
        self.weight.rows()
    }

    /// Apply to `rows` rows of `x` (`[rows, in]`), returning `[rows, out]`.
    pub fn forward(&self, x: &[f32], rows: usize) -> Result<Vec<f32>> {
        let mut y = self.weight.forward(x, rows)?;
        if let Some(bias) = &self.bias {
            for row in y.chunks_exact_mut(bias.len()) {
                for (value, b) in row.iter_mut().zip(bias) {
                    *value += b;
                }
            }
        }
        Ok(y)
    }
}

/// Root-mean-square layer norm (Zhang & Sennrich 2019).
#[derive(Debug, Clone)]
pub struct RmsNorm {
    weight: Vec<f32>,
    eps: f32,
}

impl RmsNorm {
    /// A norm with per-channel `weight`.
    pub fn new(weight: Vec<f32>, eps: f32) -> Self {
        Self { weight, eps }
    }

    /// Normalize each row of `x` into a new buffer.
    pub fn forward(&self, x: &[f32]) -> Vec<f32> {
        let width = self.weight.len();
        let mut y = vec![0f32; x.len()];
        for (src, dst) in x.chunks_exact(width).zip(y.chunks_exact_mut(width)) {
            let rms = (src.iter().map(|v| v * v).sum::<f32>() / width as f32 + self.eps).sqrt();
            for ((d, s), w) in dst.iter_mut().zip(src).zip(&self.weight) {
                *d = s / rms * w;
            }
        }
        y
    }
}

/// SwiGLU over a fused `[rows, 2 × width]` buffer holding `gate | up` per row:
/// returns `silu(gate) · up`, `[rows, width]`.
pub fn swiglu_fused(gate_up: &[f32], width: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(gate_up.len() / 2);
    for row in gate_up.chunks_exact(2 * width) {
        let (gate, up) = row.split_at(width);
        out.extend(gate.iter().zip(up).map(|(g, u)| g / (1.0 + (-g).exp()) * u));
    }
    out
}

/// `x += y`, elementwise.
pub fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
