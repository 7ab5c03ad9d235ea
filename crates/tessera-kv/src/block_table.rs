//! Per-sequence block tables and slot mapping.
//!
//! A [`BlockTable`] lists the physical blocks holding a sequence's K/V rows in
//! logical order: token position `p` lives in block `blocks[p / block_size]`, at
//! offset `p % block_size`. Growing a table allocates blocks from the pool;
//! releasing it drops one reference per block. Cost: O(1) per slot lookup,
//! O(new blocks) per growth.

use crate::{BlockId, BlockPool, PoolError};

/// The physical location of one token's K/V row: a block and an offset inside it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The physical block.
    pub block: BlockId,
    /// Offset of the token inside the block, `< block_size`.
    pub offset: usize,
}

impl Slot {
    /// Flat slot index `block * block_size + offset`, as a cache-write kernel uses it.
    pub fn flat(self, block_size: usize) -> usize {
        self.block.index() * block_size + self.offset
    }
}

/// One sequence's logical-to-physical block mapping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockTable {
    blocks: Vec<BlockId>,
    /// Tokens whose K/V rows are (or are being) written; `<= blocks.len() * block_size`.
    num_tokens: usize,
}

impl BlockTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The physical blocks in logical order.
    pub fn blocks(&self) -> &[BlockId] {
        &self.blocks
    }

    /// Number of token positions the table covers.
    pub fn num_tokens(&self) -> usize {
        self.num_tokens
    }

    /// Blocks needed to hold `num_tokens` tokens.
    pub fn blocks_for(num_tokens: usize, block_size: usize) -> usize {
        num_tokens.div_ceil(block_size)
    }

    /// Extra blocks this table must allocate to grow to `num_tokens`.
    pub fn blocks_needed(&self, num_tokens: usize, block_size: usize) -> usize {
        Self::blocks_for(num_tokens, block_size).saturating_sub(self.blocks.len())
    }

    /// Grow the table to cover `num_tokens` positions, allocating blocks as needed.
    ///
    /// All-or-nothing: returns `false` (and allocates nothing) when the pool has
    /// too few free blocks, so a caller can preempt or wait instead of failing.
    pub fn grow(&mut self, pool: &mut BlockPool, num_tokens: usize) -> bool {
        let needed = self.blocks_needed(num_tokens, pool.block_size());
        if needed > pool.num_allocatable() {
            return false;
        }
        for _ in 0..needed {
            match pool.allocate() {
                Some(block) => self.blocks.push(block),
                None => return false, // unreachable: checked above
            }
        }
        self.num_tokens = self.num_tokens.max(num_tokens);
        true
    }

    /// Append a block shared with another table, adding a reference to it.
    /// The table must currently end on a block boundary.
    pub fn push_shared(&mut self, pool: &mut BlockPool, block: BlockId) -> Result<(), PoolError> {
        pool.retain(block)?;
        self.num_tokens = self.blocks.len() * pool.block_size() + pool.block_size();
        self.blocks.push(block);
        Ok(())
    }

    /// Append a freshly allocated block (already holding one reference for this
    /// table) whose first `rows` slots are filled, e.g. by a copy-on-write.
    /// The table must end on a block boundary.
    pub fn push_owned(&mut self, block: BlockId, rows: usize, block_size: usize) {
        self.num_tokens = self.blocks.len() * block_size + rows.min(block_size);
        self.blocks.push(block);
    }

    /// The slot of logical position `position`, if the table covers it.
    pub fn slot(&self, position: usize, block_size: usize) -> Option<Slot> {
        if position >= self.num_tokens {
            return None;
        }
        let block = *self.blocks.get(position / block_size)?;
        Some(Slot {
            block,
            offset: position % block_size,
        })
    }

    /// Drop this table's reference to each of its blocks, leaving it empty.
    /// Blocks are released last first, so a prefix's deeper blocks enter the
    /// LRU before (and are evicted before) the blocks they extend.
    pub fn release(&mut self, pool: &mut BlockPool) -> Result<(), PoolError> {
        let mut first_error = None;
        for block in self.blocks.drain(..).rev() {
            if let Err(error) = pool.release(block) {
                first_error.get_or_insert(error);
            }
        }
        self.num_tokens = 0;
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_table() {
        // block size 4, 6 tokens: blocks [b0, b1]; position 5 -> (b1, 1)
        let mut pool = BlockPool::new(4, 4);
        let mut table = BlockTable::new();
        assert!(table.grow(&mut pool, 6));
        assert_eq!(table.blocks().len(), 2);
        let slot = table.slot(5, 4).unwrap();
        assert_eq!(slot.block, table.blocks()[1]);
        assert_eq!(slot.offset, 1);
        assert_eq!(table.slot(6, 4), None);
        table.release(&mut pool).unwrap();
        assert_eq!(pool.num_allocatable(), 4);
    }

    #[test]
    fn grow_is_all_or_nothing() {
        let mut pool = BlockPool::new(2, 4);
        let mut table = BlockTable::new();
        assert!(!table.grow(&mut pool, 9)); // needs 3 blocks
        assert_eq!(pool.num_allocatable(), 2);
        assert_eq!(table.num_tokens(), 0);
    }

    #[test]
    fn shared_blocks_outlive_one_table() {
        let mut pool = BlockPool::new(3, 4);
        let mut first = BlockTable::new();
        assert!(first.grow(&mut pool, 4));
        let mut second = BlockTable::new();
        second.push_shared(&mut pool, first.blocks()[0]).unwrap();
        assert!(second.grow(&mut pool, 6));
        first.release(&mut pool).unwrap();
        assert_eq!(pool.ref_count(second.blocks()[0]), 1);
        second.release(&mut pool).unwrap();
        assert_eq!(pool.num_allocatable(), 3);
        pool.check_invariants().unwrap();
    }
}
