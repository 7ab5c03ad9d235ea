//! Tessera's quantized kernels against candle's own quantized matmul, the
//! reference they replace, on random data of odd shapes, on every path this
//! CPU runs (the portable one forced too): Q8_0, Q4_1, Q5_0 and Q5_1 bit for bit, so
//! swapping them in changes no logit; Q4_0 to rounding (its integer dots are
//! exact, but candle's AVX2 code adds eight partial lanes per block where
//! ours adds whole blocks, as GGML's scalar reference does); Q2_K to Q6_K
//! within 2% of Σ|w·x| (candle quantizes their activations per 256 values,
//! ours per 32).
//!
//! The reference is candle's AVX2 code on every machine: `.cargo/config.toml`
//! sets `MISTRALRS_FORCE_AVX2=1` for what cargo runs, since candle 0.11
//! switches to repacked VNNI kernels with other arithmetic on CPUs with
//! AVX-VNNI or AVX-512 VNNI; the block dot products (`k_quants::matmul`) are
//! called directly.

use candle_core::quantized::k_quants::{
    matmul, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0,
    GgmlType,
};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use tessera_kernels::{Format, Path, Q8Activations, Weights};

fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.0
        })
        .collect()
}

/// Random weights quantized by candle to `dtype`, random activations, and
/// candle's product: `(GGML bytes, activations, product)`.
///
/// The product is candle's block dot-product path (`k_quants::matmul`: the
/// activations quantized to the format's dot type, then `vec_dot` per
/// output), called directly. `QMatMul::forward` would pick a repacked x86
/// kernel with other arithmetic on CPUs with AVX-VNNI or AVX-512 VNNI (for
/// Q8_0 and the K-quants when the output width is a multiple of its tile and
/// the inner one of 256), so the reference would change with the machine the
/// tests run on: that is why `q8_0_products_equal_candles_bit_for_bit` failed
/// at 64x33x1536 on a VNNI machine and passed in CI.
fn candle_product(
    dtype: GgmlDType,
    (rows, n, cols): (usize, usize, usize),
    seed: u64,
) -> (Vec<u8>, Vec<f32>, Vec<f32>) {
    let weights = Tensor::from_vec(random(rows * cols, seed), (rows, cols), &Device::Cpu).unwrap();
    let quantized = QTensor::quantize(&weights, dtype).unwrap();
    let x = random(n * cols, 1000 + seed);
    let bytes = quantized.data().unwrap().to_vec();
    let mut product = vec![0f32; n * rows];
    let mkn = (n, cols, rows);
    match dtype {
        GgmlDType::Q8_0 => matmul::<BlockQ8_0>(mkn, &x, &blocks(&bytes), &mut product),
        GgmlDType::Q4_0 => matmul::<BlockQ4_0>(mkn, &x, &blocks(&bytes), &mut product),
        GgmlDType::Q4_1 => matmul::<BlockQ4_1>(mkn, &x, &blocks(&bytes), &mut product),
        GgmlDType::Q5_0 => matmul::<BlockQ5_0>(mkn, &x, &blocks(&bytes), &mut product),
        GgmlDType::Q5_1 => matmul::<BlockQ5_1>(mkn, &x, &blocks(&bytes), &mut product),
        GgmlDType::Q4K => matmul::<BlockQ4K>(mkn, &x, &blocks(&bytes), &mut product),
        GgmlDType::Q2K => matmul::<BlockQ2K>(mkn, &x, &blocks(&bytes), &mut product),
        GgmlDType::Q3K => matmul::<BlockQ3K>(mkn, &x, &blocks(&bytes), &mut product),
        GgmlDType::Q5K => matmul::<BlockQ5K>(mkn, &x, &blocks(&bytes), &mut product),
        GgmlDType::Q6K => matmul::<BlockQ6K>(mkn, &x, &blocks(&bytes), &mut product),
        other => panic!("no reference product for {other:?}"),
    }
    .unwrap();
    (bytes, x, product)
}

/// GGML bytes as candle's block type (copied into a `Vec<T>`, so aligned).
fn blocks<T: GgmlType>(bytes: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    assert_eq!(bytes.len() % size, 0, "not a whole number of blocks");
    let mut out = vec![T::zeros(); bytes.len() / size];
    // SAFETY: candle's block types are `repr(C)` plain data (f16 scales and
    // byte arrays, no padding, every bit pattern valid), `out` holds exactly
    // `bytes.len()` bytes, and the two buffers do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len()) };
    out
}

/// Ours on every path equals candle's product bit for bit, on each
/// `(weight rows, activation rows, inner dimension)` shape.
fn assert_equal(format: Format, dtype: GgmlDType, shapes: &[(usize, usize, usize)], seed: u64) {
    for (i, &(rows, n, cols)) in shapes.iter().enumerate() {
        let (bytes, x, reference) = candle_product(dtype, (rows, n, cols), seed + i as u64);
        let weights = Weights::from_ggml(format, &bytes, rows, cols).unwrap();
        let activations = Q8Activations::quantize(&x, n, cols).unwrap();
        for path in [Path::detect(), Path::Portable] {
            let mut ours = vec![f32::NAN; n * rows];
            weights.matmul(path, 0..rows, &activations, &mut ours, rows).unwrap();
            let equal = reference.iter().zip(&ours).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(equal, "{format:?} {path:?} differs from candle at {rows}x{n}x{cols}");
        }
    }
}

#[test]
fn q8_0_products_equal_candles_bit_for_bit() {
    // Tails of every tile, k % 256 != 0.
    let shapes = [(37, 5, 576), (3, 1, 96), (64, 33, 1536), (5, 2, 32), (49, 7, 160)];
    assert_equal(Format::Q8_0, GgmlDType::Q8_0, &shapes, 0);
}

#[test]
fn q4_1_products_equal_candles_bit_for_bit() {
    let shapes = [(40, 5, 576), (8, 1, 64), (64, 33, 1536), (24, 2, 64)];
    assert_equal(Format::Q4_1, GgmlDType::Q4_1, &shapes, 50);
}

#[test]
fn q5_products_equal_candles_bit_for_bit() {
    // Candle's Q5 dot products are GGML's scalar ones, block after block.
    let shapes = [(40, 5, 576), (8, 1, 64), (64, 33, 1536), (24, 2, 64)];
    assert_equal(Format::Q5_0, GgmlDType::Q5_0, &shapes, 150);
    assert_equal(Format::Q5_1, GgmlDType::Q5_1, &shapes, 170);
}

#[test]
fn q4_0_products_equal_candles_to_rounding() {
    for (seed, shape) in [(40, 5, 576), (8, 1, 64), (64, 33, 1536), (24, 2, 64)]
        .into_iter()
        .enumerate()
    {
        let (bytes, x, reference) = candle_product(GgmlDType::Q4_0, shape, 70 + seed as u64);
        let weights = Weights::from_ggml(Format::Q4_0, &bytes, shape.0, shape.2).unwrap();
        let (rows, n, cols) = shape;
        let activations = Q8Activations::quantize(&x, n, cols).unwrap();
        for path in [Path::detect(), Path::Portable] {
            let mut ours = vec![f32::NAN; n * rows];
            weights.matmul(path, 0..rows, &activations, &mut ours, rows).unwrap();
            for (j, (got, want)) in ours.iter().zip(&reference).enumerate() {
                // Float sums of up to 48 block products in two orders: a few ulps of the magnitude.
                let magnitude = reference[j / rows * rows..][..rows]
                    .iter()
                    .fold(1f32, |m, v| m.max(v.abs()));
                assert!(
                    (got - want).abs() <= 1e-5 * magnitude,
                    "{path:?} at {rows}x{n}x{cols}, output {j}: {got} vs candle's {want}"
                );
            }
        }
    }
}

/// Ours on every path within 2% of Σ|w·x| of candle's product (different activation blocks).
fn assert_near(format: Format, dtype: GgmlDType, seed: u64) {
    for (i, shape) in K_SHAPES.into_iter().enumerate() {
        let (bytes, x, reference) = candle_product(dtype, shape, seed + i as u64);
        let (rows, n, cols) = shape;
        let weights = Weights::from_ggml(format, &bytes, rows, cols).unwrap();
        let activations = Q8Activations::quantize(&x, n, cols).unwrap();
        for path in [Path::detect(), Path::Portable] {
            let mut ours = vec![f32::NAN; n * rows];
            weights.matmul(path, 0..rows, &activations, &mut ours, rows).unwrap();
            for r in 0..rows {
                let w = weights.dequantize_row(r);
                for j in 0..n {
                    let scale: f32 = w.iter().zip(&x[j * cols..][..cols]).map(|(a, b)| (a * b).abs()).sum();
                    let (got, want) = (ours[j * rows + r], reference[j * rows + r]);
                    assert!(
                        (got - want).abs() <= 0.02 * scale,
                        "{format:?} {path:?} at {rows}x{n}x{cols} ({r},{j}): {got} vs candle's {want} (Σ|w·x| {scale})"
                    );
                }
            }
        }
    }
}

/// The K-quant shapes: rows hold whole 256-value super-blocks.
const K_SHAPES: [(usize, usize, usize); 3] = [(40, 5, 512), (8, 1, 256), (24, 33, 768)];

#[test]
fn k_quant_products_match_candles_within_activation_rounding() {
    assert_near(Format::Q4K, GgmlDType::Q4K, 90);
    assert_near(Format::Q5K, GgmlDType::Q5K, 100);
    assert_near(Format::Q3K, GgmlDType::Q3K, 120);
    assert_near(Format::Q2K, GgmlDType::Q2K, 130);
    assert_near(Format::Q6K, GgmlDType::Q6K, 110);
}
