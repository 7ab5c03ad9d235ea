//! The AVX2 tile primitives against their definitions, bit for bit.

use super::*;

fn noise(seed: u32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 + 0.5) * 0.618 + seed as f32).sin() * 1.7)
        .collect()
}

fn avx2_available() -> bool {
    crate::simd::use_avx2() || {
        // Forced portable by another test: detect the hardware directly.
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
    }
}

fn avx512_available() -> bool {
    avx2_available() && is_x86_feature_detected!("avx512f")
}

/// `got[i]` is glibc's `expf(x[i] − shift)`, bit for bit.
#[cfg(target_env = "gnu")]
fn assert_glibc_exp(x: &[f32], shift: f32, got: &[f32], build: &str) {
    for (x, y) in x.iter().zip(got) {
        let want = (x - shift).exp();
        assert!(
            want.to_bits() == y.to_bits() || (want.is_nan() && y.is_nan()),
            "{build}: exp({x} - {shift}): {y:e} vs glibc {want:e}"
        );
    }
}

#[test]
fn batched_scores_equal_one_dot_per_key_bit_for_bit() {
    if !avx2_available() {
        return; // nothing to compare: the portable path is the only one
    }
    for dim in [64usize, 32, 16, 128, 20, 8] {
        for keys_in_tile in [1usize, 7, 8, 9, 16, 17] {
            let q = noise(1, dim);
            let keys = noise(2, dim * keys_in_tile);
            let keys16: Vec<f16> = keys.iter().map(|&x| f16::from_f32(x)).collect();
            let scale = 0.125f32;
            let (mut got, mut got16) = (vec![0f32; keys_in_tile], vec![0f32; keys_in_tile]);
            // SAFETY: AVX2, FMA and F16C are present (checked above).
            let (want, want16): (Vec<f32>, Vec<f32>) = unsafe {
                avx2::scaled_dots(&q, &keys, scale, &mut got);
                avx2::scaled_dots_f16(&q, &keys16, scale, &mut got16);
                (
                    keys.chunks_exact(dim)
                        .map(|k| crate::simd::avx2::dot(&q, k) * scale)
                        .collect(),
                    keys16
                        .chunks_exact(dim)
                        .map(|k| crate::simd::avx2::dot_f16(&q, k) * scale)
                        .collect(),
                )
            };
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "f32 dim {dim}, {keys_in_tile} keys");
            assert_eq!(bits(&got16), bits(&want16), "f16 dim {dim}, {keys_in_tile} keys");
        }
    }
}

/// glibc's `expf` is the reference the vector `exp` reproduces (other C
/// libraries round some results differently).
#[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
#[test]
fn vector_exp_equals_glibc_expf_bit_for_bit() {
    if !avx2_available() {
        return;
    }
    // Every 7th float of [-104, 0] (softmax arguments are never positive), every
    // 61st of [0, 104], and the special values; in chunks, to keep memory flat.
    let negative = (0x8000_0000u32..0xc2d0_0000).step_by(7);
    let positive = (0..0x42d0_0000u32).step_by(61);
    let special = [
        f32::NEG_INFINITY,
        f32::INFINITY,
        f32::NAN,
        -0.0,
        88.7,
        88.8,
        -103.0,
        -104.0,
        -1e30,
    ];
    let mut inputs = negative.chain(positive).map(f32::from_bits).chain(special).peekable();
    let mut got = vec![0f32; 1 << 20];
    while inputs.peek().is_some() {
        let chunk: Vec<f32> = inputs.by_ref().take(got.len()).collect();
        for shift in [0.0f32, -7.25] {
            // SAFETY: AVX2, FMA and F16C are present (checked above).
            unsafe { avx2::exp_shifted(&chunk, shift, &mut got[..chunk.len()]) };
            assert_glibc_exp(&chunk, shift, &got, "avx2");
            if avx512_available() {
                // SAFETY: AVX-512 F is present too (checked).
                unsafe { avx512::exp_shifted(&chunk, shift, &mut got[..chunk.len()]) };
                assert_glibc_exp(&chunk, shift, &got, "avx512");
            }
        }
    }
}

/// `x^32` of a little-endian multi-limb integer, by squaring five times.
fn pow32(x: &[u64]) -> Vec<u64> {
    let mut value = x.to_vec();
    for _ in 0..5 {
        let mut square = vec![0u64; value.len() * 2];
        for (i, &a) in value.iter().enumerate() {
            let mut carry = 0u128;
            for (j, &b) in value.iter().enumerate() {
                let t = square[i + j] as u128 + a as u128 * b as u128 + carry;
                square[i + j] = t as u64;
                carry = t >> 64;
            }
            square[i + value.len()] = carry as u64;
        }
        value = square;
    }
    value
}

fn bit_length(x: &[u64]) -> usize {
    x.iter()
        .rposition(|&limb| limb != 0)
        .map_or(0, |top| 64 * top + 64 - x[top].leading_zeros() as usize)
}

#[test]
fn the_exp_table_holds_two_to_the_i_over_32_correctly_rounded() {
    // Entry i + (i << 47) = d = m·2⁻⁵² with m in [2⁵², 2⁵³). d is 2^(i/32) rounded to
    // nearest iff (2m−1)·2⁻⁵³ ≤ 2^(i/32) ≤ (2m+1)·2⁻⁵³, i.e. raised to the 32nd
    // power: (2m−1)³² ≤ 2^(i + 53·32) ≤ (2m+1)³², decided on bit lengths (an odd
    // number's power is never a power of two, except 1).
    for (i, &entry) in avx2::table().iter().enumerate() {
        let bits = entry.wrapping_add((i as u64) << 47);
        assert_eq!(bits >> 52, 0x3ff, "entry {i} is not in [1, 2)");
        let m = (bits & ((1 << 52) - 1)) | (1 << 52);
        let exponent = i + 53 * 32;
        assert!(bit_length(&pow32(&[2 * m - 1])) <= exponent, "entry {i} is too large");
        assert!(bit_length(&pow32(&[2 * m + 1])) > exponent, "entry {i} is too small");
    }
}
