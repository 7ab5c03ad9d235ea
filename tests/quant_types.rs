//! GGUF weight types: the real model requantized to each 32-element block type
//! candle reads (its rows are 576 wide, so 256-element K-quants cannot hold
//! them) loads, runs through the paged forward and still answers correctly.

mod common;

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;
use std::fs::File;
use std::path::Path;
use tessera_model::{LoadOptions, LoadedModel, ModelLocation};

/// Copy `src` to `dst` with every 2-D weight (the embedding too) requantized to `dtype`.
fn requantize(src: &Path, dst: &Path, dtype: GgmlDType) {
    let mut reader = File::open(src).unwrap();
    let content = gguf_file::Content::read(&mut reader).unwrap();
    let tensors: Vec<(String, QTensor)> = content
        .tensor_infos
        .keys()
        .map(|name| {
            let tensor = content.tensor(&mut reader, name, &Device::Cpu).unwrap();
            let tensor = if tensor.shape().rank() == 2 {
                QTensor::quantize(&tensor.dequantize(&Device::Cpu).unwrap(), dtype).unwrap()
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
    ] {
        let path = dir.join(format!("{dtype:?}.gguf"));
        requantize(&common::model_path(), &path, dtype);
        let loaded = LoadedModel::load(&ModelLocation::Gguf(path.clone()), &LoadOptions::default()).unwrap();
        let prompt = loaded.tokenizer.encode(&prompt_text).unwrap();
        let out = common::greedy(&loaded, &prompt, 12);
        let text = loaded.tokenizer.decode(&out).unwrap();
        assert!(text.contains("Paris"), "{dtype:?}: answered {text:?}");
        std::fs::remove_file(&path).ok();
    }
    std::fs::remove_dir_all(&dir).ok();
}
