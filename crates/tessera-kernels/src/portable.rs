//! The portable path, and the definition every path must equal bit for bit:
//! per output, eight f32 lanes (one per run of four bytes of a block) each
//! take `fma(d_w·d_x, Σ four byte products, lane)` block after block, then
//! the lanes are summed as `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`.

use crate::{Q8Activations, Q8_0Weights, BLOCK, LANES};
use std::ops::Range;

/// One output: row `row` of `w` against row `x_row` of `x`.
pub(crate) fn dot(w: &Q8_0Weights, row: usize, x: &Q8Activations, x_row: usize) -> f32 {
    let mut acc = [0f32; LANES];
    let blocks = w
        .row_quants(row)
        .chunks_exact(BLOCK)
        .zip(x.row_quants(x_row).chunks_exact(BLOCK))
        .zip(w.row_scales(row).iter().zip(x.row_scales(x_row)));
    for ((wq, xq), (dw, dx)) in blocks {
        let d = dw * dx;
        for (lane, acc) in acc.iter_mut().enumerate() {
            let run = lane * 4..lane * 4 + 4;
            let sum: i32 = wq[run.clone()]
                .iter()
                .zip(&xq[run])
                .map(|(&a, &b)| a as i32 * b as i32)
                .sum();
            *acc = d.mul_add(sum as f32, *acc);
        }
    }
    reduce_lanes(acc)
}

/// The lanes' sum in the order AVX2 code reduces a register.
pub(crate) fn reduce_lanes(a: [f32; LANES]) -> f32 {
    let halves = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
    (halves[0] + halves[2]) + (halves[1] + halves[3])
}

/// `out[j·stride + (r − rows.start)] = dot(r, j)` for every activation row `j`.
pub(crate) fn matmul(w: &Q8_0Weights, rows: Range<usize>, x: &Q8Activations, out: &mut [f32], stride: usize) {
    for j in 0..x.rows() {
        for (i, r) in rows.clone().enumerate() {
            out[j * stride + i] = dot(w, r, x, j);
        }
    }
}
