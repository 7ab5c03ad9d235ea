//! The per-tile work of the attention loop: one query head's scores against a
//! K tile, and the softmax weights `exp(score − max)`.
//!
//! The portable versions are the definition: `simd::dot(q, k) · scale` per key
//! and `f32::exp` per weight. The AVX2 versions give the same bits faster:
//! * scores for eight keys at once: each key keeps `simd::dot`'s two FMA
//!   accumulators, and the eight horizontal sums become one transposed
//!   reduction that performs the same additions in the same order;
//! * `exp` four lanes at a time in double precision, with glibc's `expf`
//!   algorithm (ARM's optimized-routines: 32-entry table of 2^(i/32), cubic
//!   polynomial) and the operation order and fusions of its FMA build, so a
//!   lane equals `f32::exp` bit for bit where that is glibc's `__expf_fma`
//!   (x86-64 glibc ≥ 2.27 on an FMA CPU: tested), glibc's underflow answers
//!   included; only overflow and NaN lanes call `f32::exp`. Elsewhere (musl,
//!   macOS, glibc told to avoid FMA) the two may differ in a rare last bit.
//!
//! Bit equality matters here: the native-Q4_1 greedy text equals llama.cpp's
//! with f32 K/V, and a last-bit change in attention flips it.

use crate::simd;
use half::f16;

/// `out[k] = dot(q, keys[k·dim..(k+1)·dim]) · scale` for each key of the tile.
pub(super) fn scaled_dots(q: &[f32], keys: &[f32], scale: f32, out: &mut [f32]) {
    for (score, key) in out.iter_mut().zip(keys.chunks_exact(q.len().max(1))) {
        *score = simd::dot(q, key) * scale;
    }
}

/// [`scaled_dots`] on half-precision keys.
pub(super) fn scaled_dots_f16(q: &[f32], keys: &[f16], scale: f32, out: &mut [f32]) {
    for (score, key) in out.iter_mut().zip(keys.chunks_exact(q.len().max(1))) {
        *score = simd::dot_f16(q, key) * scale;
    }
}

/// The largest of `x` (−∞ when empty; scores are never NaN).
pub(super) fn max(x: &[f32]) -> f32 {
    x.iter().fold(f32::NEG_INFINITY, |max, &s| max.max(s))
}

/// `out[i] = exp(x[i] − shift)`.
pub(super) fn exp_shifted(x: &[f32], shift: f32, out: &mut [f32]) {
    for (weight, value) in out.iter_mut().zip(x) {
        *weight = (value - shift).exp();
    }
}

/// The AVX2 builds (callers compiled with AVX2, FMA and F16C inline them).
#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use crate::simd::avx2::{load_f16, load_f32};
    use half::f16;
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    /// Four keys' eight lanes `v[key]` (`acc0 + acc1`) after `simd::dot`'s first
    /// two reduction steps (`lo + hi`, then lanes 0+2 and 1+3):
    /// `[b0_0, b0_1, b1_0, b1_1 | b2_0, b2_1, b3_0, b3_1]`.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) fn partial_sums(v: [__m256; 4]) -> __m256 {
        // Lanes i and i+4 of each key: [a0 | a2] and [a1 | a3].
        let w02 = _mm256_add_ps(
            _mm256_permute2f128_ps::<0x20>(v[0], v[2]),
            _mm256_permute2f128_ps::<0x31>(v[0], v[2]),
        );
        let w13 = _mm256_add_ps(
            _mm256_permute2f128_ps::<0x20>(v[1], v[3]),
            _mm256_permute2f128_ps::<0x31>(v[1], v[3]),
        );
        // Lanes 0+2 and 1+3 of each key's four.
        _mm256_add_ps(_mm256_shuffle_ps::<0x44>(w02, w13), _mm256_shuffle_ps::<0xEE>(w02, w13))
    }

    /// Sum of four keys' two accumulators: `simd::dot`'s `acc0 + acc1` per key,
    /// then its first two reduction steps (`lo + hi`, then lanes 0+2 and 1+3),
    /// for four keys at once: `[b0_0, b0_1, b1_0, b1_1 | b2_0, b2_1, b3_0, b3_1]`.
    macro_rules! four_key_partials {
        ($q:expr, $keys:expr, $dim:expr, $load:ident) => {{
            let (pq, pk, dim) = ($q, $keys, $dim);
            let mut acc0 = [_mm256_setzero_ps(); 4];
            let mut acc1 = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i < dim {
                // SAFETY: `i + 16 <= dim` (a multiple of 16), and the query holds `dim` floats.
                let (q0, q1) = unsafe { (_mm256_loadu_ps(pq.add(i)), _mm256_loadu_ps(pq.add(i + 8))) };
                for key in 0..4 {
                    // SAFETY: `pk` starts four whole rows of `dim` keys (the caller's
                    // bound), and `i + 16 <= dim`.
                    let (k0, k1) = unsafe {
                        let row = pk.add(key * dim + i);
                        ($load(row), $load(row.add(8)))
                    };
                    acc0[key] = _mm256_fmadd_ps(q0, k0, acc0[key]);
                    acc1[key] = _mm256_fmadd_ps(q1, k1, acc1[key]);
                }
                i += 16;
            }
            let v = [
                _mm256_add_ps(acc0[0], acc1[0]),
                _mm256_add_ps(acc0[1], acc1[1]),
                _mm256_add_ps(acc0[2], acc1[2]),
                _mm256_add_ps(acc0[3], acc1[3]),
            ];
            partial_sums(v)
        }};
    }

    /// Scores of a tile: eight keys per step (dimension a multiple of 16),
    /// the rest one by one with the scalar-reduction dot.
    macro_rules! scaled_dots_body {
        ($q:expr, $keys:expr, $scale:expr, $out:expr, $load:ident, $dot:path) => {{
            let (q, keys, out): (&[f32], _, &mut [f32]) = ($q, $keys, $out);
            let dim = q.len();
            let batched = if dim > 0 && dim % 16 == 0 { out.len() / 8 * 8 } else { 0 };
            let scale = _mm256_set1_ps($scale);
            // [c0, c1, c4, c5 | c2, c3, c6, c7] back to key order.
            let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
            assert!(keys.len() >= batched * dim, "a K tile shorter than its scores");
            let mut key = 0;
            while key < batched {
                // SAFETY: keys `key..key + 8` are `batched <= keys.len() / dim` whole rows
                // in (asserted above), so both pointers start four rows inside `keys`.
                let (first, second) = unsafe { (keys.as_ptr().add(key * dim), keys.as_ptr().add((key + 4) * dim)) };
                let low = four_key_partials!(q.as_ptr(), first, dim, $load);
                let high = four_key_partials!(q.as_ptr(), second, dim, $load);
                let sums = _mm256_add_ps(
                    _mm256_shuffle_ps::<0x88>(low, high),
                    _mm256_shuffle_ps::<0xDD>(low, high),
                );
                let sums = _mm256_permutevar8x32_ps(sums, order);
                // SAFETY: `key + 8 <= batched <= out.len()`.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(key), _mm256_mul_ps(sums, scale)) };
                key += 8;
            }
            for (k, score) in out.iter_mut().enumerate().skip(batched) {
                // SAFETY: this function enables `$dot`'s features, and it takes any lengths.
                *score = unsafe { $dot(q, &keys[k * dim..(k + 1) * dim]) } * $scale;
            }
        }};
    }

    /// See [`super::scaled_dots`].
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C. (Any lengths: scores past the whole
    /// keys in `keys` panic rather than read beyond it, and the batched path
    /// asserts its rows.)
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub unsafe fn scaled_dots(q: &[f32], keys: &[f32], scale: f32, out: &mut [f32]) {
        scaled_dots_body!(q, keys, scale, out, load_f32, crate::simd::avx2::dot)
    }

    /// See [`super::scaled_dots_f16`].
    ///
    /// # Safety
    /// As [`scaled_dots`].
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub unsafe fn scaled_dots_f16(q: &[f32], keys: &[f16], scale: f32, out: &mut [f32]) {
        scaled_dots_body!(q, keys, scale, out, load_f16, crate::simd::avx2::dot_f16)
    }

    /// See [`super::max`]: eight lanes at a time (a maximum does not depend on
    /// the order; without NaN, `maxps` agrees with `f32::max` up to the sign of
    /// a zero, which `x − max` does not see).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; any length.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub unsafe fn max(x: &[f32]) -> f32 {
        let whole = x.len() / 8 * 8;
        let mut lanes = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut i = 0;
        while i < whole {
            // SAFETY: `i + 8 <= whole <= x.len()`.
            lanes = _mm256_max_ps(lanes, unsafe { _mm256_loadu_ps(x.as_ptr().add(i)) });
            i += 8;
        }
        let half = _mm_max_ps(_mm256_castps256_ps128(lanes), _mm256_extractf128_ps::<1>(lanes));
        let half = _mm_max_ps(half, _mm_movehl_ps(half, half));
        let best = _mm_cvtss_f32(_mm_max_ss(half, _mm_shuffle_ps::<1>(half, half)));
        x[whole..].iter().fold(best, |max, &s| max.max(s))
    }

    /// 32/ln 2, 1.5·2^52 (rounds to an integer by addition) and the polynomial
    /// of 2^(r/32) − 1 in r, as glibc's `__exp2f_data` holds them.
    pub(super) const INV_LN2_N: f64 = f64::from_bits(0x4047_1547_652b_82fe);
    pub(super) const SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
    pub(super) const C0: f64 = f64::from_bits(0x3ebc_6af8_4b91_2394);
    pub(super) const C1: f64 = f64::from_bits(0x3f2e_bfce_50fa_c4f3);
    pub(super) const C2: f64 = f64::from_bits(0x3f96_2e42_ff0c_52d6);

    /// glibc's `expf` outside its main path: +0 below −0x1.9fe368p6 (≈ −103.97),
    /// the smallest subnormal below −0x1.9d1d9ep6 (≈ −103.28), and above
    /// 0x1.62e42ep6 (≈ 88.72) overflow; between them the main path (which
    /// the vector code computes the same way).
    pub(super) const ZERO_BELOW: f32 = f32::from_bits(0xc2cf_f1b4);
    pub(super) const TINY_BELOW: f32 = f32::from_bits(0xc2ce_8ecf);
    pub(super) const MAIN_ABOVE: f32 = f32::from_bits(0x42b1_7217);

    /// `bits(2^(i/32)) − (i << 47)`: adding `k << 47` to entry `k % 32` gives 2^(k/32).
    pub(super) fn table() -> &'static [u64; 32] {
        static TABLE: OnceLock<[u64; 32]> = OnceLock::new();
        TABLE.get_or_init(|| std::array::from_fn(|i| 2f64.powf(i as f64 / 32.0).to_bits() - ((i as u64) << 47)))
    }

    /// `exp` of four floats widened to doubles, glibc's main path, rounded to
    /// float (a safe `target_feature` function: it takes registers and the
    /// whole table, and reads nothing else).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn exp4(x: __m128, table: &[u64; 32]) -> __m128 {
        let xd = _mm256_cvtps_pd(x);
        let inv_ln2_n = _mm256_set1_pd(INV_LN2_N);
        let shift = _mm256_set1_pd(SHIFT);
        let shifted = _mm256_fmadd_pd(inv_ln2_n, xd, shift);
        let k = _mm256_castpd_si256(shifted);
        let kd = _mm256_sub_pd(shifted, shift);
        let r = _mm256_fmsub_pd(inv_ln2_n, xd, kd);
        let z = _mm256_fmadd_pd(r, _mm256_set1_pd(C0), _mm256_set1_pd(C1));
        let r2 = _mm256_mul_pd(r, r);
        let y = _mm256_fmadd_pd(r, _mm256_set1_pd(C2), _mm256_set1_pd(1.0));
        let y = _mm256_fmadd_pd(z, r2, y);
        let entry = lookup(table, k);
        let s = _mm256_castsi256_pd(_mm256_add_epi64(entry, _mm256_slli_epi64::<47>(k)));
        _mm256_cvtpd_ps(_mm256_mul_pd(y, s))
    }

    /// `table[k % 32]` for each of four lanes, by four scalar loads: a
    /// gather costs more (microcoded on AMD's Zen 1, where it was a third of
    /// the attention's `exp`).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn lookup(table: &[u64; 32], k: __m256i) -> __m256i {
        let (low, high) = (_mm256_castsi256_si128(k), _mm256_extracti128_si256::<1>(k));
        let entry = |lane: i64| table[lane as usize % 32] as i64;
        let first = _mm_set_epi64x(entry(_mm_extract_epi64::<1>(low)), entry(_mm_cvtsi128_si64(low)));
        let second = _mm_set_epi64x(entry(_mm_extract_epi64::<1>(high)), entry(_mm_cvtsi128_si64(high)));
        _mm256_set_m128i(second, first)
    }

    /// `exp` of four floats as glibc answers it: the vector main path, its
    /// underflow answers blended in; the mask holds the lanes (overflow, NaN)
    /// the caller must ask libm for.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn exp_group(v: __m128, table: &[u64; 32]) -> (__m128, i32) {
        let below_tiny = _mm_cmplt_ps(v, _mm_set1_ps(TINY_BELOW));
        let e = _mm_blendv_ps(exp4(v, table), _mm_set1_ps(f32::from_bits(1)), below_tiny);
        let e = _mm_andnot_ps(_mm_cmplt_ps(v, _mm_set1_ps(ZERO_BELOW)), e);
        let rest = !_mm_movemask_ps(_mm_cmple_ps(v, _mm_set1_ps(MAIN_ABOVE))) & 0xf;
        (e, rest)
    }

    /// See [`super::exp_shifted`] (over the shorter slice's length).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; any lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub unsafe fn exp_shifted(x: &[f32], shift: f32, out: &mut [f32]) {
        let n = x.len().min(out.len());
        let table = table();
        let minus = _mm_set1_ps(shift);
        let mut i = 0;
        while i < n {
            let lanes = (n - i).min(4);
            let rest = if lanes == 4 {
                // SAFETY: `i + 4 <= n`, inside both slices.
                let v = unsafe { _mm_loadu_ps(x.as_ptr().add(i)) };
                let (e, rest) = exp_group(_mm_sub_ps(v, minus), table);
                // SAFETY: as above.
                unsafe { _mm_storeu_ps(out.as_mut_ptr().add(i), e) };
                rest
            } else {
                // A short last group runs on a padded copy.
                let mut padded = [0f32; 4];
                padded[..lanes].copy_from_slice(&x[i..i + lanes]);
                // SAFETY: `padded` holds four floats.
                let v = unsafe { _mm_loadu_ps(padded.as_ptr()) };
                let (e, rest) = exp_group(_mm_sub_ps(v, minus), table);
                // SAFETY: as above.
                unsafe { _mm_storeu_ps(padded.as_mut_ptr(), e) };
                out[i..i + lanes].copy_from_slice(&padded[..lanes]);
                rest
            };
            // Overflow and NaN (never in a softmax): ask libm.
            if rest != 0 {
                for lane in (0..lanes).filter(|lane| rest & (1 << lane) != 0) {
                    out[i + lane] = (x[i + lane] - shift).exp();
                }
            }
            i += lanes;
        }
    }
}

/// The AVX-512 build of `exp` (CPUs on Tessera's AVX-512 kernel path): eight
/// lanes per double-precision vector instead of four, the table read by two
/// in-register permutes instead of a gather. The same operations in the same
/// order as [`avx2::exp_shifted`], so the same bits (glibc's `expf`).
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use super::avx2::{table, C0, C1, C2, INV_LN2_N, MAIN_ABOVE, SHIFT, TINY_BELOW, ZERO_BELOW};
    use std::arch::x86_64::*;

    /// The 32-entry table in four registers.
    #[derive(Clone, Copy)]
    pub(in crate::attention) struct Table([__m512i; 4]);

    /// The table, loaded (once per work item: a loop over many tiles hoists it).
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    #[inline]
    pub(in crate::attention) fn load_table() -> Table {
        let entries = table();
        // SAFETY: register `i < 4` loads entries `8i..8i + 8` of the 32.
        Table(std::array::from_fn(|i| unsafe {
            _mm512_loadu_si512(entries[8 * i..].as_ptr().cast())
        }))
    }

    /// `exp` of eight floats widened to doubles: glibc's main path, rounded to float.
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    #[inline]
    fn exp8(x: __m256, table: Table) -> __m256 {
        let xd = _mm512_cvtps_pd(x);
        let inv_ln2_n = _mm512_set1_pd(INV_LN2_N);
        let shift = _mm512_set1_pd(SHIFT);
        let shifted = _mm512_fmadd_pd(inv_ln2_n, xd, shift);
        let k = _mm512_castpd_si512(shifted);
        let kd = _mm512_sub_pd(shifted, shift);
        let r = _mm512_fmsub_pd(inv_ln2_n, xd, kd);
        let z = _mm512_fmadd_pd(r, _mm512_set1_pd(C0), _mm512_set1_pd(C1));
        let r2 = _mm512_mul_pd(r, r);
        let y = _mm512_fmadd_pd(r, _mm512_set1_pd(C2), _mm512_set1_pd(1.0));
        let y = _mm512_fmadd_pd(z, r2, y);
        // Entry k % 32: bits 0–3 pick within a half, bit 4 picks the half.
        let index = _mm512_and_si512(k, _mm512_set1_epi64(31));
        let low = _mm512_permutex2var_epi64(table.0[0], index, table.0[1]);
        let high = _mm512_permutex2var_epi64(table.0[2], index, table.0[3]);
        let upper = _mm512_test_epi64_mask(index, _mm512_set1_epi64(16));
        let entry = _mm512_mask_blend_epi64(upper, low, high);
        let s = _mm512_castsi512_pd(_mm512_add_epi64(entry, _mm512_slli_epi64::<47>(k)));
        _mm512_cvtpd_ps(_mm512_mul_pd(y, s))
    }

    /// `exp` of eight floats as glibc answers it (see `avx2::exp_group`).
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    #[inline]
    fn exp_group(v: __m256, table: Table) -> (__m256, i32) {
        let below_tiny = _mm256_cmp_ps::<_CMP_LT_OS>(v, _mm256_set1_ps(TINY_BELOW));
        let e = _mm256_blendv_ps(exp8(v, table), _mm256_set1_ps(f32::from_bits(1)), below_tiny);
        let e = _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LT_OS>(v, _mm256_set1_ps(ZERO_BELOW)), e);
        let rest = !_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LE_OS>(v, _mm256_set1_ps(MAIN_ABOVE))) & 0xff;
        (e, rest)
    }

    /// See [`super::exp_shifted`] (over the shorter slice's length).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA, F16C and AVX-512 F; any lengths.
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    #[inline]
    pub unsafe fn exp_shifted(x: &[f32], shift: f32, out: &mut [f32]) {
        exp_shifted_with(load_table(), x, shift, out)
    }

    /// [`exp_shifted`] with the table already loaded.
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    #[inline]
    pub(in crate::attention) fn exp_shifted_with(table: Table, x: &[f32], shift: f32, out: &mut [f32]) {
        let n = x.len().min(out.len());
        let minus = _mm256_set1_ps(shift);
        let mut i = 0;
        while i < n {
            let lanes = (n - i).min(8);
            let rest = if lanes == 8 {
                // SAFETY: `i + 8 <= n`, inside both slices.
                let v = unsafe { _mm256_loadu_ps(x.as_ptr().add(i)) };
                let (e, rest) = exp_group(_mm256_sub_ps(v, minus), table);
                // SAFETY: as above.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(i), e) };
                rest
            } else {
                // A short last group runs on a padded copy.
                let mut padded = [0f32; 8];
                padded[..lanes].copy_from_slice(&x[i..i + lanes]);
                // SAFETY: `padded` holds eight floats.
                let v = unsafe { _mm256_loadu_ps(padded.as_ptr()) };
                let (e, rest) = exp_group(_mm256_sub_ps(v, minus), table);
                // SAFETY: as above.
                unsafe { _mm256_storeu_ps(padded.as_mut_ptr(), e) };
                out[i..i + lanes].copy_from_slice(&padded[..lanes]);
                rest
            };
            // Overflow and NaN (never in a softmax): ask libm.
            if rest != 0 {
                for lane in (0..lanes).filter(|lane| rest & (1 << lane) != 0) {
                    out[i + lane] = (x[i + lane] - shift).exp();
                }
            }
            i += lanes;
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests;
