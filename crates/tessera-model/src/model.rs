//! [`Model`]: one decoder, run either by Tessera's own CPU kernels (the host
//! path, the reference) or as candle operations on a device (`--device cuda`).
//! The engine, the scheduler and the sequences see only this type and
//! [`KvCache`], whose pools live where the model runs.

use crate::batch::{Logits, SeqInput};
use crate::cache::KvCache;
use crate::config::ModelConfig;
use crate::device::{DeviceModel, DeviceSpec};
use crate::error::{ModelError, Result};
use crate::host::{Block, HostModel};
use crate::kv_cache::{KvDtype, KvLayout};
use crate::layers::{Embedding, Linear, RmsNorm};

/// A loaded decoder.
#[derive(Debug)]
pub struct Model {
    compute: Compute,
}

#[derive(Debug)]
enum Compute {
    Host(Box<HostModel>),
    Device(Box<DeviceModel>),
}

impl Model {
    /// Assemble a CPU model from loaded parts.
    pub fn new(
        config: ModelConfig,
        embedding: Embedding,
        blocks: Vec<Block>,
        norm: RmsNorm,
        lm_head: Linear,
    ) -> Result<Self> {
        Ok(Self {
            compute: Compute::Host(Box::new(HostModel::new(config, embedding, blocks, norm, lm_head)?)),
        })
    }

    pub(crate) fn on_device(model: DeviceModel) -> Self {
        Self {
            compute: Compute::Device(Box::new(model)),
        }
    }

    /// The model's shape.
    pub fn config(&self) -> &ModelConfig {
        match &self.compute {
            Compute::Host(model) => model.config(),
            Compute::Device(model) => model.config(),
        }
    }

    /// Where the forward pass runs.
    pub fn device(&self) -> DeviceSpec {
        match &self.compute {
            Compute::Host(_) => DeviceSpec::Cpu,
            Compute::Device(model) => model.spec(),
        }
    }

    /// How many weight matrices of each storage type run on candle's generic
    /// (slower) kernels rather than Tessera's own; empty when all have one.
    /// A device model runs everything on candle and reports nothing here.
    pub fn generic_matrices(&self) -> std::collections::BTreeMap<String, usize> {
        match &self.compute {
            Compute::Host(model) => model.generic_matrices(),
            Compute::Device(_) => Default::default(),
        }
    }

    /// Zeroed K/V storage for this model, on its device: `num_blocks` blocks of `block_size` tokens.
    pub fn new_kv_cache(&self, num_blocks: usize, block_size: usize, dtype: KvDtype) -> Result<KvCache> {
        match &self.compute {
            Compute::Host(model) => KvCache::new(model.config(), num_blocks, block_size, dtype),
            Compute::Device(model) => {
                let layout = KvLayout::checked(model.config(), num_blocks, block_size)?;
                Ok(KvCache::on_device(model.new_kv(layout, dtype)?, layout, dtype))
            }
        }
    }

    /// Run one ragged batch: writes every token's K/V into `kv` and returns the
    /// logits of the rows each sequence asked for. `kv` must live on the model's device.
    pub fn forward(&self, batch: &[SeqInput<'_>], kv: &mut KvCache) -> Result<Logits> {
        if kv.num_layers() != self.config().num_layers {
            return Err(ModelError::InvalidBatch(format!(
                "the KV cache has {} layers, the model {}",
                kv.num_layers(),
                self.config().num_layers
            )));
        }
        let (model_device, cache_device) = (self.device(), kv.device());
        let mismatch = || ModelError::DeviceMismatch {
            model: model_device,
            cache: cache_device,
        };
        let layout = kv.layout();
        match &self.compute {
            Compute::Host(model) => {
                let layers = kv.host_layers_mut().ok_or_else(mismatch)?;
                model.forward(batch, layout, layers)
            }
            Compute::Device(model) => {
                let pools = kv.device_pools().filter(|pools| pools.spec() == model.spec());
                model.forward(batch, layout, pools.ok_or_else(mismatch)?)
            }
        }
    }
}
