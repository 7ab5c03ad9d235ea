//! Every path against the portable definition (bit for bit) and against a
//! dequantize-then-f32 reference (within a stated tolerance), on random data
//! of odd shapes: row counts that are not multiples of the tiles, inner
//! dimensions that are not multiples of 256.

use crate::*;
use half::f16;
use std::ops::Range;

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn float(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

fn random_weights(rng: &mut Rng, rows: usize, cols: usize) -> Q8_0Weights {
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / BLOCK {
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.05 + 1e-4).to_le_bytes());
        // Every byte value, -128 included.
        bytes.extend((0..BLOCK).map(|_| (rng.next() >> 56) as u8));
    }
    Q8_0Weights::from_ggml(&bytes, rows, cols).unwrap()
}

fn random_activations(rng: &mut Rng, rows: usize, cols: usize) -> (Vec<f32>, Q8Activations) {
    let x: Vec<f32> = (0..rows * cols).map(|_| rng.float() * 4.0).collect();
    let q = Q8Activations::quantize(&x, rows, cols).unwrap();
    (x, q)
}

fn product(path: Path, w: &Q8_0Weights, x: &Q8Activations) -> Vec<f32> {
    let mut out = vec![f32::NAN; x.rows() * w.rows()];
    matmul_q8_0(path, w, 0..w.rows(), x, &mut out, w.rows()).unwrap();
    out
}

const SHAPES: &[(usize, usize, usize)] = &[
    // (weight rows, activation rows, blocks per row)
    (1, 1, 1),
    (3, 1, 3),
    (5, 2, 18),
    (7, 5, 1),
    (17, 33, 18),
    (4, 37, 48),
    (9, 3, 7),
];

#[test]
fn every_path_equals_the_portable_definition_bit_for_bit() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for &(rows, n, blocks) in SHAPES {
        let cols = blocks * BLOCK;
        let w = random_weights(&mut rng, rows, cols);
        let (_, x) = random_activations(&mut rng, n, cols);
        let portable = product(Path::Portable, &w, &x);
        for path in [Path::Avx2] {
            if !path.available() {
                eprintln!("{path:?} is not available on this CPU; its check is skipped");
                continue;
            }
            let fast = product(path, &w, &x);
            let same = portable.iter().zip(&fast).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{path:?} differs from the portable path at shape {rows}x{n}x{cols}"
            );
        }
    }
}

/// Every output within `tolerance · Σ|w·x|` of the f64 product of the
/// dequantized weights and the unquantized activations.
fn assert_near_reference(
    got: &[f32],
    dequantized: &dyn Fn(usize) -> Vec<f32>,
    x: &[f32],
    (rows, n, cols): (usize, usize, usize),
    tolerance: f64,
) {
    for r in 0..rows {
        let wr = dequantized(r);
        for j in 0..n {
            let xr = &x[j * cols..(j + 1) * cols];
            let exact: f64 = wr.iter().zip(xr).map(|(a, b)| *a as f64 * *b as f64).sum();
            let scale: f64 = wr.iter().zip(xr).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
            let error = (got[j * rows + r] as f64 - exact).abs();
            assert!(
                error <= tolerance * scale + 1e-5,
                "{rows}x{n}x{cols} ({r},{j}): {error} vs {scale}"
            );
        }
    }
}

#[test]
fn products_match_a_dequantized_f32_reference() {
    let mut rng = Rng(42);
    for &(rows, n, blocks) in SHAPES {
        let cols = blocks * BLOCK;
        let w = random_weights(&mut rng, rows, cols);
        let (x, q) = random_activations(&mut rng, n, cols);
        let got = product(Path::detect(), &w, &q);
        // 8-bit activations: each term is off by at most half a step
        // (|x|max/127/2 per element); measured against Σ|w·x|, 1% holds.
        assert_near_reference(&got, &|r| w.dequantize_row(r), &x, (rows, n, cols), 0.01);
    }
}

#[test]
fn a_row_range_writes_only_its_columns_and_shapes_are_checked() {
    let mut rng = Rng(7);
    let w = random_weights(&mut rng, 10, 64);
    let (_, x) = random_activations(&mut rng, 3, 64);
    let full = product(Path::detect(), &w, &x);
    let mut part = vec![f32::NAN; 3 * 10];
    for range in [0..3, 3..4, 4..10] {
        let start = range.start;
        matmul_q8_0(Path::detect(), &w, range, &x, &mut part[start..], 10).unwrap();
    }
    assert_eq!(
        full.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        part.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "splitting rows among workers changes nothing"
    );
    let (_, wrong) = random_activations(&mut rng, 1, 32);
    assert!(matmul_q8_0(Path::Portable, &w, 0..10, &wrong, &mut part, 10).is_err());
    assert!(matmul_q8_0(Path::Portable, &w, 0..11, &x, &mut part, 10).is_err());
    assert!(matmul_q8_0(Path::Portable, &w, 0..10, &x, &mut part[..25], 10).is_err());
}

#[test]
fn batch_neighbours_do_not_change_a_row() {
    let mut rng = Rng(11);
    let w = random_weights(&mut rng, 13, 18 * BLOCK);
    let (x, many) = random_activations(&mut rng, 9, 18 * BLOCK);
    let all = product(Path::detect(), &w, &many);
    for j in 0..9 {
        let one = Q8Activations::quantize(&x[j * 576..(j + 1) * 576], 1, 576).unwrap();
        let alone = product(Path::detect(), &w, &one);
        for r in 0..13 {
            assert_eq!(
                alone[r].to_bits(),
                all[j * 13 + r].to_bits(),
                "row {j} alone vs in a batch of 9"
            );
        }
    }
}

/// GGML bytes of random 4-bit blocks: `d`, (with `minimum`) `m`, nibbles.
fn random_q4_bytes(rng: &mut Rng, rows: usize, cols: usize, minimum: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / BLOCK {
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.02 + 1e-4).to_le_bytes());
        if minimum {
            bytes.extend_from_slice(&f16::from_f32(rng.float() * 0.1).to_le_bytes());
        }
        bytes.extend((0..BLOCK / 2).map(|_| (rng.next() >> 56) as u8));
    }
    bytes
}

/// `(rows, cols)` of a weight matrix.
type Shape = (usize, usize);
/// A 4-bit product from GGML bytes: path, bytes, shape, activations, row range, output, stride.
type Q4Product = fn(Path, &[u8], Shape, &Q8Activations, Range<usize>, &mut [f32], usize) -> Result<(), KernelError>;
/// Row `r` of a 4-bit matrix (GGML bytes) dequantized.
type Q4Row = fn(&[u8], Shape, usize) -> Vec<f32>;

/// A 4-bit format's entry points, so one test body checks both.
struct Q4Format {
    name: &'static str,
    minimum: bool,
    product: Q4Product,
    dequantized: Q4Row,
}

const Q4_FORMATS: [Q4Format; 2] = [
    Q4Format {
        name: "Q4_0",
        minimum: false,
        product: |path, bytes, (rows, cols), x, range, out, stride| {
            matmul_q4_0(path, &Q4_0Weights::from_ggml(bytes, rows, cols)?, range, x, out, stride)
        },
        dequantized: |bytes, (rows, cols), r| Q4_0Weights::from_ggml(bytes, rows, cols).unwrap().dequantize_row(r),
    },
    Q4Format {
        name: "Q4_1",
        minimum: true,
        product: |path, bytes, (rows, cols), x, range, out, stride| {
            matmul_q4_1(path, &Q4_1Weights::from_ggml(bytes, rows, cols)?, range, x, out, stride)
        },
        dequantized: |bytes, (rows, cols), r| Q4_1Weights::from_ggml(bytes, rows, cols).unwrap().dequantize_row(r),
    },
];

fn product_q4(
    format: &Q4Format,
    path: Path,
    bytes: &[u8],
    (rows, cols): (usize, usize),
    x: &Q8Activations,
) -> Vec<f32> {
    let mut out = vec![f32::NAN; x.rows() * rows];
    (format.product)(path, bytes, (rows, cols), x, 0..rows, &mut out, rows).unwrap();
    out
}

#[test]
fn q4_paths_agree_bit_for_bit_and_match_a_dequantized_reference() {
    for format in &Q4_FORMATS {
        let mut rng = Rng(5);
        for &(rows, n, blocks) in SHAPES {
            let cols = blocks * BLOCK;
            let bytes = random_q4_bytes(&mut rng, rows, cols, format.minimum);
            let (x, q) = random_activations(&mut rng, n, cols);
            let portable = product_q4(format, Path::Portable, &bytes, (rows, cols), &q);
            if Path::Avx2.available() {
                let fast = product_q4(format, Path::Avx2, &bytes, (rows, cols), &q);
                let same = portable.iter().zip(&fast).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{}: AVX2 differs from the portable path at {rows}x{n}x{cols}",
                    format.name
                );
            }
            // As for Q8_0, plus (Q4_1) the f16 rounding of Q8_1's block sum (2^-11 relative).
            let dequantized = |r| (format.dequantized)(&bytes, (rows, cols), r);
            assert_near_reference(&portable, &dequantized, &x, (rows, n, cols), 0.02);
        }
    }
}

#[test]
fn q4_ranges_start_on_a_group() {
    for format in &Q4_FORMATS {
        let mut rng = Rng(9);
        let bytes = random_q4_bytes(&mut rng, 20, 64, format.minimum);
        let (_, x) = random_activations(&mut rng, 2, 64);
        let full = product_q4(format, Path::detect(), &bytes, (20, 64), &x);
        let mut parts = vec![f32::NAN; 2 * 20];
        for range in [0..8, 8..16, 16..20] {
            let start = range.start;
            (format.product)(Path::detect(), &bytes, (20, 64), &x, range, &mut parts[start..], 20).unwrap();
        }
        assert!(full.iter().zip(&parts).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!((format.product)(Path::Portable, &bytes, (20, 64), &x, 4..8, &mut parts, 20).is_err());
    }
}
