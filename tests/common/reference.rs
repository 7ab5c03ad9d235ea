//! candle-transformers' own quantized models as the reference for Tessera's
//! forward pass, and the comparison both sides of a reference test share.

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2};
use std::fs::File;
use std::path::Path;
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
