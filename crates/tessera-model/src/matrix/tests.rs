//! `ParallelMatMul` against candle's dequantization and its own split products.

use super::*;
use crate::noise::noise;

/// A `[rows, cols]` matrix of random values quantized by candle to `dtype`.
fn quantized(dtype: GgmlDType, rows: usize, cols: usize, seed: u64) -> Matrix {
    let dense = Tensor::from_vec(noise(seed, rows * cols), (rows, cols), &Device::Cpu).unwrap();
    Matrix::Quantized(QTensor::quantize(&dense, dtype).unwrap())
}

fn candle_rows(matrix: &Matrix) -> Vec<Vec<f32>> {
    let Matrix::Quantized(q) = matrix else { panic!("dense") };
    q.dequantize(&Device::Cpu).unwrap().to_vec2::<f32>().unwrap()
}

const TYPES: [GgmlDType; 12] = [
    GgmlDType::Q8_0,
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q2K,
    GgmlDType::Q3K,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
    GgmlDType::Q6K,
    GgmlDType::F16,
    GgmlDType::BF16,
];

#[test]
fn rows_equal_candles_dequantization_for_every_type() {
    for (i, dtype) in TYPES.into_iter().enumerate() {
        let matrix = quantized(dtype, 40, 512, i as u64);
        let want = candle_rows(&matrix);
        let product = ParallelMatMul::new(quantized(dtype, 40, 512, i as u64)).unwrap();
        for (r, want_row) in want.iter().enumerate() {
            let got = product.row(r).unwrap();
            let same = got.iter().zip(want_row).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{dtype:?} row {r} differs from candle's dequantization");
        }
        assert!(product.row(40).is_err(), "a row past the end is an error");
    }
}

#[test]
fn a_prefill_split_by_activation_rows_equals_each_row_alone() {
    let types = [GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q8_0, GgmlDType::F16];
    let heights = [48, 32, 24, 16];
    let cols = 256;
    let matrices = (0..types.len())
        .map(|i| quantized(types[i], heights[i], cols, 300 + i as u64))
        .collect();
    let product = ParallelMatMul::stacked(matrices).unwrap();
    let n = TOKEN_SPLIT_MIN + 37;
    let x = noise(11, n * cols);
    let got = product.forward(&x, n).unwrap();
    for j in 0..n {
        let alone = product.forward(&x[j * cols..(j + 1) * cols], 1).unwrap();
        let row = &got[j * product.rows()..(j + 1) * product.rows()];
        let same = row.iter().zip(&alone).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "activation row {j} differs from its product alone");
    }
}

#[test]
fn mixed_types_stack_into_one_product_equal_to_separate_ones() {
    // q/k/v as a Q4_K_M layer stores them: two of one type, then another.
    let types = [
        GgmlDType::Q4K,
        GgmlDType::Q4K,
        GgmlDType::Q6K,
        GgmlDType::Q8_0,
        GgmlDType::Q5_0,
    ];
    let heights = [48, 16, 32, 24, 8];
    let cols = 256;
    let make = |i: usize| quantized(types[i], heights[i], cols, 100 + i as u64);
    let stacked = ParallelMatMul::stacked((0..types.len()).map(make).collect()).unwrap();
    assert_eq!(
        stacked.part_count(),
        4,
        "adjacent Q4_K matrices fuse, the rest stay apart"
    );
    assert_eq!(stacked.rows(), heights.iter().sum::<usize>());
    let n = 3;
    let x = noise(7, n * cols);
    let got = stacked.forward(&x, n).unwrap();
    let mut offset = 0;
    for (i, &height) in heights.iter().enumerate() {
        let alone = ParallelMatMul::new(make(i)).unwrap().forward(&x, n).unwrap();
        for j in 0..n {
            let row = &got[j * stacked.rows() + offset..][..height];
            assert_eq!(row, &alone[j * height..][..height], "part {i}, activation row {j}");
        }
        offset += height;
    }
    let mismatched = vec![
        quantized(GgmlDType::Q8_0, 8, 64, 1),
        quantized(GgmlDType::Q8_0, 8, 96, 2),
    ];
    assert!(ParallelMatMul::stacked(mismatched).is_err(), "widths must agree");
    assert!(ParallelMatMul::stacked(Vec::new()).is_err());
}
