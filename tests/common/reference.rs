//! candle-transformers' own quantized models as the reference for Tessera's
//! forward pass, and the comparison both sides of a reference test share.

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_model::{KvDtype, LoadedModel, Logits, LogitsFor, Runtime, Sequence};

/// Which candle-transformers model reads the file.
#[derive(Debug, Clone, Copy)]
pub enum Reference {
    /// `quantized_llama` (Llama, Mistral, SmolLM2).
    Llama,
    /// `quantized_qwen2` (Qwen2, Qwen2.5: q/k/v biases, NEOX RoPE).
    Qwen2,
}

/// One forward of a reference model: `(token ids [1, n], start position) → logits`.
type Forward = Box<dyn FnMut(&Tensor, usize) -> Tensor>;

/// The reference's logits at every position of `tokens`, feeding one token at a time.
pub fn reference_logits(reference: Reference, gguf: &Path, tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut reader = File::open(gguf).unwrap();
    let content = gguf_file::Content::read(&mut reader).unwrap();
    let mut forward: Forward = match reference {
        Reference::Llama => {
            let mut model = quantized_llama::ModelWeights::from_gguf(content, &mut reader, &Device::Cpu).unwrap();
            Box::new(move |input, pos| model.forward(input, pos).unwrap())
        }
        Reference::Qwen2 => {
            let mut model = quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, &Device::Cpu).unwrap();
            Box::new(move |input, pos| model.forward(input, pos).unwrap())
        }
    };
    tokens
        .iter()
        .enumerate()
        .map(|(pos, &token)| {
            let input = Tensor::new(&[[token]], &Device::Cpu).unwrap();
            forward(&input, pos).flatten_all().unwrap().to_vec1::<f32>().unwrap()
        })
        .collect()
}

/// The environment variable that hands a dense reference child its request.
const DENSE_REQUEST: &str = "TESSERA_DENSE_REFERENCE_REQUEST";

/// The child's test, by its path in every test binary that has `mod common`.
const DENSE_CHILD: &str = "common::reference::dense_reference_child";

/// The reference's logits with every weight dequantized to f32 (candle's
/// `CANDLE_DEQUANTIZE_ALL`). candle reads that variable from the process
/// environment, once per thread; setting it here would race with every other
/// test thread (and let them observe it). So the reference runs in a child
/// process of this test binary started with the variable set, and hands its
/// logits back through a file.
pub fn dense_reference_logits(reference: Reference, gguf: &Path, tokens: &[u32]) -> Vec<Vec<f32>> {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.json");
    let out = dir.path().join("logits.f32");
    let family = match reference {
        Reference::Llama => "llama",
        Reference::Qwen2 => "qwen2",
    };
    let body = serde_json::json!({"reference": family, "gguf": gguf, "tokens": tokens, "out": out});
    std::fs::write(&request, body.to_string()).unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args([DENSE_CHILD, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env("CANDLE_DEQUANTIZE_ALL", "1")
        .env(DENSE_REQUEST, &request)
        .status()
        .unwrap();
    assert!(status.success(), "the dense reference child failed: {status}");
    let bytes = std::fs::read(&out).expect("the dense reference child wrote its logits");
    let values: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(values.len() % tokens.len(), 0, "whole rows of logits");
    values
        .chunks(values.len() / tokens.len())
        .map(<[f32]>::to_vec)
        .collect()
}

/// The child of [`dense_reference_logits`]: reads the request it names,
/// computes the reference with `CANDLE_DEQUANTIZE_ALL` set by its parent, and
/// writes the logits as little-endian f32 rows.
#[test]
#[ignore = "the child process of dense_reference_logits, which starts it with its request"]
fn dense_reference_child() {
    assert_eq!(
        std::env::var("CANDLE_DEQUANTIZE_ALL").as_deref(),
        Ok("1"),
        "started by dense_reference_logits, which sets CANDLE_DEQUANTIZE_ALL"
    );
    let request = std::env::var_os(DENSE_REQUEST).expect("started by dense_reference_logits, which names the request");
    let request: serde_json::Value = serde_json::from_slice(&std::fs::read(request).unwrap()).unwrap();
    let reference = match request["reference"].as_str() {
        Some("llama") => Reference::Llama,
        Some("qwen2") => Reference::Qwen2,
        other => panic!("unknown reference {other:?}"),
    };
    let gguf = PathBuf::from(request["gguf"].as_str().unwrap());
    let tokens: Vec<u32> = serde_json::from_value(request["tokens"].clone()).unwrap();
    let logits = reference_logits(reference, &gguf, &tokens);
    let bytes: Vec<u8> = logits.iter().flatten().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(request["out"].as_str().unwrap(), bytes).unwrap();
}

/// Tessera's logits at every position of `tokens` (one sequence, chunks of 512).
pub fn tessera_logits(loaded: &LoadedModel, tokens: &[u32], kv_dtype: KvDtype) -> Logits {
    let (mut pool, mut kv) = super::cache_of(loaded, tokens.len(), kv_dtype);
    let mut seq = Sequence::new();
    let runtime = Runtime {
        model: &loaded.model,
        pool: &mut pool,
        kv: &mut kv,
    };
    let logits = seq.feed(runtime, tokens, 512, LogitsFor::All).unwrap();
    seq.release(&mut pool);
    logits
}

/// Per-position comparison: (max abs diff, positions whose argmax agrees).
pub fn compare(got: &Logits, want: &[Vec<f32>]) -> (f32, usize) {
    let mut worst = 0f32;
    let mut agree = 0;
    for (pos, want_row) in want.iter().enumerate() {
        worst = worst.max(super::max_abs_diff(got.row(pos), want_row));
        agree += usize::from(super::argmax(got.row(pos)) == super::argmax(want_row));
    }
    (worst, agree)
}

/// Quantized agreement: argmax at ≥ 95% of positions, logits within 3.0.
/// Activations are quantized to 8 bits before every matrix product, which
/// turns last-bit differences into whole quantization steps, so agreement
/// between two correct engines is statistical, not exact.
pub fn check_quantized(what: &str, (worst, agree): (f32, usize), positions: usize) {
    println!("quantized ({what}): max |Δlogit| {worst:.3}, argmax agrees at {agree}/{positions}");
    assert!(
        agree * 100 >= positions * 95,
        "{what}: argmax agrees at only {agree}/{positions} positions"
    );
    assert!(worst < 3.0, "{what}: max abs logit diff {worst}");
}
