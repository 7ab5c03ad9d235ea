//! The safetensors (HF layout) path on tiny random models written by the test
//! itself, checked against candle-transformers' dense `llama` and `qwen2`
//! (q/k/v biases, tied embeddings) on the same files.

use crate::common::tiny::{write_tiny_model, Family};
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::{llama as reference, qwen2};
use std::path::Path;
use tessera_kv::BlockPool;
use tessera_model::{KvCache, KvDtype, LoadOptions, LoadedModel, LogitsFor, ModelLocation, Runtime, Sequence};

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
    let mut kv = KvCache::new(loaded.model.config(), blocks, 4, KvDtype::F32).unwrap();
    let mut seq = Sequence::new();
    let runtime = Runtime {
        model: &loaded.model,
        pool: &mut pool,
        kv: &mut kv,
    };
    let got = seq.feed(runtime, &tokens, 7, LogitsFor::All).unwrap();
    seq.release(&mut pool);
    assert_eq!(pool.num_allocatable(), blocks);
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
