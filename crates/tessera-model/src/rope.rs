//! Rotary position embeddings (Su et al. 2021) at each token's absolute
//! position, with no cap on the position: angles are computed per batch for
//! the positions present, `θ_i = pos · base^(-2i/d)` in f32 as the reference does.

/// Precomputed inverse frequencies and the pairing convention.
#[derive(Debug, Clone)]
pub struct Rope {
    inv_freq: Vec<f32>,
    neox: bool,
}

/// cos/sin of every (row, frequency) for one batch, `[rows, head_dim / 2]` each.
#[derive(Debug, Clone)]
pub struct RopeAngles {
    cos: Vec<f32>,
    sin: Vec<f32>,
    half: usize,
}

impl RopeAngles {
    /// `cos` of every (row, frequency), `[rows, head_dim / 2]`.
    pub fn cos(&self) -> &[f32] {
        &self.cos
    }

    /// `sin` of every (row, frequency), `[rows, head_dim / 2]`.
    pub fn sin(&self) -> &[f32] {
        &self.sin
    }
}

impl Rope {
    /// RoPE for heads of width `head_dim` with base `theta`; `neox` selects (i, i+d/2) pairs.
    pub fn new(head_dim: usize, theta: f32, neox: bool) -> Self {
        let inv_freq = (0..head_dim)
            .step_by(2)
            .map(|i| 1f32 / theta.powf(i as f32 / head_dim as f32))
            .collect();
        Self { inv_freq, neox }
    }

    /// The angles for each position of a batch.
    pub fn angles(&self, positions: &[usize]) -> RopeAngles {
        let half = self.inv_freq.len();
        let mut cos = Vec::with_capacity(positions.len() * half);
        let mut sin = Vec::with_capacity(positions.len() * half);
        for &pos in positions {
            for &freq in &self.inv_freq {
                let angle = pos as f32 * freq;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        RopeAngles { cos, sin, half }
    }

    /// Rotate every head of every row of `x` (`[rows, heads, head_dim]`) in place.
    pub fn apply(&self, x: &mut [f32], angles: &RopeAngles, num_heads: usize) {
        let half = angles.half;
        let dim = 2 * half;
        for (row, heads) in x.chunks_exact_mut(num_heads * dim).enumerate() {
            let cos = &angles.cos[row * half..(row + 1) * half];
            let sin = &angles.sin[row * half..(row + 1) * half];
            for head in heads.chunks_exact_mut(dim) {
                if self.neox {
                    let (first, second) = head.split_at_mut(half);
                    for i in 0..half {
                        let (a, b) = (first[i], second[i]);
                        first[i] = a * cos[i] - b * sin[i];
                        second[i] = a * sin[i] + b * cos[i];
                    }
                } else {
                    for (i, pair) in head.chunks_exact_mut(2).enumerate() {
                        let (a, b) = (pair[0], pair[1]);
                        pair[0] = a * cos[i] - b * sin[i];
                        pair[1] = a * sin[i] + b * cos[i];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_zero_is_identity_and_rotation_preserves_norm() {
        for neox in [false, true] {
            let rope = Rope::new(8, 10000.0, neox);
            let original: Vec<f32> = (0..16).map(|i| i as f32 * 0.25 - 1.0).collect();
            let mut x = original.clone();
            rope.apply(&mut x, &rope.angles(&[0]), 2);
            assert_eq!(x, original);
            rope.apply(&mut x, &rope.angles(&[123_456]), 2);
            let norm = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>();
            assert!((norm(&x) - norm(&original)).abs() < 1e-3);
        }
    }

    #[test]
    fn interleaved_pairs_rotate_adjacent_elements() {
        // d = 2: one frequency (1.0); position 1 rotates (1, 0) to (cos 1, sin 1)
        let rope = Rope::new(2, 10000.0, false);
        let mut x = vec![1.0, 0.0];
        rope.apply(&mut x, &rope.angles(&[1]), 1);
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[1] - 1f32.sin()).abs() < 1e-6);
    }
}
