//! Tessera's CPU kernels.
//!
//! Quantized weight matrices times activations quantized per row to 8 bits,
//! as GGML defines the formats: Q8_0 (32 signed bytes and one scale per
//! block), Q4_0/Q4_1/Q5_0/Q5_1 (32 four- or five-bit values, a scale, and a
//! minimum or offset per block), and the K-quants Q2_K to Q6_K (256-value
//! super-blocks, kept at GGML's bytes in groups of 8 rows).
//!
//! The Q8_0 and Q4_1 kernels compute each output exactly as candle's
//! reference dot product does (same integer partial sums, same float
//! operations in the same order, same final reduction), so for those formats
//! switching to these kernels changes speed, never a logit. Q4_0 follows
//! GGML's scalar order (candle's AVX2 code sums lanes in another order:
//! equal to rounding), and Q4_K, Q5_K and Q6_K pair with activations
//! quantized per 256 values, as candle's Q8_K blocks are, applying their
//! sub-block scales in integers (their rounding differs slightly from
//! candle's, so logits do). Every output is computed the same way whatever the batch
//! around it (batch invariance). Speed comes from the layout and the loop
//! nest: scales converted once at load, activations quantized once per
//! matrix product instead of once per worker, and register tiles that reuse
//! each loaded weight block across several activation rows (prefill) or
//! each activation block across several weight rows (decode).
//!
//! Paths: AVX-512 VNNI for the K-quants' products over several activation
//! rows, AVX2+FMA for the rest (detected at run time, see
//! [`Path::Avx512Vnni`]), and a portable one otherwise, with the same bits;
//! [`Path::Portable`] can be forced for tests.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(clippy::missing_safety_doc)]

mod activations;
mod dispatch;
mod error;
mod half_precision;
mod portable;
mod q2_k;
mod q3_k;
mod q4;
mod q4_k;
mod q6_k;
mod q8_0;
mod super_activations;
mod super_rows;
#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_q2_k;
#[cfg(target_arch = "x86_64")]
mod x86_q3_k;
#[cfg(target_arch = "x86_64")]
mod x86_q4;
#[cfg(target_arch = "x86_64")]
mod x86_q4_k;
#[cfg(target_arch = "x86_64")]
mod x86_q4_k_decode;
#[cfg(target_arch = "x86_64")]
mod x86_q4_k_vnni;
#[cfg(target_arch = "x86_64")]
mod x86_q6_k;
#[cfg(target_arch = "x86_64")]
mod x86_q6_k_decode;
#[cfg(target_arch = "x86_64")]
mod x86_q6_k_vnni;
#[cfg(target_arch = "x86_64")]
mod x86_vnni;

pub use activations::{Q8Activations, Quantization};
pub use dispatch::{Format, Path, Weights, VNNI_MIN_ROWS};
pub use error::KernelError;
pub use half_precision::{HalfKind, HalfWeights};
pub use q2_k::Q2KWeights;
pub use q3_k::Q3KWeights;
pub use q4::{Q4_0Weights, Q4_1Weights, Q5_0Weights, Q5_1Weights};
pub use q4_k::{Q4KWeights, Q5KWeights};
pub use q6_k::Q6KWeights;
pub use q8_0::Q8_0Weights;

/// Values per quantization block (Q8_0, Q4_0, Q4_1, and the activations).
pub const BLOCK: usize = 32;

/// Lanes of the per-output accumulator: one per run of four bytes of a block,
/// as an AVX2 register of f32 holds them.
const LANES: usize = 8;

#[cfg(test)]
mod tests;
