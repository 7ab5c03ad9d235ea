//! The portable path, and the definition every path must equal bit for bit:
//! per output, eight f32 lanes (one per run of four bytes of a block) each
//! take `fma(d_w·d_x, Σ four byte products, lane)` block after block, then
//! the lanes are summed as `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`.

use crate::q4::NibbleGroups;
use crate::q4_k::SUB_BLOCKS;
use crate::{Q2KWeights, Q3KWeights, Q4KWeights, Q6KWeights, Q8Activations, Q8_0Weights, BLOCK, LANES};
use std::ops::Range;

/// One output: row `row` of `w` against row `x_row` of `x`.
pub(crate) fn dot(w: &Q8_0Weights, row: usize, x: &Q8Activations, x_row: usize) -> f32 {
    let mut acc = [0f32; LANES];
    let blocks = x.row_quants(x_row).chunks_exact(BLOCK).zip(x.row_scales(x_row));
    for (b, (xq, dx)) in blocks.enumerate() {
        let wq = w.block_quants(row, b);
        let d = w.scale(row, b) * dx;
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

/// `out[j·stride + (r − rows.start)] = output(r, j)` for every weight row
/// `r` in `rows` and activation row `j < n`: the loop every portable product runs.
fn fill(rows: Range<usize>, n: usize, out: &mut [f32], stride: usize, output: impl Fn(usize, usize) -> f32) {
    for j in 0..n {
        for (i, r) in rows.clone().enumerate() {
            out[j * stride + i] = output(r, j);
        }
    }
}

/// The lanes' sum in the order AVX2 code reduces a register.
pub(crate) fn reduce_lanes(a: [f32; LANES]) -> f32 {
    let halves = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
    (halves[0] + halves[2]) + (halves[1] + halves[3])
}

/// `out[j·stride + (r − rows.start)] = dot(r, j)` for every activation row `j`.
pub(crate) fn matmul(w: &Q8_0Weights, rows: Range<usize>, x: &Q8Activations, out: &mut [f32], stride: usize) {
    fill(rows, x.rows(), out, stride, |r, j| dot(w, r, x, j));
}

/// One 4- or 5-bit output. Q4_1 and Q5_1 as candle's (GGML's) reference
/// computes them: per block, `sum += (Σq·y · d_w) · d_y + m_w · s_y`, blocks
/// in order, no fused operations. Q4_0 and Q5_0 as GGML's scalar reference
/// orders them (candle's Q5_0 is that code; its AVX2 Q4_0 sums lanes in
/// another order, so Q4_0 agrees to rounding): `sum += (Σ(q−o)·y · d_w) · d_y`
/// with `o` 8 or 16, the integer dot exact.
pub(crate) fn dot_q4(w: &NibbleGroups, row: usize, x: &Q8Activations, x_row: usize) -> f32 {
    let (quants, scales) = (x.row_quants(x_row), x.row_scales(x_row));
    let (sums, isums) = (x.row_sums(x_row), x.row_isums(x_row));
    let mut sum = 0f32;
    for b in 0..w.blocks() {
        let (d, m, _) = w.block(row, b);
        let y = &quants[b * BLOCK..(b + 1) * BLOCK];
        let dot: i32 = w
            .block_quants(row, b)
            .iter()
            .zip(y)
            .map(|(&q, &y)| q as i32 * y as i32)
            .sum();
        sum += if w.kind().has_min() {
            dot as f32 * d * scales[b] + m * sums[b]
        } else {
            (dot - w.kind().offset() * isums[b]) as f32 * d * scales[b]
        };
    }
    sum
}

/// See [`matmul`], for 4-bit weights.
pub(crate) fn matmul_q4(w: &NibbleGroups, rows: Range<usize>, x: &Q8Activations, out: &mut [f32], stride: usize) {
    fill(rows, x.rows(), out, stride, |r, j| dot_q4(w, r, x, j));
}

/// One Q4_K (or Q5_K) output against super-block activations (one scale
/// `D` per 256 values): per super-block, in integers, exactly,
/// `A = Σ_j scale_j·Σq·y` and `B = Σ_j min_j·Σy` over the eight sub-blocks,
/// then `sum += A·(d·D) − B·(dmin·D)`, unfused, super-blocks in order.
pub(crate) fn dot_q4_k(w: &Q4KWeights, row: usize, x: &Q8Activations, x_row: usize) -> f32 {
    let y = x.super_row(x_row);
    let mut sum = 0f32;
    for sb in 0..w.supers() {
        let (d, dmin, scales, mins) = w.super_factors(row, sb);
        let (mut a, mut b) = (0i32, 0i32);
        for j in 0..SUB_BLOCKS {
            let block = sb * SUB_BLOCKS + j;
            let dot = integer_dot(&w.block_quants(row, block), &y.quants[block * BLOCK..][..BLOCK]);
            a += scales[j] as i32 * dot;
            b += mins[j] as i32 * y.sums32[block] as i32;
        }
        let dy = y.scales[sb];
        sum += a as f32 * (d * dy) - b as f32 * (dmin * dy);
    }
    sum
}

/// `Σq·y`, exact.
fn integer_dot(q: &[u8], y: &[i8]) -> i32 {
    q.iter().zip(y).map(|(&q, &y)| q as i32 * y as i32).sum()
}

/// See [`matmul`], for Q4_K weights.
pub(crate) fn matmul_q4_k(w: &Q4KWeights, rows: Range<usize>, x: &Q8Activations, out: &mut [f32], stride: usize) {
    fill(rows, x.rows(), out, stride, |r, j| dot_q4_k(w, r, x, j));
}

/// One output of a half-block-scaled format (Q3_K): per block and half,
/// `sum += ((Σ(q−centre)·y)·ds)·d_y`, the integer dot exact, low half then
/// high half, blocks in order. `block(b)` gives a block's two scales and its
/// quants.
fn dot_centred_halves(
    blocks: usize,
    block: impl Fn(usize) -> ([f32; 2], [u8; BLOCK]),
    centre: i32,
    x: &Q8Activations,
    x_row: usize,
) -> f32 {
    let (quants, scales, halves) = (x.row_quants(x_row), x.row_scales(x_row), x.row_half_sums(x_row));
    let mut sum = 0f32;
    for b in 0..blocks {
        let (ds, q) = block(b);
        let y = &quants[b * BLOCK..(b + 1) * BLOCK];
        for half in 0..2 {
            let dot: i32 = (half * 16..half * 16 + 16).map(|v| q[v] as i32 * y[v] as i32).sum();
            sum += (dot - centre * halves[b][half]) as f32 * ds[half] * scales[b];
        }
    }
    sum
}

/// One Q6_K output against super-block activations (one scale `D` per 256
/// values): per super-block, in integers, exactly, `A = Σ_i scale_i·Σq·y`
/// and `B = Σ_i scale_i·Σy` over the sixteen runs of 16 values (quants
/// 0–63), then `sum += (A − 32·B)·(d·D)`, super-blocks in order.
pub(crate) fn dot_q6_k(w: &Q6KWeights, row: usize, x: &Q8Activations, x_row: usize) -> f32 {
    let y = x.super_row(x_row);
    let mut sum = 0f32;
    for sb in 0..w.supers() {
        let (d, scales) = w.super_factors(row, sb);
        let (mut a, mut b) = (0i32, 0i32);
        for j in 0..SUB_BLOCKS {
            let block = sb * SUB_BLOCKS + j;
            let quants = w.block_quants(row, block);
            for half in 0..2 {
                let (run, scale) = (2 * block + half, scales[2 * j + half] as i32);
                let values = half * 16..half * 16 + 16;
                a += scale * integer_dot(&quants[values], &y.quants[run * 16..][..16]);
                b += scale * y.sums16[run] as i32;
            }
        }
        sum += (a - 32 * b) as f32 * (d * y.scales[sb]);
    }
    sum
}

/// See [`matmul`], for Q6_K weights.
pub(crate) fn matmul_q6_k(w: &Q6KWeights, rows: Range<usize>, x: &Q8Activations, out: &mut [f32], stride: usize) {
    fill(rows, x.rows(), out, stride, |r, j| dot_q6_k(w, r, x, j));
}

/// One Q3_K output: quants 0–7 centred on 4 (see [`dot_centred_halves`]).
pub(crate) fn dot_q3_k(w: &Q3KWeights, row: usize, x: &Q8Activations, x_row: usize) -> f32 {
    dot_centred_halves(w.blocks(), |b| w.block(row, b), 4, x, x_row)
}

/// See [`matmul`], for Q3_K weights.
pub(crate) fn matmul_q3_k(w: &Q3KWeights, rows: Range<usize>, x: &Q8Activations, out: &mut [f32], stride: usize) {
    fill(rows, x.rows(), out, stride, |r, j| dot_q3_k(w, r, x, j));
}

/// One Q2_K output: per half block
/// `sum += ((Σq·y)·(d·scale) − Σy·(dmin·min))·d_y`, low then high, blocks in order.
pub(crate) fn dot_q2_k(w: &Q2KWeights, row: usize, x: &Q8Activations, x_row: usize) -> f32 {
    let (quants, scales, halves) = (x.row_quants(x_row), x.row_scales(x_row), x.row_half_sums(x_row));
    let mut sum = 0f32;
    for b in 0..w.blocks() {
        let (factors, q) = w.block(row, b);
        let y = &quants[b * BLOCK..(b + 1) * BLOCK];
        for (half, (scale, min)) in factors.into_iter().enumerate() {
            let dot: i32 = (half * 16..half * 16 + 16).map(|v| q[v] as i32 * y[v] as i32).sum();
            sum += (dot as f32 * scale - halves[b][half] as f32 * min) * scales[b];
        }
    }
    sum
}

/// See [`matmul`], for Q2_K weights.
pub(crate) fn matmul_q2_k(w: &Q2KWeights, rows: Range<usize>, x: &Q8Activations, out: &mut [f32], stride: usize) {
    fill(rows, x.rows(), out, stride, |r, j| dot_q2_k(w, r, x, j));
}
