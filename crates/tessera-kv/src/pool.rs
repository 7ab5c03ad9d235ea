//! The block pool: reference-counted KV blocks with O(1) allocate and release.
//!
//! Free blocks sit on a LIFO stack (a `Vec<BlockId>`), so allocation and release
//! are O(1) and recently freed (cache-warm) blocks are reused first. Each block
//! carries a reference count: the number of block tables holding it. A block is
//! free exactly when its count is zero; [`BlockPool::check_invariants`] verifies it.
//! The next step (prefix sharing) keeps released blocks in an LRU instead of
//! forgetting their contents; the counting here is what that builds on.

use crate::BlockId;

/// Misuse of the pool's reference counting (a bug in the caller, reported, not panicked).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    /// `retain` or `release` named a block id beyond the pool.
    #[error("block {0} is out of range for a pool of {1} blocks")]
    OutOfRange(u32, usize),
    /// `retain` or `release` named a block that is free.
    #[error("block {0} is free; it cannot be retained or released")]
    NotAllocated(u32),
}

/// Counters describing the pool at one moment.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PoolStats {
    /// Blocks in the pool.
    pub total: usize,
    /// Blocks with no reference.
    pub free: usize,
    /// Blocks referenced by at least one block table.
    pub used: usize,
}

/// A fixed set of KV blocks with reference counts.
#[derive(Debug, Clone)]
pub struct BlockPool {
    block_size: usize,
    /// `ref_counts[b]` = number of block tables holding block `b`; 0 = free.
    ref_counts: Vec<u32>,
    /// Free block ids, LIFO.
    free: Vec<BlockId>,
}

impl BlockPool {
    /// A pool of `num_blocks` blocks of `block_size` token slots each, all free.
    ///
    /// # Panics
    /// If `block_size` is zero or `num_blocks` exceeds `u32::MAX` (configuration bugs,
    /// validated by callers before they get here).
    pub fn new(num_blocks: usize, block_size: usize) -> Self {
        assert!(block_size > 0, "block_size must be positive");
        assert!(num_blocks <= u32::MAX as usize, "too many blocks");
        let free = (0..num_blocks as u32).rev().map(BlockId).collect();
        Self {
            block_size,
            ref_counts: vec![0; num_blocks],
            free,
        }
    }

    /// Token slots per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Total number of blocks.
    pub fn num_blocks(&self) -> usize {
        self.ref_counts.len()
    }

    /// Number of free blocks.
    pub fn num_free(&self) -> usize {
        self.free.len()
    }

    /// Snapshot of the pool's counters.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            total: self.num_blocks(),
            free: self.num_free(),
            used: self.num_blocks() - self.num_free(),
        }
    }

    /// Take a free block with a reference count of one; `None` when the pool is exhausted.
    pub fn allocate(&mut self) -> Option<BlockId> {
        let block = self.free.pop()?;
        self.ref_counts[block.index()] = 1;
        Some(block)
    }

    /// Add a reference to an allocated block (another table now shares it).
    pub fn retain(&mut self, block: BlockId) -> Result<(), PoolError> {
        let count = self.count_mut(block)?;
        *count += 1;
        Ok(())
    }

    /// Drop one reference; the block returns to the free stack when none remain.
    pub fn release(&mut self, block: BlockId) -> Result<(), PoolError> {
        let count = self.count_mut(block)?;
        *count -= 1;
        if *count == 0 {
            self.free.push(block);
        }
        Ok(())
    }

    /// Current reference count of `block` (0 when free or out of range).
    pub fn ref_count(&self, block: BlockId) -> u32 {
        self.ref_counts.get(block.index()).copied().unwrap_or(0)
    }

    /// Verify the pool's internal invariants: every free block has count 0, every
    /// block with count 0 is free exactly once. Returns a description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut on_free_list = vec![false; self.num_blocks()];
        for block in &self.free {
            let seen = on_free_list
                .get_mut(block.index())
                .ok_or_else(|| format!("free list holds out-of-range {block:?}"))?;
            if *seen {
                return Err(format!("{block:?} is on the free list twice"));
            }
            *seen = true;
        }
        for (index, (&count, &free)) in self.ref_counts.iter().zip(&on_free_list).enumerate() {
            if (count == 0) != free {
                return Err(format!("block {index}: ref count {count} but on free list = {free}"));
            }
        }
        Ok(())
    }

    fn count_mut(&mut self, block: BlockId) -> Result<&mut u32, PoolError> {
        let total = self.num_blocks();
        let count = self
            .ref_counts
            .get_mut(block.index())
            .ok_or(PoolError::OutOfRange(block.0, total))?;
        if *count == 0 {
            return Err(PoolError::NotAllocated(block.0));
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocate_until_exhausted_then_none() {
        let mut pool = BlockPool::new(3, 16);
        let blocks: Vec<_> = (0..3).map(|_| pool.allocate().unwrap()).collect();
        assert_eq!(pool.allocate(), None);
        assert_eq!(pool.stats().used, 3);
        for block in blocks {
            pool.release(block).unwrap();
        }
        assert_eq!(pool.stats().free, 3);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn shared_block_is_freed_by_its_last_release() {
        let mut pool = BlockPool::new(2, 16);
        let block = pool.allocate().unwrap();
        pool.retain(block).unwrap();
        assert_eq!(pool.ref_count(block), 2);
        pool.release(block).unwrap();
        assert_eq!(pool.num_free(), 1);
        pool.release(block).unwrap();
        assert_eq!(pool.num_free(), 2);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn misuse_is_an_error_not_a_panic() {
        let mut pool = BlockPool::new(2, 16);
        assert_eq!(pool.release(BlockId(0)), Err(PoolError::NotAllocated(0)));
        assert_eq!(pool.retain(BlockId(9)), Err(PoolError::OutOfRange(9, 2)));
        pool.check_invariants().unwrap();
    }
}
