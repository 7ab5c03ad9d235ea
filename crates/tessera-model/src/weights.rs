//! Building a [`Model`] from any weight source (GGUF or safetensors) through
//! one table of checkpoint names per format.

use crate::config::ModelConfig;
use crate::device::{DeviceModel, DeviceSpec};
use crate::error::{ModelError, Result};
use crate::host::Block;
use crate::layers::{Embedding, Linear, RmsNorm};
use crate::matrix::Matrix;
use crate::model::Model;
use crate::tensors::{TensorSource, WeightNames};
use candle_core::{DType, Tensor};

/// Load every weight of a Llama-family model for `device` (`dequantize`: dense
/// weights on a device; on the CPU the source applies its own options).
pub(crate) fn build_model(
    config: ModelConfig,
    source: &mut dyn TensorSource,
    names: &WeightNames,
    device: DeviceSpec,
    dequantize: bool,
) -> Result<Model> {
    if !device.is_cpu() {
        return Ok(Model::on_device(DeviceModel::load(
            config, source, names, device, dequantize,
        )?));
    }
    let vocab_shape = [config.vocab_size, config.hidden_size];
    let shape = source.shape(names.embedding)?;
    if shape != vocab_shape {
        return Err(ModelError::InvalidConfig(format!(
            "`{}` has shape {shape:?}, expected {vocab_shape:?}",
            names.embedding
        )));
    }
    let blocks = load_blocks(&config, source, names)?;
    let norm = RmsNorm::new(vector(source, names.norm, config.hidden_size)?, config.rms_norm_eps);
    let (embedding, lm_head) = if source.has(names.lm_head) {
        let lm_head = Linear::new(source.matrix(names.lm_head)?, None)?;
        (
            Embedding::Stored(Matrix::Quantized(source.qtensor(names.embedding)?)),
            lm_head,
        )
    } else {
        let lm_head = Linear::new(source.matrix(names.embedding)?, None)?;
        (Embedding::tied(&lm_head), lm_head)
    };
    Model::new(config, embedding, blocks, norm, lm_head)
}

/// Every layer's block, contiguous runs of layers loaded on as many threads
/// as the kernels use (reading and repacking a tensor is memory-bound work
/// on fresh pages; two threads halve a 1.5B model's load), in layer order.
fn load_blocks(config: &ModelConfig, source: &mut dyn TensorSource, names: &WeightNames) -> Result<Vec<Block>> {
    let threads = crate::parallel::num_threads().clamp(1, config.num_layers.max(1));
    let per_thread = config.num_layers.div_ceil(threads);
    let mut forks = Vec::with_capacity(threads - 1);
    for _ in 1..threads {
        forks.push(source.fork()?);
    }
    let runs: Vec<std::ops::Range<usize>> = (0..threads)
        .map(|t| t * per_thread..((t + 1) * per_thread).min(config.num_layers))
        .collect();
    let load_run = |source: &mut dyn TensorSource, run: std::ops::Range<usize>| {
        run.map(|layer| load_block(config, source, names, layer))
            .collect::<Result<Vec<_>>>()
    };
    let (first, rest) = runs
        .split_first()
        .ok_or_else(|| ModelError::InvalidConfig("no layers".into()))?;
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = forks
            .into_iter()
            .zip(rest.iter().cloned())
            .map(|(mut fork, run)| scope.spawn(move || load_run(fork.as_mut(), run)))
            .collect();
        let mut results = vec![load_run(source, first.clone())];
        for handle in handles {
            results.push(handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        results
    });
    // Not `with_capacity(num_layers)`: the count is the file's claim, and a
    // damaged header's 2^32 layers would abort the process before the first
    // missing tensor is found (the GGUF fuzz target's first find).
    let mut blocks = Vec::new();
    for run in results {
        blocks.extend(run?);
    }
    Ok(blocks)
}

fn load_block(config: &ModelConfig, source: &mut dyn TensorSource, names: &WeightNames, layer: usize) -> Result<Block> {
    let name = |pattern: &str| pattern.replace("{}", &layer.to_string());
    let (hidden, ffn) = (config.hidden_size, config.intermediate_size);
    let (q_width, kv_width) = (
        config.num_heads * config.head_dim,
        config.num_kv_heads * config.head_dim,
    );
    // (index into names.layer, expected [out, in])
    let mut fused = |parts: &[(usize, usize, usize)], biases: Option<[usize; 3]>| -> Result<Linear> {
        let mut matrices = Vec::new();
        for &(index, out, input) in parts {
            let weight_name = name(names.layer[index]);
            let shape = source.shape(&weight_name)?;
            if shape != [out, input] {
                return Err(ModelError::InvalidConfig(format!(
                    "`{weight_name}` has shape {shape:?}, expected [{out}, {input}]"
                )));
            }
            matrices.push(source.matrix(&weight_name)?);
        }
        let bias = match biases {
            Some(indices) if source.has(&name(names.bias[indices[0]])) => {
                let mut bias = Vec::new();
                for (i, &(_, out, _)) in indices.iter().zip(parts) {
                    let b = to_vec(&source.dense(&name(names.bias[*i]))?)?;
                    if b.len() != out {
                        return Err(ModelError::InvalidConfig(format!(
                            "`{}` has {} values, expected {out}",
                            name(names.bias[*i]),
                            b.len()
                        )));
                    }
                    bias.extend(b);
                }
                Some(bias)
            }
            _ => None,
        };
        Linear::stacked(matrices, bias)
    };
    let qkv_proj = fused(
        &[(1, q_width, hidden), (2, kv_width, hidden), (3, kv_width, hidden)],
        Some([0, 1, 2]),
    )?;
    let o_proj = fused(&[(4, hidden, q_width)], None)?;
    let gate_up_proj = fused(&[(6, ffn, hidden), (7, ffn, hidden)], None)?;
    let down_proj = fused(&[(8, hidden, ffn)], None)?;
    let mut norm = |index: usize| -> Result<RmsNorm> {
        Ok(RmsNorm::new(
            vector(source, &name(names.layer[index]), hidden)?,
            config.rms_norm_eps,
        ))
    };
    Ok(Block {
        attn_norm: norm(0)?,
        qkv_proj,
        o_proj,
        ffn_norm: norm(5)?,
        gate_up_proj,
        down_proj,
    })
}

/// A 1-D weight of exactly `len` values; its shape is checked before its
/// data is read (a damaged header's shape would otherwise size the read).
fn vector(source: &mut dyn TensorSource, name: &str, len: usize) -> Result<Vec<f32>> {
    let shape = source.shape(name)?;
    if shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) != Some(len) {
        return Err(ModelError::InvalidConfig(format!(
            "`{name}` has shape {shape:?}, expected {len} values"
        )));
    }
    to_vec(&source.dense(name)?)
}

fn to_vec(tensor: &Tensor) -> Result<Vec<f32>> {
    Ok(tensor.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
}
