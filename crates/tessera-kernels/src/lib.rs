//! Tessera's CPU kernels.
//!
//! Quantized weight matrices times activations quantized per row to 8 bits,
//! as GGML defines the formats: Q8_0 (32 signed bytes and one scale per
//! block), Q4_0 and Q4_1 (32 four-bit values, a scale, and for Q4_1 a
//! minimum per block), and the K-quants Q4_K (256-value super-blocks, run as
//! Q4_1-shaped sub-blocks) and Q6_K (unpacked to bytes at load).
//!
//! Every kernel computes each output exactly as candle's reference dot
//! product does (same integer partial sums, same fused multiply-adds in the
//! same order, same final reduction), so switching to these kernels changes
//! speed, never a logit; and every output is computed the same way whatever
//! the batch around it (batch invariance). Speed comes from the layout and
//! the loop nest instead: scales converted to f32 once at load, activations
//! quantized once per matrix product instead of once per worker, and a
//! register tile that reuses each loaded weight block across several
//! activation rows (prefill) or each activation block across several weight
//! rows (decode).
//!
//! Paths: AVX2+FMA when the CPU has it (detected at run time), a portable
//! one otherwise; [`Path::Portable`] can be forced for tests.
#![deny(missing_docs)]

mod activations;
mod dispatch;
mod error;
mod portable;
mod q4;
mod q4_k;
mod q6_k;
mod q8_0;
#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_q4;
#[cfg(target_arch = "x86_64")]
mod x86_q6_k;

pub use activations::Q8Activations;
pub use dispatch::{Format, Path, Weights};
pub use error::KernelError;
pub use q4::{Q4KWeights, Q4_0Weights, Q4_1Weights};
pub use q6_k::Q6KWeights;
pub use q8_0::Q8_0Weights;

/// Values per quantization block (Q8_0, Q4_0, Q4_1, and the activations).
pub const BLOCK: usize = 32;

/// Lanes of the per-output accumulator: one per run of four bytes of a block,
/// as an AVX2 register of f32 holds them.
const LANES: usize = 8;

#[cfg(test)]
mod tests;
