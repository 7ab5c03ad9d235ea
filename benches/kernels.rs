//! Criterion bench of the Q8_0, Q4_1 and Q4_0 matrix products at SmolLM2-135M's shapes (Q4_K and
//! Q6_K at 768/3072, since 576 holds no 256-value super-block), for
//! decode (one activation row: GB/s of weights read), batched decode and
//! draft verification (8 rows: GFLOP/s) and prefill (512 rows: GFLOP/s),
//! Tessera's kernel on one thread against candle's QMatMul (its pool pinned
//! to one thread as the runtime does).
//! `q4k_memory` and `q6k_memory` stream a Q4_K and a Q6_K matrix larger than
//! the L3 past 1 to 4 and 8 rows (the weights come from memory, as in the
//! model's forward). `q4k_qwen` and `q6k_qwen` run Qwen2.5-Coder-1.5B's
//! own matrix shapes at 1 and 8 rows (Tessera alone: what a decode step and
//! an 8-row step of that model multiply, set against the CPU's multiply
//! floor in BENCHMARKS.md).
//! Run: `cargo bench --bench kernels`.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use tessera_kernels::{Format, Path, Q8Activations, Weights};

/// (name, rows, cols) of the model's matrices (q/k/v and gate/up fused as the runtime fuses them).
const SHAPES: &[(&str, usize, usize)] = &[("qkv", 960, 576), ("gate_up", 3072, 576), ("down", 576, 1536)];

/// K-quant shapes (rows a multiple of 256 wide; SmolLM2's 576 is not).
const K_SHAPES: &[(&str, usize, usize)] = &[("k_up", 3072, 768), ("k_down", 768, 3072)];

/// Qwen2.5-Coder-1.5B's matrices (hidden 1536, 256-wide k and v, FFN 8960).
const QWEN_SHAPES: &[(&str, usize, usize)] = &[
    ("q_o", 1536, 1536),
    ("k_v", 256, 1536),
    ("gate_up", 8960, 1536),
    ("down", 1536, 8960),
];

fn data(len: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0).collect()
}

/// A `[rows, cols]` matrix of the bench's values quantized by candle to `dtype`.
fn quantized(dtype: GgmlDType, rows: usize, cols: usize) -> QTensor {
    let values = Tensor::from_vec(data(rows * cols), (rows, cols), &Device::Cpu).unwrap();
    QTensor::quantize(&values, dtype).unwrap()
}

/// Tessera's product of `weights` (`rows`, `cols`) against `n` activation
/// rows `x`, their quantization included as in the forward, as `id`.
fn bench_tessera(group: &mut BenchmarkGroup<'_, WallTime>, weights: &Weights, x: &[f32], n: usize, id: &str) {
    let (rows, cols) = (weights.rows(), x.len() / n);
    group.bench_function(BenchmarkId::new("tessera", id), |b| {
        let mut out = vec![0f32; n * rows];
        b.iter(|| {
            let activations = Q8Activations::quantize(x, n, cols).unwrap();
            weights
                .matmul(Path::detect(), 0..rows, &activations, &mut out, rows)
                .unwrap()
        })
    });
}

/// Tessera's weights for GGML bytes of `dtype`.
fn ours(dtype: GgmlDType, bytes: &[u8], rows: usize, cols: usize) -> Weights {
    let format = match dtype {
        GgmlDType::Q8_0 => Format::Q8_0,
        GgmlDType::Q4_0 => Format::Q4_0,
        GgmlDType::Q4_1 => Format::Q4_1,
        GgmlDType::Q4K => Format::Q4K,
        GgmlDType::Q6K => Format::Q6K,
        other => panic!("no Tessera kernel for {other:?}"),
    };
    Weights::from_ggml(format, bytes, rows, cols).unwrap()
}

/// One format: Tessera against candle at decode (n = 1), 8 rows and prefill
/// (n = 512; candle's prefill only where it is SIMD, `candle_prefill`), and
/// Tessera alone at 2 and 4 rows (decode of a few sequences, short drafts).
fn bench_format(c: &mut Criterion, dtype: GgmlDType, shapes: &[(&str, usize, usize)], candle_prefill: bool) {
    std::env::set_var("CANDLE_NUM_THREADS", "1");
    let mut group = c.benchmark_group(format!("{dtype:?}").to_lowercase());
    group.sample_size(10);
    for &(name, rows, cols) in shapes {
        let quantized = quantized(dtype, rows, cols);
        let weights = ours(dtype, &quantized.data().unwrap(), rows, cols);
        let candle = QMatMul::from_qtensor(quantized).unwrap();
        for n in [1usize, 2, 4, 8, 512] {
            let x = data(n * cols);
            let input = Tensor::from_slice(&x, (n, cols), &Device::Cpu).unwrap();
            group.throughput(match n {
                1 => Throughput::Bytes(weights.bytes() as u64),
                _ => Throughput::Elements((2 * rows * cols * n) as u64),
            });
            let id = format!("{name}/n={n}");
            bench_tessera(&mut group, &weights, &x, n, &id);
            // Candle at the row counts of decode, a full draft and prefill.
            if matches!(n, 1 | 8) || candle_prefill {
                group.bench_function(BenchmarkId::new("candle", &id), |b| {
                    b.iter(|| candle.forward(&input).unwrap())
                });
            }
        }
    }
    group.finish();
}

/// Tessera's K-quant product (`q4k_memory`, `q6k_memory`) over a matrix
/// that does not fit the L3 (16384×4096: 37.7 MB of Q4_K, 55.1 MB of Q6_K),
/// at the row counts of decode and drafts: the weights stream from memory,
/// so this shows how the reads are ordered and what prefetching does
/// (`x86_vnni::read_after`, `x86::prefetch_ahead`).
fn bench_from_memory(c: &mut Criterion, dtype: GgmlDType, name: &str) {
    let (rows, cols) = (16384, 4096);
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    let quantized = quantized(dtype, rows, cols);
    let weights = ours(dtype, &quantized.data().unwrap(), rows, cols);
    drop(quantized);
    for n in [1usize, 2, 3, 4, 8] {
        let activations = Q8Activations::quantize(&data(n * cols), n, cols).unwrap();
        let mut out = vec![0f32; n * rows];
        group.throughput(Throughput::Bytes(weights.bytes() as u64));
        group.bench_function(BenchmarkId::new("tessera", format!("n={n}")), |b| {
            b.iter(|| {
                weights
                    .matmul(Path::detect(), 0..rows, &activations, &mut out, rows)
                    .unwrap()
            })
        });
    }
    group.finish();
}

/// Tessera's product of `dtype` at Qwen2.5-Coder-1.5B's shapes, for one and
/// eight activation rows (their quantization included, as in the forward).
fn bench_model_shapes(c: &mut Criterion, dtype: GgmlDType, name: &str) {
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    for &(shape, rows, cols) in QWEN_SHAPES {
        let weights = ours(dtype, &quantized(dtype, rows, cols).data().unwrap(), rows, cols);
        for n in [1usize, 8] {
            group.throughput(Throughput::Elements((rows * cols * n) as u64));
            bench_tessera(&mut group, &weights, &data(n * cols), n, &format!("{shape}/n={n}"));
        }
    }
    group.finish();
}

fn bench(c: &mut Criterion) {
    bench_format(c, GgmlDType::Q8_0, SHAPES, true);
    // candle's Q4_1 product is scalar; its Q4_0 one is AVX2.
    bench_format(c, GgmlDType::Q4_1, SHAPES, false);
    bench_format(c, GgmlDType::Q4_0, SHAPES, true);
    bench_format(c, GgmlDType::Q4K, K_SHAPES, true);
    bench_format(c, GgmlDType::Q6K, K_SHAPES, true);
    bench_from_memory(c, GgmlDType::Q4K, "q4k_memory");
    bench_from_memory(c, GgmlDType::Q6K, "q6k_memory");
    bench_model_shapes(c, GgmlDType::Q4K, "q4k_qwen");
    bench_model_shapes(c, GgmlDType::Q6K, "q6k_qwen");
}

criterion_group!(benches, bench);
criterion_main!(benches);
