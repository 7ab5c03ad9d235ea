//! The safetensors (HF layout) path on tiny random models written by the test
//! itself, checked against candle-transformers' dense `llama` and `qwen2`
//! (q/k/v biases, tied embeddings) on the same files.

use candle_core::{DType, Device, Tensor};
use candle_transformers::models::{llama as reference, qwen2};
use std::collections::HashMap;
use std::path::Path;
use tessera_kv::BlockPool;
use tessera_model::{KvCache, LoadOptions, LoadedModel, LogitsFor, ModelLocation, Runtime, Sequence};

const VOCAB: usize = 64;
const HIDDEN: usize = 32;
const FFN: usize = 48;
const LAYERS: usize = 2;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;

/// Deterministic values in [-scale, scale).
fn random(seed: u64, n: usize, scale: f32) -> Vec<f32> {
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
enum Family {
    Llama,
    Qwen2,
}

fn write_tiny_model(dir: &Path, family: Family) {
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

/// Logits at every position of `tokens`, fed one at a time to `step(token, position)`.
fn stepwise(tokens: &[u32], mut step: impl FnMut(&Tensor, usize) -> Tensor) -> Vec<Vec<f32>> {
    tokens
        .iter()
        .enumerate()
        .map(|(pos, &t)| {
            let input = Tensor::new(&[[t]], &Device::Cpu).unwrap();
            step(&input, pos).flatten_all().unwrap().to_vec1::<f32>().unwrap()
        })
        .collect()
}

fn var_builder(dir: &Path) -> candle_nn::VarBuilder<'static> {
    let weights = [dir.join("model.safetensors")];
    // SAFETY: the file was just written by this test and is not modified while mapped.
    unsafe { candle_nn::VarBuilder::from_mmaped_safetensors(&weights, DType::F32, &Device::Cpu).unwrap() }
}

/// candle-transformers' dense qwen2 on the same files.
fn qwen2_reference_logits(dir: &Path, tokens: &[u32]) -> Vec<Vec<f32>> {
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let config: qwen2::Config = serde_json::from_str(&text).unwrap();
    let mut model = qwen2::ModelForCausalLM::new(&config, var_builder(dir)).unwrap();
    stepwise(tokens, |input, pos| model.forward(input, pos).unwrap())
}

/// candle-transformers' dense llama on the same files.
fn llama_reference_logits(dir: &Path, tokens: &[u32]) -> Vec<Vec<f32>> {
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let config: reference::LlamaConfig = serde_json::from_str(&text).unwrap();
    let config = config.into_config(false);
    let model = reference::Llama::load(var_builder(dir), &config).unwrap();
    let mut cache = reference::Cache::new(true, DType::F32, &config, &Device::Cpu).unwrap();
    stepwise(tokens, |input, pos| model.forward(input, pos, &mut cache).unwrap())
}

/// Load the tiny model of `family` with Tessera and compare every position with the reference.
fn check_family(family: Family) {
    let dir = std::env::temp_dir().join(format!("tessera-tiny-{}-{}", family as u8, std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_tiny_model(&dir, family);
    let loaded = LoadedModel::load(&ModelLocation::HfDir(dir.clone()), &LoadOptions::default()).unwrap();
    let tokens = loaded
        .tokenizer
        .encode("t1 t5 t9 t63 t2 t2 t7 t30 t31 t4 t18 t11 t12 t13 t40 t41 t42 t43 t3")
        .unwrap();
    assert_eq!(tokens.len(), 19);
    let want = match family {
        Family::Llama => llama_reference_logits(&dir, &tokens),
        Family::Qwen2 => qwen2_reference_logits(&dir, &tokens),
    };

    let blocks = 8;
    let mut pool = BlockPool::new(blocks, 4); // block size 4: the prompt spans several blocks
    let mut kv = KvCache::new(loaded.model.config(), blocks, 4).unwrap();
    let mut seq = Sequence::new();
    let runtime = Runtime {
        model: &loaded.model,
        pool: &mut pool,
        kv: &mut kv,
    };
    let got = seq.feed(runtime, &tokens, 7, LogitsFor::All).unwrap();
    seq.release(&mut pool);
    assert_eq!(pool.num_free(), blocks);
    std::fs::remove_dir_all(&dir).ok();
    for (pos, want_row) in want.iter().enumerate() {
        let diff = want_row
            .iter()
            .zip(got.row(pos))
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(diff < 1e-4, "position {pos}: max |Δlogit| {diff}");
    }
}

#[test]
fn tiny_safetensors_llama_matches_candle_llama() {
    check_family(Family::Llama);
}

#[test]
fn tiny_safetensors_qwen2_matches_candle_qwen2() {
    check_family(Family::Qwen2);
}

#[test]
fn incomplete_checkpoint_directory_names_what_is_missing() {
    let dir = std::env::temp_dir().join(format!("tessera-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), "{}").unwrap();
    let error = LoadedModel::load(&ModelLocation::HfDir(dir.clone()), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        error.contains("tokenizer.json") && error.contains("*.safetensors"),
        "{error}"
    );
}
