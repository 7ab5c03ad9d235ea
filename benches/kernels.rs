//! Criterion bench of the Q8_0 and Q4_1 matrix products at SmolLM2-135M's shapes, for
//! decode (one activation row: GB/s of weights read) and prefill (512 rows:
//! GFLOP/s), Tessera's kernel on one thread against candle's QMatMul (its
//! pool pinned to one thread as the runtime does).
//! Run: `cargo bench --bench kernels`.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tessera_kernels::{matmul_q4_1, matmul_q8_0, Path, Q4_1Weights, Q8Activations, Q8_0Weights};

/// (name, rows, cols) of the model's matrices (q/k/v and gate/up fused as the runtime fuses them).
const SHAPES: &[(&str, usize, usize)] = &[("qkv", 960, 576), ("gate_up", 3072, 576), ("down", 576, 1536)];

fn data(len: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0).collect()
}

fn bench(c: &mut Criterion) {
    std::env::set_var("CANDLE_NUM_THREADS", "1");
    let mut group = c.benchmark_group("q8_0");
    group.sample_size(20);
    for &(name, rows, cols) in SHAPES {
        let weights = Tensor::from_vec(data(rows * cols), (rows, cols), &Device::Cpu).unwrap();
        let quantized = QTensor::quantize(&weights, GgmlDType::Q8_0).unwrap();
        let ours = Q8_0Weights::from_ggml(&quantized.data().unwrap(), rows, cols).unwrap();
        let candle = QMatMul::from_qtensor(quantized).unwrap();
        for n in [1usize, 512] {
            let x = data(n * cols);
            let input = Tensor::from_slice(&x, (n, cols), &Device::Cpu).unwrap();
            let throughput = match n {
                1 => Throughput::Bytes(ours.bytes() as u64),
                _ => Throughput::Elements((2 * rows * cols * n) as u64),
            };
            group.throughput(throughput);
            let id = format!("{name}/n={n}");
            group.bench_function(BenchmarkId::new("tessera", &id), |b| {
                let mut out = vec![0f32; n * rows];
                b.iter(|| {
                    let activations = Q8Activations::quantize(&x, n, cols).unwrap();
                    matmul_q8_0(Path::detect(), &ours, 0..rows, &activations, &mut out, rows).unwrap();
                })
            });
            group.bench_function(BenchmarkId::new("candle", &id), |b| {
                b.iter(|| candle.forward(&input).unwrap())
            });
        }
    }
    group.finish();
}

/// Native Q4_1 (`--no-repack`): Tessera's kernel against candle's (scalar) one.
fn bench_q4_1(c: &mut Criterion) {
    let mut group = c.benchmark_group("q4_1");
    group.sample_size(10);
    for &(name, rows, cols) in SHAPES {
        let weights = Tensor::from_vec(data(rows * cols), (rows, cols), &Device::Cpu).unwrap();
        let quantized = QTensor::quantize(&weights, GgmlDType::Q4_1).unwrap();
        let ours = Q4_1Weights::from_ggml(&quantized.data().unwrap(), rows, cols).unwrap();
        let candle = QMatMul::from_qtensor(quantized).unwrap();
        for n in [1usize, 512] {
            let x = data(n * cols);
            let input = Tensor::from_slice(&x, (n, cols), &Device::Cpu).unwrap();
            group.throughput(match n {
                1 => Throughput::Bytes(ours.bytes() as u64),
                _ => Throughput::Elements((2 * rows * cols * n) as u64),
            });
            let id = format!("{name}/n={n}");
            group.bench_function(BenchmarkId::new("tessera", &id), |b| {
                let mut out = vec![0f32; n * rows];
                b.iter(|| {
                    let activations = Q8Activations::quantize(&x, n, cols).unwrap();
                    matmul_q4_1(Path::detect(), &ours, 0..rows, &activations, &mut out, rows).unwrap();
                })
            });
            if n == 1 {
                group.bench_function(BenchmarkId::new("candle", &id), |b| {
                    b.iter(|| candle.forward(&input).unwrap())
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench, bench_q4_1);
criterion_main!(benches);
