//! Tessera's Q8_0 kernels against candle's own quantized matmul, the
//! reference they replace: bit-identical outputs on random data of odd
//! shapes, on every path this CPU runs (the portable one forced too), so
//! swapping them in changes no logit.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use tessera_kernels::{matmul_q4_1, matmul_q8_0, Path, Q4_1Weights, Q8Activations, Q8_0Weights};

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

#[test]
fn q8_0_products_equal_candles_bit_for_bit() {
    // (weight rows, activation rows, inner dimension): tails of every tile, k % 256 != 0.
    for (i, &(rows, n, cols)) in [(37, 5, 576), (3, 1, 96), (64, 33, 1536), (5, 2, 32), (49, 7, 160)]
        .iter()
        .enumerate()
    {
        let weights = Tensor::from_vec(random(rows * cols, i as u64), (rows, cols), &Device::Cpu).unwrap();
        let quantized = QTensor::quantize(&weights, GgmlDType::Q8_0).unwrap();
        let x = random(n * cols, 100 + i as u64);
        let input = Tensor::from_slice(&x, (n, cols), &Device::Cpu).unwrap();
        let bytes = quantized.data().unwrap().to_vec();
        let reference: Vec<f32> = QMatMul::from_qtensor(quantized)
            .unwrap()
            .forward(&input)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();

        let ours_weights = Q8_0Weights::from_ggml(&bytes, rows, cols).unwrap();
        let activations = Q8Activations::quantize(&x, n, cols).unwrap();
        for path in [Path::detect(), Path::Portable] {
            let mut ours = vec![f32::NAN; n * rows];
            matmul_q8_0(path, &ours_weights, 0..rows, &activations, &mut ours, rows).unwrap();
            let equal = reference.iter().zip(&ours).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(equal, "{path:?} differs from candle at {rows}x{n}x{cols}");
        }
    }
}

#[test]
fn q4_1_products_equal_candles_bit_for_bit() {
    for (i, &(rows, n, cols)) in [(40, 5, 576), (8, 1, 64), (64, 33, 1536), (24, 2, 64)]
        .iter()
        .enumerate()
    {
        let weights = Tensor::from_vec(random(rows * cols, 50 + i as u64), (rows, cols), &Device::Cpu).unwrap();
        let quantized = QTensor::quantize(&weights, GgmlDType::Q4_1).unwrap();
        let x = random(n * cols, 200 + i as u64);
        let input = Tensor::from_slice(&x, (n, cols), &Device::Cpu).unwrap();
        let bytes = quantized.data().unwrap().to_vec();
        let reference: Vec<f32> = QMatMul::from_qtensor(quantized)
            .unwrap()
            .forward(&input)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let ours_weights = Q4_1Weights::from_ggml(&bytes, rows, cols).unwrap();
        let activations = Q8Activations::quantize(&x, n, cols).unwrap();
        for path in [Path::detect(), Path::Portable] {
            let mut ours = vec![f32::NAN; n * rows];
            matmul_q4_1(path, &ours_weights, 0..rows, &activations, &mut ours, rows).unwrap();
            let equal = reference.iter().zip(&ours).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(equal, "{path:?} differs from candle's Q4_1 at {rows}x{n}x{cols}");
        }
    }
}
