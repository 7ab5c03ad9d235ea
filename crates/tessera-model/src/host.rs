//! [`HostModel`], the Llama-family decoder on Tessera's CPU kernels (Touvron
//! et al. 2023; [`crate::model::Model`] wraps it or the device path): token embedding, a stack of
//! pre-norm blocks (attention with RoPE and GQA over the paged KV cache, then a
//! SwiGLU MLP), a final RMSNorm and the LM head — computed only for the rows
//! that need logits. One struct per block, fields named after the checkpoint's
//! weights; q/k/v and gate/up are fused at load (one activation pass each).

use crate::attention::{paged_attention, AttentionShape};
use crate::batch::{BatchPlan, Logits, SeqInput};
use crate::config::ModelConfig;
use crate::error::Result;
use crate::kv_cache::{KvLayout, LayerKv};
use crate::layers::{add_in_place, swiglu_fused, Embedding, Linear, RmsNorm};
use crate::rope::{Rope, RopeAngles};

/// One transformer block.
#[derive(Debug)]
pub struct Block {
    /// `attn_norm` / `input_layernorm`.
    pub attn_norm: RmsNorm,
    /// `attn_q | attn_k | attn_v` (`q_proj | k_proj | v_proj`), fused along the output.
    pub qkv_proj: Linear,
    /// `attn_output` / `o_proj`.
    pub o_proj: Linear,
    /// `ffn_norm` / `post_attention_layernorm`.
    pub ffn_norm: RmsNorm,
    /// `ffn_gate | ffn_up` (`gate_proj | up_proj`), fused along the output.
    pub gate_up_proj: Linear,
    /// `ffn_down` / `down_proj`.
    pub down_proj: Linear,
}

/// What a block's forward needs besides its input.
struct BlockContext<'p, 'a> {
    config: &'p ModelConfig,
    plan: &'p BatchPlan<'a>,
    layout: KvLayout,
    rope: &'p Rope,
    angles: &'p RopeAngles,
}

/// A forward's MLP buffers, reused by every block: a 482-token prefill's
/// fused gate/up output alone is 34.5 MB on the 1.5B, past glibc's largest
/// mmap threshold, so allocating it per block mapped fresh pages that the
/// kernel zeroed on first write (9% of the prefill).
#[derive(Default)]
struct Scratch {
    gate_up: Vec<f32>,
    act: Vec<f32>,
    out: Vec<f32>,
}

impl Block {
    fn forward(
        &self,
        x: &mut [f32],
        ctx: &BlockContext<'_, '_>,
        kv: &mut LayerKv,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let rows = ctx.plan.tokens.len();
        let attn = self.attention(&self.attn_norm.forward(x), ctx, kv)?;
        self.o_proj.forward_into(&attn, rows, &mut scratch.out)?;
        add_in_place(x, &scratch.out);
        let h = self.ffn_norm.forward(x);
        self.gate_up_proj.forward_into(&h, rows, &mut scratch.gate_up)?;
        swiglu_fused(&scratch.gate_up, ctx.config.intermediate_size, &mut scratch.act);
        self.down_proj.forward_into(&scratch.act, rows, &mut scratch.out)?;
        add_in_place(x, &scratch.out);
        Ok(())
    }

    /// Project to q/k/v, rotate, store k/v in the cache, attend through the block tables.
    fn attention(&self, h: &[f32], ctx: &BlockContext<'_, '_>, kv: &mut LayerKv) -> Result<Vec<f32>> {
        let c = ctx.config;
        let rows = ctx.plan.tokens.len();
        let (mut q, mut k, v) = split_qkv(&self.qkv_proj.forward(h, rows)?, c);
        ctx.rope.apply(&mut q, ctx.angles, c.num_heads);
        ctx.rope.apply(&mut k, ctx.angles, c.num_kv_heads);
        let kv_width = c.num_kv_heads * c.head_dim;
        for (row, &slot) in ctx.plan.slots.iter().enumerate() {
            let span = row * kv_width..(row + 1) * kv_width;
            kv.write_token(ctx.layout, slot, &k[span.clone()], &v[span]);
        }
        let mut out = vec![0f32; rows * c.num_heads * c.head_dim];
        let shape = AttentionShape {
            num_heads: c.num_heads,
            scale: 1.0 / (c.head_dim as f32).sqrt(),
        };
        paged_attention(shape, ctx.layout, &ctx.plan.attention, &q, kv, &mut out);
        Ok(out)
    }
}

/// Split fused `[rows, q | k | v]` projections into three row-major buffers.
fn split_qkv(qkv: &[f32], c: &ModelConfig) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (q_width, kv_width) = (c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim);
    let rows = qkv.len() / (q_width + 2 * kv_width);
    let (mut q, mut k, mut v) = (
        Vec::with_capacity(rows * q_width),
        Vec::with_capacity(rows * kv_width),
        Vec::with_capacity(rows * kv_width),
    );
    for row in qkv.chunks_exact(q_width + 2 * kv_width) {
        q.extend_from_slice(&row[..q_width]);
        k.extend_from_slice(&row[q_width..q_width + kv_width]);
        v.extend_from_slice(&row[q_width + kv_width..]);
    }
    (q, k, v)
}

/// A decoder on Tessera's CPU kernels (the reference path).
#[derive(Debug)]
pub(crate) struct HostModel {
    config: ModelConfig,
    /// `token_embd` / `embed_tokens`, `[vocab, hidden]`.
    embedding: Embedding,
    blocks: Vec<Block>,
    /// `output_norm` / `norm`.
    norm: RmsNorm,
    /// `output` / `lm_head` (the embedding when tied).
    lm_head: Linear,
    rope: Rope,
}

impl HostModel {
    /// Assemble a model from loaded parts.
    pub fn new(
        config: ModelConfig,
        embedding: Embedding,
        blocks: Vec<Block>,
        norm: RmsNorm,
        lm_head: Linear,
    ) -> Result<Self> {
        let (vocab, hidden) = embedding.dims()?;
        let rope = config.decoder_parts("embedding", &[vocab, hidden], blocks.len())?;
        Ok(Self {
            config,
            embedding,
            blocks,
            norm,
            lm_head,
            rope,
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// How many weight matrices of each storage type run on candle's generic
    /// kernels instead of Tessera's own (empty when every one has a kernel).
    pub fn generic_matrices(&self) -> std::collections::BTreeMap<String, usize> {
        let mut counts = std::collections::BTreeMap::new();
        let linears = self
            .blocks
            .iter()
            .flat_map(|b| [&b.qkv_proj, &b.o_proj, &b.gate_up_proj, &b.down_proj])
            .chain([&self.lm_head]);
        for name in linears.flat_map(Linear::generic_types) {
            *counts.entry(name).or_insert(0) += 1;
        }
        counts
    }

    /// Run one ragged batch over the host pools `layers` of shape `layout`.
    pub fn forward(&self, batch: &[SeqInput<'_>], layout: KvLayout, layers: &mut [LayerKv]) -> Result<Logits> {
        let plan = BatchPlan::new(batch, layout, &self.config)?;
        let _span = tracing::debug_span!("forward", rows = plan.tokens.len(), seqs = batch.len()).entered();
        let mut x = Vec::new();
        self.embedding.lookup(&plan.tokens, &mut x)?;
        let angles = self.rope.angles(&plan.positions);
        let ctx = BlockContext {
            config: &self.config,
            plan: &plan,
            layout,
            rope: &self.rope,
            angles: &angles,
        };
        let mut scratch = Scratch::default();
        for (layer, (block, kv)) in self.blocks.iter().zip(layers).enumerate() {
            let _span = tracing::trace_span!("block", layer).entered();
            block.forward(&mut x, &ctx, kv, &mut scratch)?;
        }
        self.logits(&x, &plan)
    }

    /// Final norm and LM head for the logit rows only.
    fn logits(&self, x: &[f32], plan: &BatchPlan<'_>) -> Result<Logits> {
        let width = self.config.hidden_size;
        let mut picked = Vec::with_capacity(plan.logit_rows.len() * width);
        for &(row, _) in &plan.logit_rows {
            picked.extend_from_slice(&x[row * width..(row + 1) * width]);
        }
        let seq_of_row = plan.logit_rows.iter().map(|&(_, seq)| seq).collect();
        if plan.logit_rows.is_empty() {
            return Ok(Logits::new(Vec::new(), self.config.vocab_size, seq_of_row));
        }
        let _span = tracing::trace_span!("lm_head", rows = plan.logit_rows.len()).entered();
        let values = self
            .lm_head
            .forward(&self.norm.forward(&picked), plan.logit_rows.len())?;
        Ok(Logits::new(values, self.config.vocab_size, seq_of_row))
    }
}
