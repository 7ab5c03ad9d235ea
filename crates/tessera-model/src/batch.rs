//! Ragged batches: several sequences per forward, each contributing a prefill
//! chunk or one decode token, each at its own absolute position and with its
//! own block table. [`BatchPlan`] validates a batch once and flattens it into
//! the per-row arrays the kernels use.

use crate::attention::{AttentionPlan, AttentionSeq};
use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::kv_cache::KvLayout;
use tessera_kv::{BlockId, Slot};

/// Which positions of a sequence's chunk need logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsFor {
    /// None (a prefill chunk that is not the prompt's last).
    None,
    /// The chunk's last token (the usual case: the next token is sampled from it).
    Last,
    /// Every token of the chunk (scoring, tests).
    All,
}

/// One sequence's contribution to a forward pass.
#[derive(Debug, Clone, Copy)]
pub struct SeqInput<'a> {
    /// Tokens to run, at positions `start_pos..start_pos + tokens.len()`.
    pub tokens: &'a [u32],
    /// Absolute position of `tokens[0]`; K/V of positions `< start_pos` must already be cached.
    pub start_pos: usize,
    /// The sequence's block table, covering at least `start_pos + tokens.len()` tokens.
    pub blocks: &'a [BlockId],
    /// Which rows of this chunk produce logits.
    pub logits: LogitsFor,
}

/// A validated, flattened batch.
#[derive(Debug)]
pub(crate) struct BatchPlan<'a> {
    pub tokens: Vec<u32>,
    pub positions: Vec<usize>,
    pub slots: Vec<Slot>,
    pub attention: AttentionPlan<'a>,
    /// `(batch row, sequence index)` of each row that produces logits, in order.
    pub logit_rows: Vec<(usize, usize)>,
}

impl<'a> BatchPlan<'a> {
    /// Validate and flatten `batch`, with the CPU attention kernel's work items.
    pub fn new(batch: &[SeqInput<'a>], layout: KvLayout, config: &ModelConfig) -> Result<Self> {
        Self::build(batch, layout, config, true)
    }

    /// [`BatchPlan::new`] without the CPU attention work items (one per row, KV head and
    /// partition), which the device path never reads.
    pub fn without_attention(batch: &[SeqInput<'a>], layout: KvLayout, config: &ModelConfig) -> Result<Self> {
        Self::build(batch, layout, config, false)
    }

    fn build(batch: &[SeqInput<'a>], layout: KvLayout, config: &ModelConfig, plan_attention: bool) -> Result<Self> {
        if batch.is_empty() {
            return Err(ModelError::InvalidBatch("the batch is empty".into()));
        }
        let mut attention = Vec::with_capacity(batch.len());
        let mut plan = BatchPlan {
            tokens: Vec::new(),
            positions: Vec::new(),
            slots: Vec::new(),
            attention: AttentionPlan::new(Vec::new(), layout.num_kv_heads),
            logit_rows: Vec::new(),
        };
        for (index, seq) in batch.iter().enumerate() {
            check_seq(index, seq, layout, config)?;
            let first_row = plan.tokens.len();
            attention.push(AttentionSeq {
                first_row,
                num_queries: seq.tokens.len(),
                first_pos: seq.start_pos,
                blocks: seq.blocks,
            });
            for (i, &token) in seq.tokens.iter().enumerate() {
                let pos = seq.start_pos + i;
                plan.tokens.push(token);
                plan.positions.push(pos);
                plan.slots.push(Slot {
                    block: seq.blocks[pos / layout.block_size],
                    offset: pos % layout.block_size,
                });
            }
            let rows = first_row..plan.tokens.len();
            match seq.logits {
                LogitsFor::None => {}
                LogitsFor::Last => plan.logit_rows.push((rows.end - 1, index)),
                LogitsFor::All => plan.logit_rows.extend(rows.map(|row| (row, index))),
            }
        }
        if plan_attention {
            plan.attention = AttentionPlan::new(attention, layout.num_kv_heads);
        }
        Ok(plan)
    }
}

fn check_seq(index: usize, seq: &SeqInput<'_>, layout: KvLayout, config: &ModelConfig) -> Result<()> {
    if seq.tokens.is_empty() {
        return Err(ModelError::InvalidBatch(format!("sequence {index} has no tokens")));
    }
    if let Some(&bad) = seq.tokens.iter().find(|&&t| t as usize >= config.vocab_size) {
        return Err(ModelError::OverLimit {
            field: "token id",
            value: bad as usize,
            limit: config.vocab_size - 1,
        });
    }
    check_table(index, seq, layout)
}

/// The sequence's block table covers its rows and names only blocks of the cache.
pub(crate) fn check_table(index: usize, seq: &SeqInput<'_>, layout: KvLayout) -> Result<()> {
    let end = seq.start_pos + seq.tokens.len();
    if end > seq.blocks.len() * layout.block_size {
        return Err(ModelError::InvalidBatch(format!(
            "sequence {index}: block table of {} blocks cannot hold {end} tokens",
            seq.blocks.len()
        )));
    }
    match seq.blocks.iter().find(|block| block.index() >= layout.num_blocks) {
        Some(bad) => Err(ModelError::InvalidBatch(format!(
            "sequence {index}: {bad:?} is outside the cache of {} blocks",
            layout.num_blocks
        ))),
        None => Ok(()),
    }
}

/// Logits for the rows that asked for them.
#[derive(Debug, Clone)]
pub struct Logits {
    values: Vec<f32>,
    vocab_size: usize,
    /// Sequence index (into the batch) of each row.
    seq_of_row: Vec<usize>,
}

impl Logits {
    pub(crate) fn new(values: Vec<f32>, vocab_size: usize, seq_of_row: Vec<usize>) -> Self {
        Self {
            values,
            vocab_size,
            seq_of_row,
        }
    }

    /// Append `other`'s rows after this one's (both from single-sequence batches).
    pub fn concat(mut self, other: Logits) -> Logits {
        self.values.extend(other.values);
        self.seq_of_row.extend(other.seq_of_row);
        self
    }

    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        self.seq_of_row.len()
    }

    /// Vocabulary size (row width).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Row `row`'s logits.
    pub fn row(&self, row: usize) -> &[f32] {
        &self.values[row * self.vocab_size..(row + 1) * self.vocab_size]
    }

    /// Row `row`'s logits, mutable (for in-place masking and penalties).
    pub fn row_mut(&mut self, row: usize) -> &mut [f32] {
        &mut self.values[row * self.vocab_size..(row + 1) * self.vocab_size]
    }

    /// The batch sequence each row belongs to.
    pub fn seq_of_row(&self, row: usize) -> usize {
        self.seq_of_row[row]
    }

    /// The rows belonging to batch sequence `seq`, in position order.
    pub fn rows_of_seq(&self, seq: usize) -> impl Iterator<Item = usize> + '_ {
        self.seq_of_row
            .iter()
            .enumerate()
            .filter(move |(_, &s)| s == seq)
            .map(|(row, _)| row)
    }
}
