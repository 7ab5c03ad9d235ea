//! The device path (`--device cuda` code: candle tensors, device K/V pools, the
//! two cache kernels as custom ops) run by candle on the CPU (`candle-cpu`),
//! against Tessera's CPU path on the real model: the same logits within a
//! tolerance, the same greedy tokens, prefix reuse with its copy-on-write on
//! the device pools, and a prefix cache saved from device pools that the CPU
//! path restores (one file format for every device). The CUDA kernels
//! themselves run only on a GPU: `scripts/gpu-check.sh`.

use std::sync::OnceLock;
use tessera_model::{
    load_prefix_cache, save_prefix_cache, DeviceSpec, KvDtype, LoadOptions, LoadedModel, LogitsFor, ModelError,
    Runtime, Sequence,
};

/// The default model on the device path, run by candle on the CPU.
fn device_model() -> &'static LoadedModel {
    static MODEL: OnceLock<LoadedModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        crate::common::load(&LoadOptions {
            device: DeviceSpec::CandleCpu,
            ..LoadOptions::default()
        })
    })
}

/// Logits of every prompt position, computed in chunks of 16 from an empty cache.
fn all_logits(loaded: &LoadedModel, prompt: &[u32], dtype: KvDtype) -> Vec<Vec<f32>> {
    let (mut pool, mut kv) = crate::common::cache_of(loaded, prompt.len(), dtype);
    let model = &loaded.model;
    let mut seq = Sequence::new();
    let logits = seq
        .feed(
            Runtime {
                model,
                pool: &mut pool,
                kv: &mut kv,
            },
            prompt,
            16,
            LogitsFor::All,
        )
        .unwrap();
    seq.release(&mut pool);
    (0..logits.num_rows()).map(|row| logits.row(row).to_vec()).collect()
}

/// Per position: (max |Δlogit| over all positions, positions whose argmax agrees).
fn compare(host: &[Vec<f32>], device: &[Vec<f32>]) -> (f32, usize) {
    assert_eq!(host.len(), device.len());
    host.iter().zip(device).fold((0f32, 0), |(worst, agree), (h, d)| {
        let diff = h.iter().zip(d).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        (
            worst.max(diff),
            agree + usize::from(crate::common::argmax(h) == crate::common::argmax(d)),
        )
    })
}

#[test]
fn the_device_path_gives_the_cpu_paths_logits() {
    let prompt = crate::common::model()
        .tokenizer
        .encode(&crate::common::long_prompt())
        .unwrap();
    assert!(prompt.len() > 300, "the prompt spans two attention partitions");
    assert_eq!(device_model().model.device(), DeviceSpec::CandleCpu);
    // Dense weights: plain f32 arithmetic on both paths, so close logits and every
    // argmax. With f16 K/V a last-bit difference can round a K/V element to the
    // neighbouring f16 (a relative 1e-3 step), hence the looser bound (as against candle).
    let dense = |device| {
        crate::common::load(&LoadOptions {
            dequantize: true,
            device,
            ..LoadOptions::default()
        })
    };
    let (host, device) = (dense(DeviceSpec::Cpu), dense(DeviceSpec::CandleCpu));
    for (dtype, tolerance) in [(KvDtype::F32, 1e-3), (KvDtype::F16, 0.1)] {
        let (worst, agree) = compare(&all_logits(&host, &prompt, dtype), &all_logits(&device, &prompt, dtype));
        eprintln!(
            "dense, {dtype} K/V: max |Δlogit| {worst:.2e}, argmax agrees at {agree}/{}",
            prompt.len()
        );
        assert_eq!(agree, prompt.len(), "dense, {dtype}: every argmax agrees");
        assert!(worst < tolerance, "dense, {dtype}: logits differ by {worst}");
    }
    // Quantized weights (the default): activations are quantized to 8 bits before
    // every matmul, so a last-bit difference in an attention sum can become a whole
    // quantization step; agreement is statistical, as against candle's own llama.
    for dtype in [KvDtype::F32, KvDtype::F16] {
        let host = all_logits(crate::common::model(), &prompt, dtype);
        let (worst, agree) = compare(&host, &all_logits(device_model(), &prompt, dtype));
        eprintln!(
            "Q4_1, {dtype} K/V: max |Δlogit| {worst:.2e}, argmax agrees at {agree}/{}",
            prompt.len()
        );
        assert!(
            agree * 100 >= prompt.len() * 95,
            "Q4_1, {dtype}: argmax agrees at {agree}"
        );
        assert!(worst < 3.0, "Q4_1, {dtype}: logits differ by {worst}");
    }
}

#[test]
fn the_device_path_generates_the_cpu_paths_greedy_tokens() {
    let prompt = crate::common::model()
        .tokenizer
        .encode(&crate::common::chat_prompt("What is the capital of France?"))
        .unwrap();
    let host = crate::common::greedy(crate::common::model(), &prompt, 24);
    let device = crate::common::greedy(device_model(), &prompt, 24);
    assert_eq!(host, device);
}

#[test]
fn prefix_reuse_copies_partial_blocks_on_the_device() {
    let loaded = device_model();
    let model = &loaded.model;
    let first = loaded.tokenizer.encode(&crate::common::long_prompt()).unwrap();
    // Shares a prefix ending 5 tokens into a block: full blocks plus a copy-on-write.
    let shared = (first.len() / 16 - 1) * 16 + 5;
    let mut second = first[..shared].to_vec();
    second.extend(
        loaded
            .tokenizer
            .encode(" And now for something else entirely.")
            .unwrap(),
    );
    let (mut pool, mut kv) = crate::common::cache_of(loaded, 2 * first.len() + second.len(), KvDtype::F16);
    let baseline = pool.num_allocatable();
    let mut run = |prompt: &[u32]| {
        let (mut seq, cached) = Sequence::start(
            Runtime {
                model,
                pool: &mut pool,
                kv: &mut kv,
            },
            prompt,
        );
        let logits = seq
            .feed(
                Runtime {
                    model,
                    pool: &mut pool,
                    kv: &mut kv,
                },
                &prompt[cached..],
                64,
                LogitsFor::Last,
            )
            .unwrap();
        seq.release(&mut pool);
        (cached, logits.row(0).to_vec())
    };
    let (cached_first, _) = run(&first);
    let (cached_second, warm) = run(&second);
    assert_eq!((cached_first, cached_second), (0, shared));
    let cold = all_logits(loaded, &second, KvDtype::F16).pop().unwrap();
    assert_eq!(warm, cold, "a warm start gives the cold logits bit for bit");
    pool.check_invariants().unwrap();
    assert_eq!(pool.num_allocatable(), baseline, "every block is back (free or cached)");
}

#[test]
fn a_prefix_cache_saved_from_device_pools_restores_on_the_cpu() {
    let prompt = crate::common::model()
        .tokenizer
        .encode(&crate::common::long_prompt())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prefix.cache");
    let fingerprint = tessera_model::model_fingerprint(&crate::common::model_path()).unwrap();
    let (device, host) = (device_model(), crate::common::model());

    let (mut pool, mut kv) = crate::common::cache_of(device, 800, KvDtype::F16);
    let mut seq = Sequence::new();
    let runtime = Runtime {
        model: &device.model,
        pool: &mut pool,
        kv: &mut kv,
    };
    seq.feed(runtime, &prompt, 128, LogitsFor::None).unwrap();
    seq.release(&mut pool);
    let saved = save_prefix_cache(&file, &pool, &kv, &fingerprint).unwrap();
    assert_eq!(saved, prompt.len().div_ceil(16));

    let (mut host_pool, mut host_kv) = crate::common::cache_of(host, 800, KvDtype::F16);
    assert_eq!(
        load_prefix_cache(&file, &mut host_pool, &mut host_kv, &fingerprint).unwrap(),
        saved
    );
    // The rows the CPU cache holds are the device rows, bit for bit (blocks
    // matched by their tokens, which are distinct in this prompt).
    let host_entries = host_pool.index_entries();
    for (device_block, _, tokens) in pool.index_entries() {
        let matches: Vec<_> = host_entries.iter().filter(|entry| entry.2 == tokens).collect();
        assert_eq!(matches.len(), 1, "one restored block holds {tokens:?}");
        for layer in 0..kv.num_layers() {
            let (mut from_device, mut restored) = (Vec::new(), Vec::new());
            kv.append_block_bytes(layer, device_block, &mut from_device).unwrap();
            host_kv.append_block_bytes(layer, matches[0].0, &mut restored).unwrap();
            assert!(from_device == restored, "block {device_block:?} layer {layer}");
        }
    }
    let (mut pool, mut kv) = (host_pool, host_kv);
    let (mut seq, cached) = Sequence::start(
        Runtime {
            model: &host.model,
            pool: &mut pool,
            kv: &mut kv,
        },
        &prompt,
    );
    assert_eq!(
        cached,
        prompt.len() - 1,
        "all but the last prompt token come from the file"
    );
    let warm = seq
        .feed(
            Runtime {
                model: &host.model,
                pool: &mut pool,
                kv: &mut kv,
            },
            &prompt[cached..],
            1,
            LogitsFor::Last,
        )
        .unwrap();
    seq.release(&mut pool);
    assert!(warm.row(0).iter().all(|x| x.is_finite()));
    pool.check_invariants().unwrap();
}

#[test]
fn a_model_refuses_a_cache_on_another_device() {
    let (mut pool, mut kv) = crate::common::cache_of(crate::common::model(), 64, KvDtype::F16);
    let mut seq = Sequence::new();
    let result = seq.feed(
        Runtime {
            model: &device_model().model,
            pool: &mut pool,
            kv: &mut kv,
        },
        &[1, 2, 3],
        16,
        LogitsFor::Last,
    );
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::DeviceMismatch { .. }), "{error}");
    assert!(error.to_string().contains("candle-cpu"), "{error}");
    seq.release(&mut pool);
    assert_eq!(pool.num_allocatable(), pool.num_blocks());
}
