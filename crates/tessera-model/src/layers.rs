//! The building blocks of a Llama block, on flat `[rows, width]` f32 buffers:
//! the token embedding, linear layers (quantized or dense weights), RMSNorm
//! and the SwiGLU activation.

use crate::error::{ModelError, Result};
use crate::matrix::{dequantize_row, Matrix, ParallelMatMul};
use std::sync::Arc;

/// `y = x Wᵀ (+ b)`, weights quantized (GGUF) or dense (safetensors), computed
/// as parallel row slices.
#[derive(Debug)]
pub struct Linear {
    weight: Arc<ParallelMatMul>,
    bias: Option<Vec<f32>>,
}

impl Linear {
    /// A linear layer over `weight` (`[out, in]`), with an optional bias of length `out`.
    pub fn new(weight: Matrix, bias: Option<Vec<f32>>) -> Result<Self> {
        Self::stacked(vec![weight], bias)
    }

    /// A linear layer over matrices stacked along `out` (q/k/v, gate/up; see
    /// [`ParallelMatMul::stacked`]), with an optional bias over all of `out`.
    pub fn stacked(weights: Vec<Matrix>, bias: Option<Vec<f32>>) -> Result<Self> {
        let weight = Arc::new(ParallelMatMul::stacked(weights)?);
        if let Some(bias) = &bias {
            if bias.len() != weight.rows() {
                return Err(crate::error::ModelError::InvalidConfig(format!(
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

    /// The storage types of the parts on candle's generic kernels.
    pub fn generic_types(&self) -> Vec<String> {
        self.weight.generic_types()
    }

    /// Separate products one forward runs (more than 1 where stacked
    /// matrices have different types).
    pub fn part_count(&self) -> usize {
        self.weight.part_count()
    }

    /// Apply to `rows` rows of `x` (`[rows, in]`), returning `[rows, out]`.
    pub fn forward(&self, x: &[f32], rows: usize) -> Result<Vec<f32>> {
        let mut y = Vec::new();
        self.forward_into(x, rows, &mut y)?;
        Ok(y)
    }

    /// [`forward`](Self::forward) into `y` (a buffer reused across layers; see `Matrix::forward_into`).
    pub fn forward_into(&self, x: &[f32], rows: usize, y: &mut Vec<f32>) -> Result<()> {
        self.weight.forward_into(x, rows, y)?;
        if let Some(bias) = &self.bias {
            for row in y.chunks_exact_mut(bias.len()) {
                for (value, b) in row.iter_mut().zip(bias) {
                    *value += b;
                }
            }
        }
        Ok(())
    }
}

/// The token embedding, `[vocab, hidden]`: rows are dequantized when looked
/// up, never held as f32 (Qwen2.5's 151,936 × 1,536 table would be 933 MB).
#[derive(Debug)]
pub enum Embedding {
    /// The table as stored in the file (GGML blocks, or f32 from a dense source).
    Stored(Matrix),
    /// The LM head's own weights (tied embeddings): one copy for both.
    Tied(Arc<ParallelMatMul>),
}

impl Embedding {
    /// The embedding of a model whose LM head is `lm_head` (tied: no table of its own).
    pub fn tied(lm_head: &Linear) -> Self {
        Embedding::Tied(Arc::clone(&lm_head.weight))
    }

    /// `(vocab, hidden)`.
    pub fn dims(&self) -> Result<(usize, usize)> {
        match self {
            Embedding::Stored(matrix) => matrix.dims(),
            Embedding::Tied(weight) => Ok((weight.rows(), weight.cols())),
        }
    }

    /// Append the embeddings of `tokens` to `out` (`tokens.len() × hidden` values).
    pub fn lookup(&self, tokens: &[u32], out: &mut Vec<f32>) -> Result<()> {
        let (vocab, hidden) = self.dims()?;
        out.reserve(tokens.len() * hidden);
        for &token in tokens {
            let token = token as usize;
            if token >= vocab {
                return Err(ModelError::InvalidConfig(format!(
                    "token id {token} is outside the vocabulary of {vocab}"
                )));
            }
            match self {
                Embedding::Stored(Matrix::Quantized(q)) => {
                    out.extend(dequantize_row(q.dtype(), &q.data()?, vocab, token, hidden)?)
                }
                Embedding::Stored(Matrix::Ggml(g)) => {
                    out.extend(dequantize_row(g.dtype, &g.bytes, vocab, token, hidden)?)
                }
                Embedding::Stored(Matrix::Dense(t)) => out.extend(t.get(token)?.to_vec1::<f32>()?),
                Embedding::Tied(weight) => out.extend(weight.row(token)?),
            }
        }
        Ok(())
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
/// `silu(gate) · up` into `out`, resized to `[rows, width]` (every value
/// written), rows in parallel (a prefill's 512 × 8,960 `exp`s were a tenth of
/// its time on one thread).
pub fn swiglu_fused(gate_up: &[f32], width: usize, out: &mut Vec<f32>) {
    out.resize(gate_up.len() / 2, 0.0);
    crate::parallel::for_each_chunk_mut(out, width, |row, dst| {
        let (gate, up) = gate_up[row * 2 * width..(row + 1) * 2 * width].split_at(width);
        // `exp(−g)` 64 at a time on the vector `exp` (glibc's bits, as `f32::exp` gives them).
        let (mut minus, mut exps) = ([0f32; 64], [0f32; 64]);
        for ((dst, gate), up) in dst.chunks_mut(64).zip(gate.chunks(64)).zip(up.chunks(64)) {
            let n = gate.len();
            for (m, g) in minus.iter_mut().zip(gate) {
                *m = -g;
            }
            crate::attention::exp_shifted(&minus[..n], 0.0, &mut exps[..n]);
            for (((d, g), u), e) in dst.iter_mut().zip(gate).zip(up).zip(&exps) {
                *d = g / (1.0 + e) * u;
            }
        }
    });
}

/// `x += y`, elementwise.
pub fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

#[cfg(test)]
mod tests {
    use super::swiglu_fused;

    /// The vector `exp` gives what `f32::exp` gives, so SwiGLU equals its
    /// scalar definition bit for bit, overflowing and vanishing `exp`s included.
    #[test]
    fn swiglu_equals_its_scalar_definition_bit_for_bit() {
        let width = 200;
        let rows = 3;
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 240.0
        };
        let mut gate_up: Vec<f32> = (0..rows * 2 * width).map(|_| next()).collect();
        gate_up[..6].copy_from_slice(&[0.0, -0.0, 88.9, -104.5, 1e-30, -3.0]);
        let mut got = vec![f32::NAN; rows * width + 5];
        swiglu_fused(&gate_up, width, &mut got);
        for (row, values) in gate_up.chunks_exact(2 * width).enumerate() {
            let (gate, up) = values.split_at(width);
            for (i, (g, u)) in gate.iter().zip(up).enumerate() {
                let want = g / (1.0 + (-g).exp()) * u;
                let have = got[row * width + i];
                assert_eq!(have.to_bits(), want.to_bits(), "row {row}, value {i}: gate {g}");
            }
        }
    }
}
