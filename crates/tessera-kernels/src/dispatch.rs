//! Which code path runs, checked once; the shape checks every path relies on.

use crate::q4::{NibbleGroups, GROUP};
use crate::{portable, KernelError, Q4_0Weights, Q4_1Weights, Q8Activations, Q8_0Weights};
use std::ops::Range;
use std::sync::OnceLock;

/// A kernel implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// AVX2, FMA and F16C (x86-64).
    Avx2,
    /// Plain Rust, any CPU.
    Portable,
}

impl Path {
    /// The best path this CPU runs, unless `TESSERA_KERNELS=portable` forces
    /// the portable one. Detected once.
    pub fn detect() -> Path {
        static DETECTED: OnceLock<Path> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            let forced = std::env::var("TESSERA_KERNELS").is_ok_and(|v| v == "portable");
            if !forced && Path::Avx2.available() {
                Path::Avx2
            } else {
                Path::Portable
            }
        })
    }

    /// Whether this CPU can run the path.
    pub fn available(self) -> bool {
        match self {
            Path::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => {
                is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Path::Avx2 => false,
        }
    }
}

/// `y = x Wᵀ` for weight rows `rows`: `out[j·stride + (r − rows.start)]`
/// for each activation row `j` and weight row `r` (a worker computes its row
/// range straight into the shared output). A path the CPU lacks runs the
/// portable code (same results).
pub fn matmul_q8_0(
    path: Path,
    w: &Q8_0Weights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) -> Result<(), KernelError> {
    check((w.rows(), w.blocks()), &rows, x, out.len(), stride)?;
    if rows.is_empty() || x.rows() == 0 {
        return Ok(());
    }
    match path {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2, FMA and F16C (checked), and the shapes were checked above.
        Path::Avx2 if path.available() => unsafe { crate::x86::matmul(w, rows, x, out, stride) },
        _ => portable::matmul(w, rows, x, out, stride),
    }
    Ok(())
}

/// `y = x Wᵀ` for Q4_1 weight rows `rows` (the range must start at a
/// multiple of 8, a row group); otherwise as [`matmul_q8_0`].
pub fn matmul_q4_1(
    path: Path,
    w: &Q4_1Weights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) -> Result<(), KernelError> {
    matmul_q4(path, &w.0, rows, x, out, stride)
}

/// As [`matmul_q4_1`], for Q4_0 weights.
pub fn matmul_q4_0(
    path: Path,
    w: &Q4_0Weights,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) -> Result<(), KernelError> {
    matmul_q4(path, &w.0, rows, x, out, stride)
}

fn matmul_q4(
    path: Path,
    w: &NibbleGroups,
    rows: Range<usize>,
    x: &Q8Activations,
    out: &mut [f32],
    stride: usize,
) -> Result<(), KernelError> {
    check((w.rows(), w.blocks()), &rows, x, out.len(), stride)?;
    if !rows.start.is_multiple_of(GROUP) {
        return Err(KernelError::Size {
            what: "4-bit row range start (a multiple of 8)",
            expected: rows.start.next_multiple_of(GROUP),
            got: rows.start,
        });
    }
    if rows.is_empty() || x.rows() == 0 {
        return Ok(());
    }
    match path {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2, FMA and F16C (checked), and the shapes were checked above.
        Path::Avx2 if path.available() => unsafe { crate::x86_q4::matmul_q4(w, rows, x, out, stride) },
        _ => portable::matmul_q4(w, rows, x, out, stride),
    }
    Ok(())
}

/// `(rows, blocks)` of the weights against the range, activations and output.
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
