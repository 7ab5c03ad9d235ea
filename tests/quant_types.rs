//! GGUF weight types: the real model requantized to each 32-element block type
//! candle reads (its rows are 576 wide, so 256-element K-quants cannot hold
//! them) loads, runs through the paged forward and still answers correctly;
//! and requantized with types mixed inside each fused group, as llama.cpp's
//! presets do, it loads and matches candle-transformers' own model.

mod common;

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;
use common::reference::{check_quantized, compare, reference_logits, tessera_logits, Reference};
use std::fs::File;
use std::path::Path;
use tessera_model::{KvDtype, LoadOptions, LoadedModel, ModelLocation};

/// Copy `src` to `dst` with every 2-D weight (the embedding too) requantized
/// to the type `type_of` gives its name.
fn requantize(src: &Path, dst: &Path, type_of: impl Fn(&str) -> GgmlDType) {
    let mut reader = File::open(src).unwrap();
    let content = gguf_file::Content::read(&mut reader).unwrap();
    let tensors: Vec<(String, QTensor)> = content
        .tensor_infos
        .keys()
        .map(|name| {
            let tensor = content.tensor(&mut reader, name, &Device::Cpu).unwrap();
            let tensor = if tensor.shape().rank() == 2 {
                QTensor::quantize(&tensor.dequantize(&Device::Cpu).unwrap(), type_of(name)).unwrap()
            } else {
                tensor
            };
            (name.clone(), tensor)
        })
        .collect();
    let metadata: Vec<(&str, &gguf_file::Value)> = content.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut File::create(dst).unwrap(), &metadata, &refs).unwrap();
}

#[test]
fn every_block_quant_type_loads_and_answers() {
    let dir = std::env::temp_dir().join(format!("tessera-quant-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prompt_text = common::chat_prompt("What is the capital of France?");
    for dtype in [
        GgmlDType::Q4_0,
        GgmlDType::Q5_0,
        GgmlDType::Q5_1,
        GgmlDType::Q8_0,
        GgmlDType::F16,
        GgmlDType::BF16,
    ] {
        let path = dir.join(format!("{dtype:?}.gguf"));
        requantize(&common::model_path(), &path, |_| dtype);
        let loaded = LoadedModel::load(&ModelLocation::Gguf(path.clone()), &LoadOptions::default()).unwrap();
        // Every one of these types runs on Tessera's kernels (F16 on the
        // half-precision one, as stored).
        let generic = loaded.model.generic_matrices();
        assert!(generic.is_empty(), "{dtype:?} runs on generic kernels: {generic:?}");
        let prompt = loaded.tokenizer.encode(&prompt_text).unwrap();
        let out = common::greedy(&loaded, &prompt, 12);
        let text = loaded.tokenizer.decode(&out).unwrap();
        assert!(text.contains("Paris"), "{dtype:?}: answered {text:?}");
        std::fs::remove_file(&path).ok();
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A type per tensor in the manner of llama.cpp's presets: q, k and v differ,
/// and so do gate and up; v alternates between layers (presets give some
/// layers' `attn_v` more bits).
fn mixed_type(name: &str) -> GgmlDType {
    let layer: usize = name.split('.').nth(1).and_then(|l| l.parse().ok()).unwrap_or(0);
    match name.split('.').nth(2).unwrap_or(name) {
        "attn_q" => GgmlDType::Q4_1,
        "attn_k" => GgmlDType::Q4_1,
        "attn_v" if layer.is_multiple_of(2) => GgmlDType::Q8_0,
        "attn_v" => GgmlDType::Q5_0,
        "attn_output" => GgmlDType::Q4_0,
        "ffn_gate" => GgmlDType::Q4_0,
        "ffn_up" => GgmlDType::Q8_0,
        "ffn_down" => GgmlDType::Q5_1,
        _ => GgmlDType::Q8_0,
    }
}

#[test]
fn types_mixed_inside_fused_groups_load_and_match_candle() {
    let dir = std::env::temp_dir().join(format!("tessera-mixed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mixed.gguf");
    requantize(&common::model_path(), &path, mixed_type);
    let loaded = LoadedModel::load(&ModelLocation::Gguf(path.clone()), &LoadOptions::default()).unwrap();
    let tokens = loaded.tokenizer.encode(&common::long_prompt()).unwrap();
    let want = reference_logits(Reference::Llama, &path, &tokens);
    let got = compare(&tessera_logits(&loaded, &tokens, KvDtype::F32), &want);
    check_quantized("mixed types", got, tokens.len());
    std::fs::remove_dir_all(&dir).ok();
}
