//! Deterministic pseudo-random test data, shared by the crate's tests and the
//! device check (`tessera check-device`).

/// Deterministic pseudo-random values in [-1, 1) (xorshift).
pub(crate) fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}
