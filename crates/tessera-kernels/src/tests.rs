//! Every path against the portable definition (bit for bit) and against a
//! dequantize-then-f32 reference (within a stated tolerance), on random data
//! of odd shapes: row counts that are not multiples of the tiles, inner
//! dimensions that are not multiples of 256.

use crate::*;
use half::f16;

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

fn random_weights(rng: &mut Rng, rows: usize, cols: usize) -> Weights {
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / BLOCK {
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.05 + 1e-4).to_le_bytes());
        // Every byte value, -128 included.
        bytes.extend((0..BLOCK).map(|_| (rng.next() >> 56) as u8));
    }
    Weights::from_ggml(Format::Q8_0, &bytes, rows, cols).unwrap()
}

fn random_activations(rng: &mut Rng, rows: usize, cols: usize) -> (Vec<f32>, Q8Activations) {
    let x: Vec<f32> = (0..rows * cols).map(|_| rng.float() * 4.0).collect();
    let q = Q8Activations::quantize(&x, rows, cols).unwrap();
    (x, q)
}

fn product(path: Path, w: &Weights, x: &Q8Activations) -> Vec<f32> {
    let mut out = vec![f32::NAN; x.rows() * w.rows()];
    w.matmul(path, 0..w.rows(), x, &mut out, w.rows()).unwrap();
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
        for path in Path::SIMD {
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
        w.matmul(Path::detect(), range, &x, &mut part[start..], 10).unwrap();
    }
    assert_eq!(
        full.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        part.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "splitting rows among workers changes nothing"
    );
    let (_, wrong) = random_activations(&mut rng, 1, 32);
    assert!(w.matmul(Path::Portable, 0..10, &wrong, &mut part, 10).is_err());
    assert!(w.matmul(Path::Portable, 0..11, &x, &mut part, 10).is_err());
    assert!(w.matmul(Path::Portable, 0..10, &x, &mut part[..25], 10).is_err());
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

/// GGML bytes of random 5-bit blocks: `d`, (with `minimum`) `m`, the `qh`
/// word (every bit pattern), nibbles.
fn random_q5_bytes(rng: &mut Rng, rows: usize, cols: usize, minimum: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / BLOCK {
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.02 + 1e-4).to_le_bytes());
        if minimum {
            bytes.extend_from_slice(&f16::from_f32(rng.float() * 0.1).to_le_bytes());
        }
        bytes.extend((0..4 + BLOCK / 2).map(|_| (rng.next() >> 56) as u8));
    }
    bytes
}

/// GGML bytes of random Q4_K super-blocks: `d`, `dmin`, 12 bytes of packed
/// 6-bit scales and mins (every bit pattern), 128 bytes of nibbles.
fn random_q4_k_bytes(rng: &mut Rng, rows: usize, cols: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / 256 {
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.002 + 1e-5).to_le_bytes());
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.005).to_le_bytes());
        bytes.extend((0..12 + 128).map(|_| (rng.next() >> 56) as u8));
    }
    bytes
}

/// GGML bytes of random Q5_K super-blocks: Q4_K's with 32 bytes of `qh`
/// (every bit pattern) before the nibbles.
fn random_q5_k_bytes(rng: &mut Rng, rows: usize, cols: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / 256 {
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.001 + 1e-5).to_le_bytes());
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.005).to_le_bytes());
        bytes.extend((0..12 + 32 + 128).map(|_| (rng.next() >> 56) as u8));
    }
    bytes
}

/// GGML bytes of random Q2_K super-blocks: scale/min bytes and `qs` (every
/// bit pattern), `d`, `dmin`.
fn random_q2_k_bytes(rng: &mut Rng, rows: usize, cols: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / 256 {
        bytes.extend((0..16 + 64).map(|_| (rng.next() >> 56) as u8));
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.002 + 1e-5).to_le_bytes());
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.002).to_le_bytes());
    }
    bytes
}

/// GGML bytes of random Q3_K super-blocks: `hmask`, `qs`, packed scales
/// (every bit pattern), `d`.
fn random_q3_k_bytes(rng: &mut Rng, rows: usize, cols: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / 256 {
        bytes.extend((0..32 + 64 + 12).map(|_| (rng.next() >> 56) as u8));
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.0005 + 1e-6).to_le_bytes());
    }
    bytes
}

/// GGML bytes of random Q6_K super-blocks: `ql`, `qh` (every bit pattern),
/// signed scales, `d`.
fn random_q6_k_bytes(rng: &mut Rng, rows: usize, cols: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / 256 {
        bytes.extend((0..128 + 64 + 16).map(|_| (rng.next() >> 56) as u8));
        bytes.extend_from_slice(&f16::from_f32(rng.float().abs() * 0.0005 + 1e-6).to_le_bytes());
    }
    bytes
}

/// A row-group format (4-bit, K-quants), so one test body checks them all.
struct GroupFormat {
    format: Format,
    random: fn(&mut Rng, usize, usize) -> Vec<u8>,
    /// (weight rows, activation rows, blocks of 32 per row) to test.
    shapes: &'static [(usize, usize, usize)],
}

/// Shapes whose rows hold whole 256-value super-blocks. From 16 activation
/// rows the AVX-512 VNNI tiles run (16 exactly, partial tiles of 8, an odd
/// last row group); below, tiles of every width read the packed bytes (7,
/// and 13 as 8 + 5), one row the VNNI decode kernels (one group and
/// super-block, and several; on the AVX2 path the one-row tiles, whose
/// Q4_K/Q5_K one loads each register once for both sub-blocks of a pair),
/// 2 to 4 the AVX2 tiles; the last shape spans
/// several of the AVX2 kernels' activation chunks (32 rows each) and two of
/// the VNNI kernels'.
const K_SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 8),
    (9, 3, 16),
    (17, 7, 8),
    (9, 13, 8),
    (24, 16, 16),
    (17, 33, 8),
    (5, 2, 24),
    (32, 9, 8),
    (25, 4, 16),
    (41, 1, 24),
    (17, 260, 192),
];

const GROUP_FORMATS: [GroupFormat; 9] = [
    GroupFormat {
        format: Format::Q4_0,
        random: |rng, rows, cols| random_q4_bytes(rng, rows, cols, false),
        shapes: SHAPES,
    },
    GroupFormat {
        format: Format::Q4_1,
        random: |rng, rows, cols| random_q4_bytes(rng, rows, cols, true),
        shapes: SHAPES,
    },
    GroupFormat {
        format: Format::Q5_0,
        random: |rng, rows, cols| random_q5_bytes(rng, rows, cols, false),
        shapes: SHAPES,
    },
    GroupFormat {
        format: Format::Q5_1,
        random: |rng, rows, cols| random_q5_bytes(rng, rows, cols, true),
        shapes: SHAPES,
    },
    GroupFormat {
        format: Format::Q2K,
        random: random_q2_k_bytes,
        shapes: K_SHAPES,
    },
    GroupFormat {
        format: Format::Q3K,
        random: random_q3_k_bytes,
        shapes: K_SHAPES,
    },
    GroupFormat {
        format: Format::Q4K,
        random: random_q4_k_bytes,
        shapes: K_SHAPES,
    },
    GroupFormat {
        format: Format::Q5K,
        random: random_q5_k_bytes,
        shapes: K_SHAPES,
    },
    GroupFormat {
        format: Format::Q6K,
        random: random_q6_k_bytes,
        shapes: K_SHAPES,
    },
];

#[test]
fn row_group_paths_agree_bit_for_bit_and_match_a_dequantized_reference() {
    for format in &GROUP_FORMATS {
        let mut rng = Rng(5);
        for &(rows, n, blocks) in format.shapes {
            let cols = blocks * BLOCK;
            let w = Weights::from_ggml(format.format, &(format.random)(&mut rng, rows, cols), rows, cols).unwrap();
            let (x, q) = random_activations(&mut rng, n, cols);
            let portable = product(Path::Portable, &w, &q);
            for path in Path::SIMD {
                if !path.available() {
                    eprintln!("{path:?} is not available on this CPU; its check is skipped");
                    continue;
                }
                let fast = product(path, &w, &q);
                let same = portable.iter().zip(&fast).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{:?}: {path:?} differs from the portable path at {rows}x{n}x{cols}",
                    format.format
                );
            }
            // As for Q8_0, plus (Q4_1) the f16 rounding of Q8_1's block sum (2^-11 relative).
            assert_near_reference(&portable, &|r| w.dequantize_row(r), &x, (rows, n, cols), 0.02);
        }
    }
}

#[test]
fn a_product_refuses_activations_without_the_quantization_it_reads() {
    let mut rng = Rng(13);
    let x: Vec<f32> = (0..2 * 256).map(|_| rng.float()).collect();
    let blocks = Q8Activations::quantize_for(&x, 2, 256, Quantization::BLOCKS).unwrap();
    let supers = Q8Activations::quantize_for(&x, 2, 256, Quantization::SUPER_BLOCKS).unwrap();
    for format in &GROUP_FORMATS {
        let w = Weights::from_ggml(format.format, &(format.random)(&mut rng, 8, 256), 8, 256).unwrap();
        let mut out = vec![0f32; 16];
        let needs = w.quantization();
        for (x, held) in [(&blocks, Quantization::BLOCKS), (&supers, Quantization::SUPER_BLOCKS)] {
            let result = w.matmul(Path::detect(), 0..8, x, &mut out, 8);
            let usable = (!needs.blocks || held.blocks) && (!needs.super_blocks || held.super_blocks);
            assert_eq!(result.is_ok(), usable, "{:?} with {held:?}", format.format);
        }
    }
}

#[test]
fn row_group_ranges_start_on_a_group() {
    for format in &GROUP_FORMATS {
        let mut rng = Rng(9);
        let w = Weights::from_ggml(format.format, &(format.random)(&mut rng, 20, 256), 20, 256).unwrap();
        let (_, x) = random_activations(&mut rng, 2, 256);
        let full = product(Path::detect(), &w, &x);
        let mut parts = vec![f32::NAN; 2 * 20];
        for range in [0..8, 8..16, 16..20] {
            let start = range.start;
            w.matmul(Path::detect(), range, &x, &mut parts[start..], 20).unwrap();
        }
        assert!(full.iter().zip(&parts).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!(w.matmul(Path::Portable, 4..8, &x, &mut parts, 20).is_err());
        // A range ending inside a group writes its rows and nothing past them.
        for path in [Path::detect(), Path::Portable] {
            let mut head = vec![f32::NAN; 2 * 20];
            w.matmul(path, 0..12, &x, &mut head, 20).unwrap();
            for j in 0..2 {
                let row = &head[j * 20..(j + 1) * 20];
                assert!(row[..12]
                    .iter()
                    .zip(&full[j * 20..])
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
                assert!(row[12..].iter().all(|v| v.is_nan()), "{path:?} wrote past the range");
            }
        }
    }
}

#[test]
fn q4_k_dequantizes_as_ggml_defines_it() {
    // One super-block: d = 0.5, dmin = 0.25; sub-block 0 scale 3 min 2,
    // sub-block 5 (packed in the high bits) scale 0b10_0001 = 33, min 0b01_0100 = 20.
    let mut block = Vec::new();
    block.extend_from_slice(&f16::from_f32(0.5).to_le_bytes());
    block.extend_from_slice(&f16::from_f32(0.25).to_le_bytes());
    let mut packed = [0u8; 12];
    packed[0] = 3;
    packed[4] = 2;
    packed[1] = 0b10 << 6; // scale 5's high bits
    packed[5] = 0b01 << 6; // min 5's high bits
    packed[9] = 0x4 << 4 | 0x1; // min 5's low bits, scale 5's low bits
    block.extend_from_slice(&packed);
    let mut quants = [0u8; 128];
    quants[0] = 0x7 << 4 | 0x9; // sub-block 0 value 0 = 9, sub-block 1 value 0 = 7
    quants[64 + 1] = 0xA << 4; // sub-block 5 value 1 = 10
    block.extend_from_slice(&quants);
    let w = Q4KWeights::from_ggml(&block, 1, 256).unwrap();
    let row = w.dequantize_row(0);
    assert_eq!(row[0], 0.5 * 3.0 * 9.0 - 0.25 * 2.0);
    assert_eq!(row[5 * 32 + 1], 0.5 * 33.0 * 10.0 - 0.25 * 20.0);
    assert!(matches!(
        Q4KWeights::from_ggml(&block, 1, 128),
        Err(KernelError::Cols { block: 256, .. })
    ));
}

#[test]
fn q5_dequantizes_as_ggml_defines_it() {
    // One Q5_0 block, d = 0.5: value 0 has nibble 3 and its fifth bit set (q = 19),
    // value 17 nibble 2 without it (q = 2); Q5_1 adds m = 0.25 instead of −16.
    let mut q5_0 = f16::from_f32(0.5).to_le_bytes().to_vec();
    q5_0.extend_from_slice(&1u32.to_le_bytes());
    let mut nibbles = [0u8; 16];
    nibbles[0] = 3;
    nibbles[1] = 2 << 4;
    q5_0.extend_from_slice(&nibbles);
    let row = Q5_0Weights::from_ggml(&q5_0, 1, 32).unwrap().dequantize_row(0);
    assert_eq!(
        (row[0], row[17], row[5]),
        ((19.0 - 16.0) * 0.5, (2.0 - 16.0) * 0.5, -16.0 * 0.5)
    );
    let mut q5_1 = f16::from_f32(0.5).to_le_bytes().to_vec();
    q5_1.extend_from_slice(&f16::from_f32(0.25).to_le_bytes());
    q5_1.extend_from_slice(&(1u32 | 1 << 17).to_le_bytes());
    q5_1.extend_from_slice(&nibbles);
    let row = Q5_1Weights::from_ggml(&q5_1, 1, 32).unwrap().dequantize_row(0);
    assert_eq!((row[0], row[17]), (19.0 * 0.5 + 0.25, 18.0 * 0.5 + 0.25));
    assert!(
        Q5_0Weights::from_ggml(&q5_0, 1, 64).is_err(),
        "two blocks' bytes are needed"
    );
}

#[test]
fn k_quants_hold_ggmls_bytes() {
    let mut rng = Rng(9);
    let bytes = random_q4_k_bytes(&mut rng, 16, 512);
    let w = Q4KWeights::from_ggml(&bytes, 16, 512).unwrap();
    assert_eq!(w.bytes(), bytes.len(), "Q4_K: 4.5 bits per weight, as GGML stores them");
    let bytes = random_q6_k_bytes(&mut rng, 16, 512);
    let w = Q6KWeights::from_ggml(&bytes, 16, 512).unwrap();
    assert_eq!(
        w.bytes(),
        bytes.len(),
        "Q6_K: 6.5625 bits per weight, as GGML stores them"
    );
}

#[test]
fn q6_k_dequantizes_as_ggml_defines_it() {
    // One super-block, d = 0.5. Value 0: ql[0] low nibble 5, qh[0] bits 0-1 = 2
    // → q = 5 | 2 << 4 = 37, scale[0] = 3. Value 232 (chunk 1, l = 8, the
    // fourth quarter): ql[64 + 32 + 8] high nibble 9, qh[32 + 8] bits 6-7 = 1
    // → q = 25, scale[232 / 16 = 14] = -2.
    let mut block = vec![0u8; 210];
    block[0] = 5;
    block[128] = 2;
    block[64 + 32 + 8] = 9 << 4;
    block[128 + 32 + 8] = 1 << 6;
    block[192] = 3;
    block[192 + 14] = (-2i8) as u8;
    block[208..210].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
    let w = Q6KWeights::from_ggml(&block, 1, 256).unwrap();
    let row = w.dequantize_row(0);
    assert_eq!(row[0], 0.5 * 3.0 * (37.0 - 32.0));
    assert_eq!(row[232], 0.5 * -2.0 * (25.0 - 32.0));
    assert_eq!(row[1], 0.5 * 3.0 * -32.0);
    assert!(matches!(
        Q6KWeights::from_ggml(&block, 1, 128),
        Err(KernelError::Cols { block: 256, .. })
    ));
}
