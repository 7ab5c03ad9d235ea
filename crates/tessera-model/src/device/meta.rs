//! The flat arrays the device kernels read besides queries and pools: per batch
//! row its sequence, absolute position and cache slot; per sequence its block
//! table, padded to the batch's longest. Built on the host from a validated
//! batch, uploaded once per forward and shared by every layer.

use crate::attention::PARTITION_TOKENS;
use crate::batch::{check_table, SeqInput};
use crate::error::{ModelError, Result};
use crate::kv_cache::KvLayout;

/// Kernel metadata for one ragged batch (what vLLM calls the attention metadata).
/// Built only by [`KernelMeta::new`], which checks every block id against the
/// layout: the CUDA kernels index device memory with these values unchecked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMeta {
    /// The pools' shape the ids refer to.
    pub(crate) layout: KvLayout,
    /// Index of each row's sequence in the batch.
    pub(crate) row_seq: Vec<u32>,
    /// Absolute position of each row; the row attends to keys `0..=position`.
    pub(crate) row_pos: Vec<u32>,
    /// Cache slot each row's K/V is written to: `block × block_size + offset`.
    pub(crate) slot_mapping: Vec<u32>,
    /// `[sequences, max_blocks]` block ids, each row padded with block 0 (never read:
    /// a row only reads blocks under its position).
    pub(crate) block_tables: Vec<u32>,
    /// Width of `block_tables`.
    pub(crate) max_blocks: usize,
    /// Key partitions per row: `ceil(longest context / PARTITION_TOKENS)`.
    pub(crate) partitions: usize,
}

impl KernelMeta {
    /// Flatten `batch` for a cache of `layout`, checking its block tables (the kernels
    /// trust these ids; the device path's `BatchPlan` checks the rest).
    pub fn new(batch: &[SeqInput<'_>], layout: KvLayout) -> Result<Self> {
        let slots = layout.num_blocks.checked_mul(layout.block_size);
        if slots.is_none_or(|slots| slots > u32::MAX as usize) {
            return Err(ModelError::InvalidConfig(format!(
                "a device KV cache holds at most {} slots ({} blocks of {} requested)",
                u32::MAX,
                layout.num_blocks,
                layout.block_size
            )));
        }
        for (index, seq) in batch.iter().enumerate() {
            check_table(index, seq, layout)?;
        }
        let max_blocks = batch.iter().map(|seq| seq.blocks.len()).max().unwrap_or(0).max(1);
        let mut meta = Self {
            layout,
            row_seq: Vec::new(),
            row_pos: Vec::new(),
            slot_mapping: Vec::new(),
            block_tables: vec![0; batch.len() * max_blocks],
            max_blocks,
            partitions: 1,
        };
        for (index, seq) in batch.iter().enumerate() {
            for (dst, block) in meta.block_tables[index * max_blocks..].iter_mut().zip(seq.blocks) {
                *dst = block.index() as u32;
            }
            for pos in seq.start_pos..seq.start_pos + seq.tokens.len() {
                let block = seq.blocks[pos / layout.block_size].index();
                meta.row_seq.push(index as u32);
                meta.row_pos.push(as_u32("position", pos)?);
                meta.slot_mapping
                    .push((block * layout.block_size + pos % layout.block_size) as u32);
            }
        }
        let longest = meta.row_pos.iter().map(|&pos| pos as usize + 1).max().unwrap_or(1);
        meta.partitions = longest.div_ceil(PARTITION_TOKENS);
        Ok(meta)
    }

    /// The pools' shape.
    pub fn layout(&self) -> KvLayout {
        self.layout
    }

    /// Key partitions per row.
    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// Width of the padded block tables.
    pub fn max_blocks(&self) -> usize {
        self.max_blocks
    }

    /// Rows in the batch.
    pub fn rows(&self) -> usize {
        self.row_pos.len()
    }

    /// Sequences in the batch.
    pub fn seqs(&self) -> usize {
        self.block_tables.len() / self.max_blocks
    }

    /// Row `row`'s block table.
    pub fn table(&self, row: usize) -> &[u32] {
        let seq = self.row_seq[row] as usize;
        &self.block_tables[seq * self.max_blocks..(seq + 1) * self.max_blocks]
    }
}

fn as_u32(field: &'static str, value: usize) -> Result<u32> {
    u32::try_from(value).map_err(|_| ModelError::OverLimit {
        field,
        value,
        limit: u32::MAX as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::LogitsFor;
    use tessera_kv::BlockId;

    fn layout() -> KvLayout {
        KvLayout {
            num_blocks: 128,
            block_size: 4,
            num_kv_heads: 2,
            head_dim: 8,
        }
    }

    #[test]
    fn rows_carry_their_sequence_position_and_slot() {
        let (a, b) = ([BlockId(7), BlockId(3)], [BlockId(9)]);
        let batch = [
            SeqInput {
                tokens: &[1, 2, 3],
                start_pos: 2,
                blocks: &a,
                logits: LogitsFor::Last,
            },
            SeqInput {
                tokens: &[4],
                start_pos: 0,
                blocks: &b,
                logits: LogitsFor::Last,
            },
        ];
        let meta = KernelMeta::new(&batch, layout()).unwrap();
        assert_eq!(meta.row_seq, [0, 0, 0, 1]);
        assert_eq!(meta.row_pos, [2, 3, 4, 0]);
        // position 2 → block 7 offset 2; 3 → block 7 offset 3; 4 → block 3 offset 0; 0 → block 9.
        assert_eq!(meta.slot_mapping, [30, 31, 12, 36]);
        assert_eq!((meta.max_blocks, meta.seqs()), (2, 2));
        assert_eq!(meta.block_tables, [7, 3, 9, 0]);
        assert_eq!(meta.table(3), [9, 0]);
        assert_eq!(meta.partitions, 1);
    }

    #[test]
    fn long_contexts_split_into_partitions() {
        let blocks: Vec<BlockId> = (0..65).map(BlockId).collect();
        let batch = [SeqInput {
            tokens: &[0],
            start_pos: PARTITION_TOKENS,
            blocks: &blocks,
            logits: LogitsFor::Last,
        }];
        let meta = KernelMeta::new(&batch, layout()).unwrap();
        assert_eq!(meta.partitions, 2);
    }

    #[test]
    fn tables_that_miss_rows_or_leave_the_cache_are_refused() {
        let short = [BlockId(1)];
        let outside = [BlockId(128)];
        for blocks in [&short[..], &outside[..]] {
            let batch = [SeqInput {
                tokens: &[1, 2, 3],
                start_pos: 2,
                blocks,
                logits: LogitsFor::Last,
            }];
            let error = KernelMeta::new(&batch, layout()).unwrap_err();
            assert!(matches!(error, ModelError::InvalidBatch(_)), "{error}");
        }
    }

    #[test]
    fn a_cache_beyond_32_bit_slots_is_refused() {
        let huge = KvLayout {
            num_blocks: 1 << 30,
            block_size: 16,
            ..layout()
        };
        let error = KernelMeta::new(&[], huge).unwrap_err();
        assert!(error.to_string().contains("slots"), "{error}");
    }
}
