//! The building blocks of a Llama block, on flat `[rows, width]` f32 buffers:
//! linear layers (quantized or dense weights through candle's matmul), RMSNorm
//! and the SwiGLU activation.

use crate::Result;
use candle_core::quantized::QMatMul;
use candle_core::{Device, Tensor};

/// `y = x Wᵀ (+ b)`, weights quantized (GGUF) or dense (safetensors).
#[derive(Debug)]
pub struct Linear {
    weight: QMatMul,
    bias: Option<Vec<f32>>,
    in_features: usize,
    out_features: usize,
}

impl Linear {
    /// A linear layer over `weight` (`[out, in]`), with an optional bias of length `out`.
    pub fn new(weight: QMatMul, bias: Option<Vec<f32>>, out_features: usize, in_features: usize) -> Self {
        Self {
            weight,
            bias,
            in_features,
            out_features,
        }
    }

    /// Output width.
    pub fn out_features(&self) -> usize {
        self.out_features
    }

    /// Apply to `rows` rows of `x` (`[rows, in]`), returning `[rows, out]`.
    pub fn forward(&self, x: &[f32], rows: usize) -> Result<Vec<f32>> {
        use candle_core::Module;
        let input = Tensor::from_slice(x, (rows, self.in_features), &Device::Cpu)?;
        let output = self.weight.forward(&input)?;
        let mut y = output.flatten_all()?.to_vec1::<f32>()?;
        if let Some(bias) = &self.bias {
            for row in y.chunks_exact_mut(self.out_features) {
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

/// `gate ← silu(gate) · up`, elementwise.
pub fn swiglu_in_place(gate: &mut [f32], up: &[f32]) {
    for (g, u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}

/// `x += y`, elementwise.
pub fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
