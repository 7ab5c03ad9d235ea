//! Which code path runs, checked once; the shape checks every path relies on.

use crate::q4::GROUP;
use crate::{
    portable, KernelError, Q2KWeights, Q3KWeights, Q4KWeights, Q4_0Weights, Q4_1Weights, Q5KWeights, Q5_0Weights,
    Q5_1Weights, Q6KWeights, Q8Activations, Q8_0Weights, Quantization,
};
use std::ops::Range;
use std::sync::OnceLock;

/// A kernel implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// AVX-512 F/BW/VNNI on top of AVX2 (x86-64): Q4_K, Q5_K and Q6_K
    /// products run VNNI tiles, the other formats the AVX2 kernels; the
    /// model's attention and vector builds use AVX-512.
    Avx512Vnni,
    /// AVX2, FMA and F16C (x86-64).
    Avx2,
    /// Plain Rust, any CPU.
    Portable,
}

impl Path {
    /// The SIMD paths, widest first.
    pub const SIMD: [Path; 2] = [Path::Avx512Vnni, Path::Avx2];

    /// The best path this CPU runs, unless `TESSERA_KERNELS` names a lesser
    /// one (`portable` or `avx2`). Detected once.
    pub fn detect() -> Path {
        static DETECTED: OnceLock<Path> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            let forced = std::env::var("TESSERA_KERNELS").unwrap_or_default();
            let allowed: &[Path] = match forced.as_str() {
                "portable" => &[],
                "avx2" => &[Path::Avx2],
                _ => &Path::SIMD,
            };
            allowed
                .iter()
                .copied()
                .find(|path| path.available())
                .unwrap_or(Path::Portable)
        })
    }

    /// Whether the path includes AVX2, FMA and F16C (every SIMD path does).
    pub fn has_avx2(self) -> bool {
        Path::SIMD.contains(&self)
    }

    /// Whether this CPU can run the path.
    pub fn available(self) -> bool {
        match self {
            Path::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => {
                is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Path::Avx512Vnni => {
                Path::Avx2.available()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Path::Avx2 | Path::Avx512Vnni => false,
        }
    }
}

/// The GGML block formats Tessera computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// 8-bit, one scale per 32 values.
    Q8_0,
    /// 4-bit, one scale per 32 values (`d·(q − 8)`).
    Q4_0,
    /// 4-bit, a scale and a minimum per 32 values.
    Q4_1,
    /// 5-bit, one scale per 32 values (`d·(q − 16)`).
    Q5_0,
    /// 5-bit, a scale and a minimum per 32 values.
    Q5_1,
    /// 2-bit K-quant (256-value super-blocks).
    Q2K,
    /// 3-bit K-quant (256-value super-blocks).
    Q3K,
    /// 4-bit K-quant (256-value super-blocks).
    Q4K,
    /// 5-bit K-quant (256-value super-blocks).
    Q5K,
    /// 6-bit K-quant (256-value super-blocks).
    Q6K,
}

/// A repacked weight matrix of any [`Format`], as one type for callers that
/// hold matrices of several formats.
#[derive(Debug, Clone)]
pub enum Weights {
    /// See [`Q8_0Weights`].
    Q8_0(Q8_0Weights),
    /// See [`Q4_0Weights`].
    Q4_0(Q4_0Weights),
    /// See [`Q4_1Weights`].
    Q4_1(Q4_1Weights),
    /// See [`Q5_0Weights`].
    Q5_0(Q5_0Weights),
    /// See [`Q5_1Weights`].
    Q5_1(Q5_1Weights),
    /// See [`Q2KWeights`].
    Q2K(Q2KWeights),
    /// See [`Q3KWeights`].
    Q3K(Q3KWeights),
    /// See [`Q4KWeights`].
    Q4K(Q4KWeights),
    /// See [`Q5KWeights`].
    Q5K(Q5KWeights),
    /// See [`Q6KWeights`].
    Q6K(Q6KWeights),
}

impl Weights {
    /// Repack GGML bytes of a `[rows, cols]` matrix of `format`.
    pub fn from_ggml(format: Format, bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        Ok(match format {
            Format::Q8_0 => Weights::Q8_0(Q8_0Weights::from_ggml(bytes, rows, cols)?),
            Format::Q4_0 => Weights::Q4_0(Q4_0Weights::from_ggml(bytes, rows, cols)?),
            Format::Q4_1 => Weights::Q4_1(Q4_1Weights::from_ggml(bytes, rows, cols)?),
            Format::Q5_0 => Weights::Q5_0(Q5_0Weights::from_ggml(bytes, rows, cols)?),
            Format::Q5_1 => Weights::Q5_1(Q5_1Weights::from_ggml(bytes, rows, cols)?),
            Format::Q2K => Weights::Q2K(Q2KWeights::from_ggml(bytes, rows, cols)?),
            Format::Q3K => Weights::Q3K(Q3KWeights::from_ggml(bytes, rows, cols)?),
            Format::Q4K => Weights::Q4K(Q4KWeights::from_ggml(bytes, rows, cols)?),
            Format::Q5K => Weights::Q5K(Q5KWeights::from_ggml(bytes, rows, cols)?),
            Format::Q6K => Weights::Q6K(Q6KWeights::from_ggml(bytes, rows, cols)?),
        })
    }

    /// Bytes held (for bandwidth figures).
    pub fn bytes(&self) -> usize {
        match self {
            Weights::Q8_0(w) => w.bytes(),
            Weights::Q4_0(w) => w.bytes(),
            Weights::Q4_1(w) => w.bytes(),
            Weights::Q5_0(w) => w.bytes(),
            Weights::Q5_1(w) => w.bytes(),
            Weights::Q2K(w) => w.bytes(),
            Weights::Q3K(w) => w.bytes(),
            Weights::Q4K(w) => w.bytes(),
            Weights::Q5K(w) => w.bytes(),
            Weights::Q6K(w) => w.bytes(),
        }
    }

    /// Row `row` dequantized (tests and references).
    pub fn dequantize_row(&self, row: usize) -> Vec<f32> {
        match self {
            Weights::Q8_0(w) => w.dequantize_row(row),
            Weights::Q4_0(w) => w.dequantize_row(row),
            Weights::Q4_1(w) => w.dequantize_row(row),
            Weights::Q5_0(w) => w.dequantize_row(row),
            Weights::Q5_1(w) => w.dequantize_row(row),
            Weights::Q2K(w) => w.dequantize_row(row),
            Weights::Q3K(w) => w.dequantize_row(row),
            Weights::Q4K(w) => w.dequantize_row(row),
            Weights::Q5K(w) => w.dequantize_row(row),
            Weights::Q6K(w) => w.dequantize_row(row),
        }
    }

    /// Which quantization of the activations [`matmul`](Self::matmul)
    /// reads: super-blocks of 256 for Q4_K, Q5_K and Q6_K (their sub-block
    /// scales applied in integers), blocks of 32 for the rest.
    pub fn quantization(&self) -> Quantization {
        match self {
            Weights::Q4K(_) | Weights::Q5K(_) | Weights::Q6K(_) => Quantization::SUPER_BLOCKS,
            _ => Quantization::BLOCKS,
        }
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        match self {
            Weights::Q8_0(w) => w.rows(),
            Weights::Q4_0(w) => w.rows(),
            Weights::Q4_1(w) => w.rows(),
            Weights::Q5_0(w) => w.rows(),
            Weights::Q5_1(w) => w.rows(),
            Weights::Q2K(w) => w.rows(),
            Weights::Q3K(w) => w.rows(),
            Weights::Q4K(w) => w.rows(),
            Weights::Q5K(w) => w.rows(),
            Weights::Q6K(w) => w.rows(),
        }
    }

    /// Blocks of 32 per row.
    pub fn blocks(&self) -> usize {
        match self {
            Weights::Q8_0(w) => w.blocks(),
            Weights::Q4_0(w) => w.blocks(),
            Weights::Q4_1(w) => w.blocks(),
            Weights::Q5_0(w) => w.blocks(),
            Weights::Q5_1(w) => w.blocks(),
            Weights::Q2K(w) => w.blocks(),
            Weights::Q3K(w) => w.blocks(),
            Weights::Q4K(w) => w.blocks(),
            Weights::Q5K(w) => w.blocks(),
            Weights::Q6K(w) => w.blocks(),
        }
    }

    /// `y = x Wᵀ` for weight rows `rows`: `out[j·stride + (r − rows.start)]`
    /// for each activation row `j` and weight row `r` (a worker computes its
    /// row range straight into the shared output). Every format but Q8_0
    /// computes rows in groups of 8, so its ranges start on a multiple of 8.
    /// A path the CPU lacks runs the portable code (same results).
    pub fn matmul(
        &self,
        path: Path,
        rows: Range<usize>,
        x: &Q8Activations,
        out: &mut [f32],
        stride: usize,
    ) -> Result<(), KernelError> {
        check((self.rows(), self.blocks()), &rows, x, out.len(), stride)?;
        check_quantization(self.quantization(), x)?;
        if !matches!(self, Weights::Q8_0(_)) && !rows.start.is_multiple_of(GROUP) {
            return Err(KernelError::Size {
                what: "row range start (a multiple of 8)",
                expected: rows.start.next_multiple_of(GROUP),
                got: rows.start,
            });
        }
        if rows.is_empty() || x.rows() == 0 {
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        if path == Path::Avx512Vnni && path.available() {
            match self {
                Weights::Q4K(w) | Weights::Q5K(Q5KWeights(w)) if x.rows() >= VNNI_MIN_ROWS => {
                    // SAFETY: the CPU has AVX-512 F/BW/VNNI, AVX2, FMA and F16C
                    // (`available`), and `check`, `check_quantization` and the
                    // group test above hold.
                    unsafe { crate::x86_q4_k_vnni::matmul_q4_k(w, rows, x, out, stride) };
                    return Ok(());
                }
                Weights::Q4K(w) | Weights::Q5K(Q5KWeights(w)) if x.rows() == 1 => {
                    // SAFETY: as above.
                    unsafe { crate::x86_q4_k_decode::matmul_q4_k(w, rows, x, out) };
                    return Ok(());
                }
                Weights::Q6K(w) if x.rows() >= VNNI_MIN_ROWS => {
                    // SAFETY: as above.
                    unsafe { crate::x86_q6_k_vnni::matmul_q6_k(w, rows, x, out, stride) };
                    return Ok(());
                }
                Weights::Q6K(w) if x.rows() == 1 => {
                    // SAFETY: as above.
                    unsafe { crate::x86_q6_k_decode::matmul_q6_k(w, rows, x, out) };
                    return Ok(());
                }
                _ => {}
            }
        }
        #[cfg(target_arch = "x86_64")]
        if path.has_avx2() && path.available() {
            // SAFETY: the CPU has AVX2, FMA and F16C (`available`: both SIMD
            // paths need them), and `check`, `check_quantization` and the group
            // test above hold.
            unsafe {
                match self {
                    Weights::Q8_0(w) => crate::x86::matmul(w, rows, x, out, stride),
                    Weights::Q4_0(Q4_0Weights(w))
                    | Weights::Q4_1(Q4_1Weights(w))
                    | Weights::Q5_0(Q5_0Weights(w))
                    | Weights::Q5_1(Q5_1Weights(w)) => crate::x86_q4::matmul_q4(w, rows, x, out, stride),
                    Weights::Q2K(w) => crate::x86_q2_k::matmul_q2_k(w, rows, x, out, stride),
                    Weights::Q3K(w) => crate::x86_q3_k::matmul_q3_k(w, rows, x, out, stride),
                    Weights::Q4K(w) | Weights::Q5K(Q5KWeights(w)) => {
                        crate::x86_q4_k::matmul_q4_k(w, rows, x, out, stride)
                    }
                    Weights::Q6K(w) => crate::x86_q6_k::matmul_q6_k(w, rows, x, out, stride),
                }
            }
            return Ok(());
        }
        match self {
            Weights::Q8_0(w) => portable::matmul(w, rows, x, out, stride),
            Weights::Q4_0(Q4_0Weights(w))
            | Weights::Q4_1(Q4_1Weights(w))
            | Weights::Q5_0(Q5_0Weights(w))
            | Weights::Q5_1(Q5_1Weights(w)) => portable::matmul_q4(w, rows, x, out, stride),
            Weights::Q2K(w) => portable::matmul_q2_k(w, rows, x, out, stride),
            Weights::Q3K(w) => portable::matmul_q3_k(w, rows, x, out, stride),
            Weights::Q4K(w) | Weights::Q5K(Q5KWeights(w)) => portable::matmul_q4_k(w, rows, x, out, stride),
            Weights::Q6K(w) => portable::matmul_q6_k(w, rows, x, out, stride),
        }
        Ok(())
    }
}

/// Activation rows from which the K-quants run their AVX-512 VNNI pair
/// tiles (where the path is; one row runs the VNNI decode kernels of
/// `x86_q4_k_decode.rs` and `x86_q6_k_decode.rs`, 2–4 rows the AVX2
/// tiles). On the 1.5B's forward (2 threads, a Zen 4 EPYC, weights
/// streamed from memory), with both paths' tiles keeping one dot
/// accumulator live (session 25), the pair tiles against the AVX2 tiles: 5
/// rows 57.3 and 63.1 ms against 70.2 and 69.8, 6 rows 63.4 and 61.8 against 85.1 and
/// 90.8, 7 rows 72.2 and 77.9 against 96.0 and 94.3 (the AVX2 Q4_K tile
/// takes 4 rows, so 5 to 7 ran two passes); 4 rows are a wash (53.2 and
/// 54.0 against 54.2 and 57.1), 2 lose (42.6 against 36.4) and one loses
/// clearly (40.5 against 31.0): with few rows the step is bound by the
/// weights' stream, which the AVX2 tiles read as well.
pub const VNNI_MIN_ROWS: usize = 5;

/// The activations hold the quantization the weights read (the kernels
/// index its buffers through unchecked pointers).
fn check_quantization(needs: Quantization, x: &Q8Activations) -> Result<(), KernelError> {
    let held = x.quantization();
    for (needed, present, what) in [
        (needs.blocks, held.blocks, "activation rows quantized in blocks of 32"),
        (
            needs.super_blocks,
            held.super_blocks,
            "activation rows quantized in super-blocks of 256",
        ),
    ] {
        if needed && !present {
            return Err(KernelError::Size {
                what,
                expected: x.rows(),
                got: 0,
            });
        }
    }
    Ok(())
}

/// `(rows, blocks)` of the weights against the range, activations and output.
///
/// This is the shape contract of every SIMD kernel (`x86*.rs`), whose
/// `# Safety` sections refer to it: `x.blocks() == w_blocks` (they read an
/// activation row's blocks `0..w_blocks` through unchecked pointers),
/// `rows.start <= rows.end <= w_rows` (the Q8_0 tiles read a weight row's
/// blocks through unchecked pointers from its first one), and the output
/// holds `(x.rows() − 1)·stride + rows.len()` values with `stride >=
/// rows.len()` (stores go through checked slices: a short output panics).
/// `Weights::matmul` adds that a row-group format's `rows.start` is a
/// multiple of 8 (the group kernels store whole groups from there).
fn check(
    (w_rows, w_blocks): (usize, usize),
    rows: &Range<usize>,
    x: &Q8Activations,
    out: usize,
    stride: usize,
) -> Result<(), KernelError> {
    if x.blocks() != w_blocks {
        return Err(KernelError::Size {
            what: "activation blocks per row",
            expected: w_blocks,
            got: x.blocks(),
        });
    }
    if rows.start > rows.end || rows.end > w_rows {
        return Err(KernelError::Size {
            what: "weight row range end",
            expected: w_rows,
            got: rows.end,
        });
    }
    let needed = match x.rows() {
        0 => 0,
        n => (n - 1) * stride + rows.len(),
    };
    if stride < rows.len() || out < needed {
        return Err(KernelError::Size {
            what: "output",
            expected: needed.max(rows.len()),
            got: out,
        });
    }
    Ok(())
}
