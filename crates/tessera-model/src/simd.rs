//! Vector primitives for the CPU kernels, with AVX2+FMA(+F16C) paths chosen at
//! run time and a portable fallback (no process-wide switch: a test that wants
//! the portable builds asks for them by argument, see `attention::Builds`,
//! so tests running side by side never see each other's choice). The `_f16`
//! variants read their second operand as `f16` (the K/V cache) and widen it
//! exactly, so they equal the `f32` primitive on the widened values.

use half::f16;

/// Name of the path in use: `"avx2"` or `"portable"`.
pub fn active_path() -> &'static str {
    if use_avx2() {
        "avx2"
    } else {
        "portable"
    }
}

/// Which CPU kernels run, for a load line: the matrix products' path
/// (`TESSERA_KERNELS` may force a lesser one) and the attention and vector
/// builds' path.
pub fn kernels_in_use() -> String {
    let products = match tessera_kernels::Path::detect() {
        tessera_kernels::Path::Avx512Vnni => format!(
            "AVX-512 VNNI (K-quants at one activation row and from {}; AVX2 otherwise)",
            tessera_kernels::VNNI_MIN_ROWS
        ),
        tessera_kernels::Path::Avx2 => "AVX2".to_owned(),
        tessera_kernels::Path::Portable => "portable".to_owned(),
    };
    let vectors = if use_avx512() { "avx-512" } else { active_path() };
    format!("matrix products {products}, attention {vectors}")
}

/// Whether the AVX-512 builds run: the AVX2 ones do, and the kernels' path is
/// AVX-512 (`TESSERA_KERNELS=avx2` turns both off).
#[inline]
pub(crate) fn use_avx512() -> bool {
    use_avx2() && tessera_kernels::Path::detect() == tessera_kernels::Path::Avx512Vnni
}

/// Whether the AVX2 kernels run (the CPU has AVX2, FMA and F16C).
pub(crate) fn use_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Dot product of two equal-length slices.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    #[cfg(target_arch = "x86_64")]
    if use_avx2() {
        // SAFETY: the CPU supports AVX2, FMA and F16C (checked above).
        return unsafe { avx2::dot(a, b) };
    }
    portable::dot(a, b)
}

/// `y += alpha * x` over equal-length slices.
#[inline]
pub fn axpy(y: &mut [f32], alpha: f32, x: &[f32]) {
    debug_assert_eq!(y.len(), x.len());
    #[cfg(target_arch = "x86_64")]
    if use_avx2() {
        // SAFETY: the CPU supports AVX2, FMA and F16C (checked above).
        return unsafe { avx2::axpy(y, alpha, x) };
    }
    portable::axpy(y, alpha, x)
}

/// `y += alphas[i] · rows[i]` for each row of `rows` (rows of `y.len()`), in
/// order: the same arithmetic as one [`axpy`] per row.
#[inline]
pub fn axpy_rows(y: &mut [f32], alphas: &[f32], rows: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if use_avx2() {
        // SAFETY: the CPU supports AVX2, FMA and F16C (checked above).
        return unsafe { avx2::axpy_rows(y, alphas, rows) };
    }
    for (alpha, row) in alphas.iter().zip(rows.chunks_exact(y.len().max(1))) {
        portable::axpy(y, *alpha, row);
    }
}

/// [`dot`] with `b` in half precision.
#[inline]
pub fn dot_f16(a: &[f32], b: &[f16]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    #[cfg(target_arch = "x86_64")]
    if use_avx2() {
        // SAFETY: the CPU supports AVX2, FMA and F16C (checked above).
        return unsafe { avx2::dot_f16(a, b) };
    }
    portable::dot_f16(a, b)
}

/// [`axpy_rows`] with `rows` in half precision.
#[inline]
pub fn axpy_rows_f16(y: &mut [f32], alphas: &[f32], rows: &[f16]) {
    #[cfg(target_arch = "x86_64")]
    if use_avx2() {
        // SAFETY: the CPU supports AVX2, FMA and F16C (checked above).
        return unsafe { avx2::axpy_rows_f16(y, alphas, rows) };
    }
    for (alpha, row) in alphas.iter().zip(rows.chunks_exact(y.len().max(1))) {
        portable::axpy_f16(y, *alpha, row);
    }
}

/// `y *= alpha`.
#[inline]
pub fn scale(y: &mut [f32], alpha: f32) {
    for value in y {
        *value *= alpha;
    }
}

mod portable {
    use half::f16;
    /// Eight independent accumulators so the compiler can vectorize without reassociating.
    pub fn dot(a: &[f32], b: &[f32]) -> f32 {
        let mut acc = [0f32; 8];
        let chunks = a.len() / 8 * 8;
        for (ca, cb) in a[..chunks].chunks_exact(8).zip(b[..chunks].chunks_exact(8)) {
            for lane in 0..8 {
                acc[lane] += ca[lane] * cb[lane];
            }
        }
        let tail: f32 = a[chunks..].iter().zip(&b[chunks..]).map(|(x, y)| x * y).sum();
        acc.iter().sum::<f32>() + tail
    }

    pub fn axpy(y: &mut [f32], alpha: f32, x: &[f32]) {
        for (yv, xv) in y.iter_mut().zip(x) {
            *yv += alpha * xv;
        }
    }

    /// [`dot`] on `b` widened from half precision, same order.
    pub fn dot_f16(a: &[f32], b: &[f16]) -> f32 {
        let mut acc = [0f32; 8];
        let chunks = a.len() / 8 * 8;
        for (ca, cb) in a[..chunks].chunks_exact(8).zip(b[..chunks].chunks_exact(8)) {
            for lane in 0..8 {
                acc[lane] += ca[lane] * cb[lane].to_f32();
            }
        }
        let tail: f32 = a[chunks..].iter().zip(&b[chunks..]).map(|(x, y)| x * y.to_f32()).sum();
        acc.iter().sum::<f32>() + tail
    }

    pub fn axpy_f16(y: &mut [f32], alpha: f32, x: &[f16]) {
        for (yv, xv) in y.iter_mut().zip(x) {
            *yv += alpha * xv.to_f32();
        }
    }
}

/// The AVX2 primitives, for kernels that are themselves compiled with AVX2,
/// FMA and F16C enabled (there they inline; called from elsewhere they do not).
/// Each body is written once (a macro over how eight elements of the second
/// operand load and how one widens) and built for `f32` and `f16` operands.
///
/// The slice functions need only that the CPU has AVX2, FMA and F16C: they
/// bound every access by the slices' own lengths (the shorter operand
/// decides; `axpy_rows` takes whole rows of `y.len()`).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use half::f16;
    use std::arch::x86_64::*;

    /// Eight floats at `p`.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C, and `p` points at 8 readable `f32`
    /// (no alignment needed).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(crate) unsafe fn load_f32(p: *const f32) -> __m256 {
        // SAFETY: an unaligned load of the caller's 8 readable floats.
        unsafe { _mm256_loadu_ps(p) }
    }

    /// Eight halves at `p`, widened.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C, and `p` points at 8 readable `f16`
    /// (no alignment needed).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(crate) unsafe fn load_f16(p: *const f16) -> __m256 {
        // SAFETY: an unaligned load of the caller's 8 readable halves (16 bytes).
        _mm256_cvtph_ps(unsafe { _mm_loadu_si128(p.cast()) })
    }

    /// `Σ a·b` with two 8-lane FMA accumulators, a tree sum, then the scalar tail.
    macro_rules! dot_body {
        ($a:expr, $b:expr, $load:ident, $widen:expr) => {{
            let n = $a.len().min($b.len());
            let (pa, pb) = ($a.as_ptr(), $b.as_ptr());
            let mut acc0 = _mm256_setzero_ps();
            let mut acc1 = _mm256_setzero_ps();
            let mut i = 0;
            while i + 16 <= n {
                // SAFETY: both slices hold at least `n >= i + 16` elements.
                let (a0, b0, a1, b1) = unsafe {
                    let (a, b) = (pa.add(i), pb.add(i));
                    (_mm256_loadu_ps(a), $load(b), _mm256_loadu_ps(a.add(8)), $load(b.add(8)))
                };
                acc0 = _mm256_fmadd_ps(a0, b0, acc0);
                acc1 = _mm256_fmadd_ps(a1, b1, acc1);
                i += 16;
            }
            if i + 8 <= n {
                // SAFETY: both slices hold at least `n >= i + 8` elements.
                let (a0, b0) = unsafe { (_mm256_loadu_ps(pa.add(i)), $load(pb.add(i))) };
                acc0 = _mm256_fmadd_ps(a0, b0, acc0);
                i += 8;
            }
            let mut sum = horizontal_sum(_mm256_add_ps(acc0, acc1));
            while i < n {
                // SAFETY: `i < n`, inside both slices.
                let (a, b) = unsafe { (*pa.add(i), *pb.add(i)) };
                sum += a * $widen(b);
                i += 1;
            }
            sum
        }};
    }

    /// `y += alpha·x`: 8-lane FMAs, then the scalar tail (multiply, add).
    macro_rules! axpy_body {
        ($y:expr, $alpha:expr, $x:expr, $load:ident, $widen:expr) => {{
            let n = $y.len().min($x.len());
            let (py, px) = ($y.as_mut_ptr(), $x.as_ptr());
            let va = _mm256_set1_ps($alpha);
            let mut i = 0;
            while i + 8 <= n {
                // SAFETY: both slices hold at least `n >= i + 8` elements; `y` is
                // borrowed mutably, so nothing else sees the store.
                unsafe {
                    let v = _mm256_fmadd_ps(va, $load(px.add(i)), _mm256_loadu_ps(py.add(i)));
                    _mm256_storeu_ps(py.add(i), v);
                }
                i += 8;
            }
            while i < n {
                // SAFETY: `i < n`, inside both slices.
                unsafe { *py.add(i) += $alpha * $widen(*px.add(i)) };
                i += 1;
            }
        }};
    }

    /// `y += Σ alphas[i]·rows[i]`: for rows a multiple of 64 wide (the usual
    /// head sizes) each 64-wide panel of `y` stays in eight registers across
    /// the rows instead of a load and a store per row; each element still
    /// takes one `fma(alpha, x, y)` per row in order, so results equal one
    /// `axpy` per row.
    macro_rules! axpy_rows_body {
        ($y:expr, $alphas:expr, $rows:expr, $load:ident, $any_width:ident) => {{
            const PANEL: usize = 64;
            let width = $y.len();
            if width == 0 || width % PANEL != 0 {
                // Out of line, so the panel loop stays small enough to inline.
                // SAFETY: it needs only the features this function enables.
                return unsafe { $any_width($y, $alphas, $rows) };
            }
            for panel in (0..width).step_by(PANEL) {
                // SAFETY: `panel + PANEL <= width = y.len()`.
                let py = unsafe { $y.as_mut_ptr().add(panel) };
                let mut acc = [_mm256_setzero_ps(); PANEL / 8];
                for (k, lanes) in acc.iter_mut().enumerate() {
                    // SAFETY: `8k + 8 <= PANEL` floats of the panel.
                    *lanes = unsafe { _mm256_loadu_ps(py.add(8 * k)) };
                }
                for (alpha, row) in $alphas.iter().zip($rows.chunks_exact(width)) {
                    let va = _mm256_set1_ps(*alpha);
                    for (k, lanes) in acc.iter_mut().enumerate() {
                        // SAFETY: `row` holds `width >= panel + 8k + 8` elements.
                        let x = unsafe { $load(row.as_ptr().add(panel + 8 * k)) };
                        *lanes = _mm256_fmadd_ps(va, x, *lanes);
                    }
                }
                for (k, lanes) in acc.iter().enumerate() {
                    // SAFETY: as the loads above; `y` is borrowed mutably.
                    unsafe { _mm256_storeu_ps(py.add(8 * k), *lanes) };
                }
            }
        }};
    }

    fn same(x: f32) -> f32 {
        x
    }

    fn widen(x: f16) -> f32 {
        x.to_f32()
    }

    /// See [`super::dot`] (over the shorter slice's length).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; any lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        dot_body!(a, b, load_f32, same)
    }

    /// See [`super::dot_f16`]: [`dot`]'s order on the widened values.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; any lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub unsafe fn dot_f16(a: &[f32], b: &[f16]) -> f32 {
        dot_body!(a, b, load_f16, widen)
    }

    /// See [`super::axpy`] (over the shorter slice's length).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; any lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub unsafe fn axpy(y: &mut [f32], alpha: f32, x: &[f32]) {
        axpy_body!(y, alpha, x, load_f32, same)
    }

    /// See [`super::axpy_rows`] (`rows` taken in whole rows of `y.len()`).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; any lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub unsafe fn axpy_rows(y: &mut [f32], alphas: &[f32], rows: &[f32]) {
        axpy_rows_body!(y, alphas, rows, load_f32, axpy_rows_any_width)
    }

    /// See [`super::axpy_rows_f16`]: [`axpy_rows`]'s arithmetic on the widened
    /// rows.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; any lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub unsafe fn axpy_rows_f16(y: &mut [f32], alphas: &[f32], rows: &[f16]) {
        axpy_rows_body!(y, alphas, rows, load_f16, axpy_rows_any_width_f16)
    }

    /// [`axpy_rows`] for rows not a multiple of 64 wide: one [`axpy`] per row.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; any lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline(never)]
    unsafe fn axpy_rows_any_width(y: &mut [f32], alphas: &[f32], rows: &[f32]) {
        for (alpha, row) in alphas.iter().zip(rows.chunks_exact(y.len().max(1))) {
            axpy_body!(y, *alpha, row, load_f32, same);
        }
    }

    /// [`axpy_rows_f16`] for rows not a multiple of 64 wide.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; any lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline(never)]
    unsafe fn axpy_rows_any_width_f16(y: &mut [f32], alphas: &[f32], rows: &[f16]) {
        for (alpha, row) in alphas.iter().zip(rows.chunks_exact(y.len().max(1))) {
            axpy_body!(y, *alpha, row, load_f16, widen);
        }
    }

    /// The lanes' sum: `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`. It takes only
    /// a register, so it is a safe `target_feature` function: code compiled
    /// with these features calls it freely, other code only in `unsafe`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(crate) fn horizontal_sum(v: __m256) -> f32 {
        let hi = _mm256_extractf128_ps(v, 1);
        let lo = _mm256_castps256_ps128(v);
        let s = _mm_add_ps(hi, lo);
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simd_and_portable_agree_on_odd_lengths() {
        for n in [1usize, 7, 8, 15, 16, 17, 64, 67] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let fast = dot(&a, &b);
            let slow = portable::dot(&a, &b);
            assert!((fast - slow).abs() < 1e-4, "n={n}: {fast} vs {slow}");
            let mut y1 = b.clone();
            let mut y2 = b.clone();
            axpy(&mut y1, 0.5, &a);
            portable::axpy(&mut y2, 0.5, &a);
            assert!(y1.iter().zip(&y2).all(|(x, y)| (x - y).abs() < 1e-6));
        }
    }

    /// `(dot, axpy_rows)` of `q` against `rows` through the f16 primitives and
    /// the f32 ones on the widened rows, on one path, without the global switch.
    fn both_precisions(avx: bool, q: &[f32], alphas: &[f32], rows16: &[f16]) -> [(f32, Vec<f32>); 2] {
        let rows32: Vec<f32> = rows16.iter().map(|x| x.to_f32()).collect();
        let width = q.len();
        let (mut y16, mut y32) = (q.to_vec(), q.to_vec());
        #[cfg(target_arch = "x86_64")]
        if avx {
            // SAFETY: the caller checked AVX2, FMA and F16C.
            unsafe {
                avx2::axpy_rows_f16(&mut y16, alphas, rows16);
                avx2::axpy_rows(&mut y32, alphas, &rows32);
                return [
                    (avx2::dot_f16(q, &rows16[..width]), y16),
                    (avx2::dot(q, &rows32[..width]), y32),
                ];
            }
        }
        for (alpha, (r16, r32)) in alphas
            .iter()
            .zip(rows16.chunks_exact(width).zip(rows32.chunks_exact(width)))
        {
            portable::axpy_f16(&mut y16, *alpha, r16);
            portable::axpy(&mut y32, *alpha, r32);
        }
        [
            (portable::dot_f16(q, &rows16[..width]), y16),
            (portable::dot(q, &rows32[..width]), y32),
        ]
    }

    #[test]
    fn f16_primitives_equal_the_f32_ones_on_widened_values_on_both_paths() {
        let paths = if use_avx2() { vec![true, false] } else { vec![false] };
        for width in [64usize, 7, 16, 67] {
            let rows16: Vec<f16> = (0..5 * width).map(|i| f16::from_f32((i as f32 * 0.29).sin())).collect();
            let q: Vec<f32> = (0..width).map(|i| (i as f32 * 0.13).cos()).collect();
            let alphas = [0.5f32, -1.25, 3.0, 0.001, 7.5];
            for &avx in &paths {
                let [(d16, y16), (d32, y32)] = both_precisions(avx, &q, &alphas, &rows16);
                assert_eq!(d16.to_bits(), d32.to_bits(), "width {width} avx2={avx}");
                let same = y16.iter().zip(&y32).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "width {width} avx2={avx}");
            }
        }
    }

    #[test]
    fn axpy_rows_equals_one_axpy_per_row_bit_for_bit() {
        for width in [64usize, 7, 16] {
            let rows: Vec<f32> = (0..5 * width).map(|i| (i as f32 * 0.29).sin()).collect();
            let alphas = [0.5f32, -1.25, 3.0, 0.001, 7.5];
            let mut one_by_one: Vec<f32> = (0..width).map(|i| (i as f32).cos()).collect();
            let mut together = one_by_one.clone();
            for (alpha, row) in alphas.iter().zip(rows.chunks_exact(width)) {
                axpy(&mut one_by_one, *alpha, row);
            }
            axpy_rows(&mut together, &alphas, &rows);
            assert!(
                one_by_one
                    .iter()
                    .zip(&together)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "width {width}"
            );
        }
    }
}
