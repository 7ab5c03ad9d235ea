//! Half-precision weight matrices (GGUF `F16` and `BF16` tensors), kept at
//! their two bytes per weight and multiplied by f32 activations as they are
//! (no activation quantization: these files are chosen for accuracy).
//!
//! The definition every path follows: per output, eight f32 lanes, lane `i`
//! taking `fma(w_k, x_k, lane)` for `k ≡ i (mod 8)` in order (the weight
//! widened exactly), then the lanes summed as `((l0+l4)+(l2+l6)) +
//! ((l1+l5)+(l3+l7))`, which is what an AVX2 register's horizontal sum does.
//! `cols` must be a multiple of 8.

use crate::{KernelError, Path};
use half::{bf16, f16};
use std::ops::Range;

/// Which half-precision format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfKind {
    /// IEEE binary16.
    F16,
    /// bfloat16 (the top half of an f32).
    Bf16,
}

/// Lanes of the per-output accumulator.
const LANES: usize = 8;

/// A `[rows, cols]` F16 or BF16 matrix, rows as stored.
#[derive(Debug, Clone)]
pub struct HalfWeights {
    kind: HalfKind,
    rows: usize,
    cols: usize,
    data: Vec<u16>,
}

impl HalfWeights {
    /// Take GGML F16/BF16 bytes of a `[rows, cols]` matrix (`cols` a multiple of 8).
    pub fn from_ggml(kind: HalfKind, bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        if !cols.is_multiple_of(LANES) {
            return Err(KernelError::Cols { cols, block: LANES });
        }
        if bytes.len() != rows * cols * 2 {
            return Err(KernelError::Size {
                what: "half-precision weights",
                expected: rows * cols * 2,
                got: bytes.len(),
            });
        }
        let data = bytes
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        Ok(Self { kind, rows, cols, data })
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes held (for bandwidth figures).
    pub fn bytes(&self) -> usize {
        self.data.len() * 2
    }

    /// Which format.
    pub fn kind(&self) -> HalfKind {
        self.kind
    }

    /// Row `row` widened to f32 (exact).
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        self.row_bits(row).iter().map(|&v| widen(self.kind, v)).collect()
    }

    fn row_bits(&self, row: usize) -> &[u16] {
        &self.data[row * self.cols..(row + 1) * self.cols]
    }

    /// `y = x Wᵀ` for weight rows `rows`: `x` is `[n, cols]` f32, and
    /// `out[j·stride + (r − rows.start)]` receives row `j`'s output `r`.
    pub fn matmul(
        &self,
        path: Path,
        rows: Range<usize>,
        x: &[f32],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) -> Result<(), KernelError> {
        if x.len() != n * self.cols {
            return Err(KernelError::Size {
                what: "activations",
                expected: n * self.cols,
                got: x.len(),
            });
        }
        let needed = if n == 0 { 0 } else { (n - 1) * stride + rows.len() };
        if rows.start > rows.end || rows.end > self.rows || stride < rows.len() || out.len() < needed {
            return Err(KernelError::Size {
                what: "output or weight row range",
                expected: needed,
                got: out.len(),
            });
        }
        for j in 0..n {
            let xj = &x[j * self.cols..(j + 1) * self.cols];
            for (i, r) in rows.clone().enumerate() {
                out[j * stride + i] = self.dot(path, r, xj);
            }
        }
        Ok(())
    }

    /// One output: row `row` against `x` (`cols` values).
    fn dot(&self, path: Path, row: usize, x: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if path.has_avx2() && path.available() {
            // SAFETY: the CPU has AVX2, FMA and F16C (checked); the row and `x`
            // both hold `cols` values, a multiple of 8.
            return unsafe { avx2::dot(self.kind, self.row_bits(row), x) };
        }
        let _ = path;
        dot_portable(self.kind, self.row_bits(row), x)
    }
}

/// A half-precision value widened to f32 (exact).
fn widen(kind: HalfKind, bits: u16) -> f32 {
    match kind {
        HalfKind::F16 => f16::from_bits(bits).to_f32(),
        HalfKind::Bf16 => bf16::from_bits(bits).to_f32(),
    }
}

/// The definition (module docs).
fn dot_portable(kind: HalfKind, w: &[u16], x: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    for (wk, xk) in w.chunks_exact(LANES).zip(x.chunks_exact(LANES)) {
        for lane in 0..LANES {
            acc[lane] = widen(kind, wk[lane]).mul_add(xk[lane], acc[lane]);
        }
    }
    crate::portable::reduce_lanes(acc)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::HalfKind;
    use std::arch::x86_64::*;

    /// See `dot_portable`.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `w.len()` is a multiple of 8 and
    /// `x.len() >= w.len()` (eight of each are loaded per step up to
    /// `w.len()`, unchecked).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot(kind: HalfKind, w: &[u16], x: &[f32]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for k in (0..w.len()).step_by(8) {
            // SAFETY: `k + 8 <= w.len() <= x.len()` (the caller's contract: a multiple of 8).
            let (bits, xs) = unsafe {
                (
                    _mm_loadu_si128(w.as_ptr().add(k).cast()),
                    _mm256_loadu_ps(x.as_ptr().add(k)),
                )
            };
            let wide = match kind {
                HalfKind::F16 => _mm256_cvtph_ps(bits),
                HalfKind::Bf16 => _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16)),
            };
            acc = _mm256_fmadd_ps(wide, xs, acc);
        }
        let halves = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        let pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
        _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 0b01)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(len: usize, seed: u64) -> Vec<f32> {
        let mut state = seed | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    #[test]
    fn paths_agree_bit_for_bit_and_match_an_f64_reference() {
        for kind in [HalfKind::F16, HalfKind::Bf16] {
            let (rows, n, cols) = (13, 3, 72);
            let values = random(rows * cols, 7);
            let bytes: Vec<u8> = values
                .iter()
                .flat_map(|&v| match kind {
                    HalfKind::F16 => f16::from_f32(v).to_le_bytes(),
                    HalfKind::Bf16 => bf16::from_f32(v).to_le_bytes(),
                })
                .collect();
            let w = HalfWeights::from_ggml(kind, &bytes, rows, cols).unwrap();
            let x = random(n * cols, 9);
            let mut portable = vec![0f32; n * rows];
            w.matmul(Path::Portable, 0..rows, &x, n, &mut portable, rows).unwrap();
            for path in Path::SIMD.into_iter().filter(|p| p.available()) {
                let mut fast = vec![0f32; n * rows];
                w.matmul(path, 0..rows, &x, n, &mut fast, rows).unwrap();
                assert!(
                    fast.iter().zip(&portable).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{kind:?} {path:?}"
                );
            }
            for j in 0..n {
                for r in 0..rows {
                    let row = w.dequantize_row(r);
                    let exact: f64 = row
                        .iter()
                        .zip(&x[j * cols..][..cols])
                        .map(|(&a, &b)| a as f64 * b as f64)
                        .sum();
                    assert!(
                        (portable[j * rows + r] as f64 - exact).abs() < 1e-4,
                        "{kind:?} ({j}, {r})"
                    );
                }
            }
        }
        assert!(
            HalfWeights::from_ggml(HalfKind::F16, &[0; 12], 1, 6).is_err(),
            "cols a multiple of 8"
        );
        assert!(
            HalfWeights::from_ggml(HalfKind::F16, &[0; 14], 1, 8).is_err(),
            "sizes checked"
        );
    }
}
