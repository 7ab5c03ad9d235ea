//! Tiny random Llama-family checkpoints written by the tests themselves (HF
//! safetensors layout, a word-level tokenizer over `t0`..`t63`): fast enough
//! for thousands of engine requests, real enough to run every code path.

use candle_core::{DType, Device, Tensor};
use std::collections::HashMap;
use std::path::Path;

pub const VOCAB: usize = 64;
pub const HIDDEN: usize = 32;
pub const FFN: usize = 48;
pub const LAYERS: usize = 2;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;

/// Deterministic values in [-scale, scale).
pub fn random(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * scale
        })
        .collect()
}

/// Which tiny model to write: Llama (separate LM head) or Qwen2 (q/k/v biases, tied LM head).
#[derive(Clone, Copy, PartialEq)]
pub enum Family {
    Llama,
    Qwen2,
}

pub fn write_tiny_model(dir: &Path, family: Family) {
    let qwen = family == Family::Qwen2;
    let config = serde_json::json!({
        "model_type": if qwen { "qwen2" } else { "llama" },
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FFN,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 256,
        "tie_word_embeddings": qwen, "sliding_window": 256, "max_window_layers": LAYERS,
        "use_sliding_window": false, "hidden_act": "silu",
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let vocab: serde_json::Map<String, serde_json::Value> = (0..VOCAB).map(|i| (format!("t{i}"), i.into())).collect();
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "t0"},
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();

    let head_dim = HIDDEN / HEADS;
    let mut tensors = HashMap::new();
    let mut seed = 1;
    let mut add = |name: String, shape: &[usize], scale: f32| {
        seed += 1;
        let n = shape.iter().product();
        // Norm weights near 1, everything else small and random; stored as f16 to exercise conversion.
        let values: Vec<f32> = if name.ends_with("norm.weight") {
            random(seed, n, 0.1).iter().map(|v| 1.0 + v).collect()
        } else {
            random(seed, n, scale)
        };
        let tensor = Tensor::from_vec(values, shape, &Device::Cpu)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap();
        tensors.insert(name, tensor);
    };
    add("model.embed_tokens.weight".into(), &[VOCAB, HIDDEN], 1.0);
    add("model.norm.weight".into(), &[HIDDEN], 0.0);
    if !qwen {
        add("lm_head.weight".into(), &[VOCAB, HIDDEN], 0.3);
    }
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}");
        add(format!("{p}.input_layernorm.weight"), &[HIDDEN], 0.0);
        add(format!("{p}.post_attention_layernorm.weight"), &[HIDDEN], 0.0);
        add(format!("{p}.self_attn.q_proj.weight"), &[HEADS * head_dim, HIDDEN], 0.3);
        add(
            format!("{p}.self_attn.k_proj.weight"),
            &[KV_HEADS * head_dim, HIDDEN],
            0.3,
        );
        add(
            format!("{p}.self_attn.v_proj.weight"),
            &[KV_HEADS * head_dim, HIDDEN],
            0.3,
        );
        if qwen {
            add(format!("{p}.self_attn.q_proj.bias"), &[HEADS * head_dim], 0.5);
            add(format!("{p}.self_attn.k_proj.bias"), &[KV_HEADS * head_dim], 0.5);
            add(format!("{p}.self_attn.v_proj.bias"), &[KV_HEADS * head_dim], 0.5);
        }
        add(format!("{p}.self_attn.o_proj.weight"), &[HIDDEN, HEADS * head_dim], 0.3);
        add(format!("{p}.mlp.gate_proj.weight"), &[FFN, HIDDEN], 0.3);
        add(format!("{p}.mlp.up_proj.weight"), &[FFN, HIDDEN], 0.3);
        add(format!("{p}.mlp.down_proj.weight"), &[HIDDEN, FFN], 0.3);
    }
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
}

/// A tiny random Llama as one GGUF file's bytes (Q8_0 matrices, F32 norms, a
/// byte-level BPE over 32 tokens): the input the GGUF fuzz target mutates.
pub fn tiny_gguf() -> Vec<u8> {
    use candle_core::quantized::gguf_file::{self, Value};
    use candle_core::quantized::{GgmlDType, QTensor};
    const HIDDEN_G: usize = 32;
    const FFN_G: usize = 64;
    const VOCAB_G: usize = 32;
    // A control token, the pieces of the one merge, then single letters.
    let words = ["<|endoftext|>", "t", "0", "t0"].into_iter().map(str::to_string);
    let letters = ('a'..='z').chain('A'..='Z').map(String::from);
    let tokens: Vec<Value> = words.chain(letters).take(VOCAB_G).map(Value::String).collect();
    let types: Vec<Value> = (0..VOCAB_G).map(|i| Value::I32(if i == 0 { 3 } else { 1 })).collect();
    let metadata: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("llama".into())),
        ("general.alignment", Value::U32(32)),
        ("llama.block_count", Value::U32(1)),
        ("llama.context_length", Value::U32(256)),
        ("llama.embedding_length", Value::U32(HIDDEN_G as u32)),
        ("llama.feed_forward_length", Value::U32(FFN_G as u32)),
        ("llama.attention.head_count", Value::U32(2)),
        ("llama.attention.head_count_kv", Value::U32(1)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("llama.rope.freq_base", Value::F32(10_000.0)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.tokens", Value::Array(tokens)),
        ("tokenizer.ggml.merges", Value::Array(vec![Value::String("t 0".into())])),
        ("tokenizer.ggml.token_type", Value::Array(types)),
        ("tokenizer.ggml.eos_token_id", Value::U32(0)),
    ];
    let matrix = |seed: u64, rows: usize, cols: usize| {
        let values = Tensor::from_vec(random(seed, rows * cols, 0.5), (rows, cols), &Device::Cpu).unwrap();
        QTensor::quantize(&values, GgmlDType::Q8_0).unwrap()
    };
    let norm = |seed: u64| {
        let values = Tensor::from_vec(random(seed, HIDDEN_G, 1.0), HIDDEN_G, &Device::Cpu).unwrap();
        QTensor::quantize(&values, GgmlDType::F32).unwrap()
    };
    let kv = HIDDEN_G / 2;
    let tensors: Vec<(&str, QTensor)> = vec![
        ("token_embd.weight", matrix(1, VOCAB_G, HIDDEN_G)),
        ("output_norm.weight", norm(2)),
        ("output.weight", matrix(3, VOCAB_G, HIDDEN_G)),
        ("blk.0.attn_norm.weight", norm(4)),
        ("blk.0.attn_q.weight", matrix(5, HIDDEN_G, HIDDEN_G)),
        ("blk.0.attn_k.weight", matrix(6, kv, HIDDEN_G)),
        ("blk.0.attn_v.weight", matrix(7, kv, HIDDEN_G)),
        ("blk.0.attn_output.weight", matrix(8, HIDDEN_G, HIDDEN_G)),
        ("blk.0.ffn_norm.weight", norm(9)),
        ("blk.0.ffn_gate.weight", matrix(10, FFN_G, HIDDEN_G)),
        ("blk.0.ffn_up.weight", matrix(11, FFN_G, HIDDEN_G)),
        ("blk.0.ffn_down.weight", matrix(12, HIDDEN_G, FFN_G)),
    ];
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (*k, v)).collect();
    let mut bytes = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut bytes, &metadata, &tensors).unwrap();
    bytes.into_inner()
}
