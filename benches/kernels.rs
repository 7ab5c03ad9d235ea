//! Criterion bench of the Q8_0, Q4_1 and Q4_0 matrix products at SmolLM2-135M's shapes, for
//! decode (one activation row: GB/s of weights read) and prefill (512 rows:
//! GFLOP/s), Tessera's kernel on one thread against candle's QMatMul (its
//! pool pinned to one thread as the runtime does).
//! Run: `cargo bench --bench kernels`.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tessera_kernels::{
    matmul_q4_0, matmul_q4_1, matmul_q8_0, Path, Q4_0Weights, Q4_1Weights, Q8Activations, Q8_0Weights,
};

/// (name, rows, cols) of the model's matrices (q/k/v and gate/up fused as the runtime fuses them).
const SHAPES: &[(&str, usize, usize)] = &[("qkv", 960, 576), ("gate_up", 3072, 576), ("down", 576, 1536)];

fn data(len: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0).collect()
}

/// Tessera's product for GGML bytes of `dtype`: `(bytes held, kernel)`.
type Ours = (usize, Box<dyn Fn(&Q8Activations, &mut [f32])>);

fn ours(dtype: GgmlDType, bytes: &[u8], rows: usize, cols: usize) -> Ours {
    let path = Path::detect();
    match dtype {
        GgmlDType::Q8_0 => {
            let w = Q8_0Weights::from_ggml(bytes, rows, cols).unwrap();
            (
                w.bytes(),
                Box::new(move |a, out| matmul_q8_0(path, &w, 0..rows, a, out, rows).unwrap()),
            )
        }
        GgmlDType::Q4_1 => {
            let w = Q4_1Weights::from_ggml(bytes, rows, cols).unwrap();
            (
                w.bytes(),
                Box::new(move |a, out| matmul_q4_1(path, &w, 0..rows, a, out, rows).unwrap()),
            )
        }
        GgmlDType::Q4_0 => {
            let w = Q4_0Weights::from_ggml(bytes, rows, cols).unwrap();
            (
                w.bytes(),
                Box::new(move |a, out| matmul_q4_0(path, &w, 0..rows, a, out, rows).unwrap()),
            )
        }
        other => panic!("no Tessera kernel for {other:?}"),
    }
}

/// One format: Tessera against candle at decode (n = 1) and prefill (n = 512;
/// candle's prefill only where it is SIMD, `candle_prefill`).
fn bench_format(c: &mut Criterion, dtype: GgmlDType, candle_prefill: bool) {
    std::env::set_var("CANDLE_NUM_THREADS", "1");
    let mut group = c.benchmark_group(format!("{dtype:?}").to_lowercase());
    group.sample_size(10);
    for &(name, rows, cols) in SHAPES {
        let weights = Tensor::from_vec(data(rows * cols), (rows, cols), &Device::Cpu).unwrap();
        let quantized = QTensor::quantize(&weights, dtype).unwrap();
        let (bytes, kernel) = ours(dtype, &quantized.data().unwrap(), rows, cols);
        let candle = QMatMul::from_qtensor(quantized).unwrap();
        for n in [1usize, 512] {
            let x = data(n * cols);
            let input = Tensor::from_slice(&x, (n, cols), &Device::Cpu).unwrap();
            group.throughput(match n {
                1 => Throughput::Bytes(bytes as u64),
                _ => Throughput::Elements((2 * rows * cols * n) as u64),
            });
            let id = format!("{name}/n={n}");
            group.bench_function(BenchmarkId::new("tessera", &id), |b| {
                let mut out = vec![0f32; n * rows];
                b.iter(|| kernel(&Q8Activations::quantize(&x, n, cols).unwrap(), &mut out))
            });
            if n == 1 || candle_prefill {
                group.bench_function(BenchmarkId::new("candle", &id), |b| {
                    b.iter(|| candle.forward(&input).unwrap())
                });
            }
        }
    }
    group.finish();
}

fn bench(c: &mut Criterion) {
    bench_format(c, GgmlDType::Q8_0, true);
    // candle's Q4_1 product is scalar; its Q4_0 one is AVX2.
    bench_format(c, GgmlDType::Q4_1, false);
    bench_format(c, GgmlDType::Q4_0, true);
}

criterion_group!(benches, bench);
criterion_main!(benches);
