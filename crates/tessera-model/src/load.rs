//! What loading a model takes and gives: [`LoadOptions`], [`ModelLocation`]
//! and [`LoadedModel`] (the readers, `gguf.rs` and `safetensors.rs`, build
//! one; `LoadedModel::load` at the crate root picks the reader).

use crate::device::DeviceSpec;
use crate::error::Result;
use crate::model::Model;
use crate::template::{ChatTemplate, CHATML_TEMPLATE};
use crate::tokenizer::Tokenizer;
use std::path::PathBuf;

/// How to load a model (default: weights as stored, the model's own tokenizer).
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Repack Q4_1 matrices to Q8_0 at load (off by default: Tessera's Q4_1
    /// kernel reads half the bytes and prefills and decodes faster; the
    /// repack stays for comparisons).
    pub repack_q4_1: bool,
    /// Dequantize every weight matrix to dense f32 at load (exact-arithmetic
    /// reference runs and debugging; ~8× the memory of Q4 and slower).
    pub dequantize: bool,
    /// Use this `tokenizer.json` instead of the one the model carries.
    pub tokenizer: Option<PathBuf>,
    /// Where the forward pass runs (`cpu` by default: Tessera's own kernels).
    pub device: DeviceSpec,
}

/// A model with its tokenizer and chat template.
#[derive(Debug)]
pub struct LoadedModel {
    /// The decoder.
    pub model: Model,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
    /// Its chat template (ChatML when the model ships none).
    pub template: ChatTemplate,
}

/// A model's files, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelLocation {
    /// A single GGUF file.
    Gguf(PathBuf),
    /// A directory in HF layout (config.json, *.safetensors, tokenizer.json).
    HfDir(PathBuf),
}

impl LoadedModel {
    pub(crate) fn assemble(model: Model, tokenizer: Tokenizer, template: Option<String>) -> Result<Self> {
        let template = ChatTemplate::new(
            template.as_deref().unwrap_or(CHATML_TEMPLATE),
            tokenizer.bos_token(),
            tokenizer.eos_token(),
        )?;
        Ok(Self {
            model,
            tokenizer,
            template,
        })
    }
}
