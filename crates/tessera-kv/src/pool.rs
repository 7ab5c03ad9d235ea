//! The block pool: reference-counted KV blocks, a prefix index over the full
//! ones (and the partial last block of finished sequences), and an LRU of
//! cached blocks nobody references.
//!
//! Every block is in exactly one state:
//! * **free** — no useful content, on a LIFO stack;
//! * **used** — referenced by `ref_count > 0` block tables (and maybe indexed);
//! * **cached** — unreferenced but indexed: its K/V rows are kept for future
//!   prefix hits, in an LRU list, and evicted (least recent first) only when an
//!   allocation finds no free block. Eviction never touches a referenced block.
//!
//! Allocation, retain and release are O(1) (an eviction also drops the evicted
//! block's cached descendants from the index, which are older by construction).
//! Follows vLLM v1's `BlockPool` (free queue + hash map), with SGLang's radix
//! tree as the index.

use crate::lru::Lru;
use crate::radix::{IndexMatch, RadixIndex};
use crate::{BlockId, BlockTable, FullBlock, IndexEvent};

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
    /// Blocks with no content and no reference.
    pub free: usize,
    /// Unreferenced blocks kept for prefix hits (evictable).
    pub cached: usize,
    /// Blocks referenced by at least one block table.
    pub used: usize,
}

/// Cumulative prefix-cache counters (token-weighted).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Prompt tokens looked up.
    pub queried_tokens: u64,
    /// Of those, tokens whose K/V was found cached.
    pub hit_tokens: u64,
    /// Cached blocks evicted to make room.
    pub evicted_blocks: u64,
}

/// A copy-on-write the caller must perform: the first `rows` token rows of
/// `src` into `dst` (every layer), then [`BlockPool::finish_copy`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BlockCopy {
    /// The cached block holding the rows (held until `finish_copy`).
    pub src: BlockId,
    /// The sequence's fresh block.
    pub dst: BlockId,
    /// Rows to copy, `0 < rows < block_size`.
    pub rows: usize,
}

/// A sequence started from the longest cached prefix of its prompt.
#[derive(Debug)]
pub struct Admission {
    /// The table: shared full blocks, then the copy-on-write block if any.
    pub table: BlockTable,
    /// Prompt tokens whose K/V is (or will be, after `copy`) in the table.
    pub cached_tokens: usize,
    /// The partial-block copy to perform before running the rest of the prompt.
    pub copy: Option<BlockCopy>,
}

/// A fixed set of KV blocks with reference counts, a prefix index and an LRU.
#[derive(Debug, Clone)]
pub struct BlockPool {
    block_size: usize,
    /// `ref_counts[b]` = number of block tables holding block `b`.
    ref_counts: Vec<u32>,
    /// Blocks with no content, LIFO.
    free: Vec<BlockId>,
    /// Cached blocks, least recently used first.
    lru: Lru,
    index: RadixIndex,
    counters: CacheCounters,
}

impl BlockPool {
    /// A pool of `num_blocks` blocks of `block_size` token slots each, all free.
    ///
    /// # Panics
    /// If `block_size` is zero or `num_blocks` is `u32::MAX` or more (configuration
    /// bugs, validated by callers before they get here).
    pub fn new(num_blocks: usize, block_size: usize) -> Self {
        assert!(block_size > 0, "block_size must be positive");
        assert!(num_blocks < u32::MAX as usize, "too many blocks");
        Self {
            block_size,
            ref_counts: vec![0; num_blocks],
            free: (0..num_blocks as u32).rev().map(BlockId).collect(),
            lru: Lru::new(num_blocks),
            index: RadixIndex::new(num_blocks, block_size),
            counters: CacheCounters::default(),
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

    /// Blocks an allocation can take now: free plus cached (evictable).
    pub fn num_allocatable(&self) -> usize {
        self.free.len() + self.lru.len()
    }

    /// Unreferenced blocks kept for prefix hits.
    pub fn num_cached(&self) -> usize {
        self.lru.len()
    }

    /// Snapshot of the pool's state.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            total: self.num_blocks(),
            free: self.free.len(),
            cached: self.lru.len(),
            used: self.num_blocks() - self.free.len() - self.lru.len(),
        }
    }

    /// Cumulative hit/miss/eviction counters.
    pub fn counters(&self) -> CacheCounters {
        self.counters
    }

    /// Take a block with a reference count of one: a free one, else the least
    /// recently used cached one (evicted from the index). `None` when every block is referenced.
    pub fn allocate(&mut self) -> Option<BlockId> {
        let block = match self.free.pop() {
            Some(block) => block,
            None => self.evict_one()?,
        };
        self.ref_counts[block.index()] = 1;
        Some(block)
    }

    fn evict_one(&mut self) -> Option<BlockId> {
        let victim = self.lru.pop_front()?;
        let removed = self.unindex_subtree(victim);
        self.counters.evicted_blocks += removed as u64;
        Some(victim)
    }

    /// Drop `top` (already out of the LRU) and its descendants from the index;
    /// cached descendants become free. Returns how many blocks left the index.
    fn unindex_subtree(&mut self, top: BlockId) -> usize {
        let removed = self.index.remove_subtree(top);
        for &block in &removed {
            // Descendants of an unreferenced block are unreferenced and cached.
            if block != top && self.lru.unlink(block) {
                self.free.push(block);
            }
        }
        removed.len()
    }

    /// Add a reference to a used or cached block (a cached one leaves the LRU).
    pub fn retain(&mut self, block: BlockId) -> Result<(), PoolError> {
        if *self.count_of(block)? == 0 && !self.lru.unlink(block) {
            return Err(PoolError::NotAllocated(block.0));
        }
        *self.count_of(block)? += 1;
        Ok(())
    }

    /// Drop one reference; at zero the block becomes cached (if indexed) or free.
    pub fn release(&mut self, block: BlockId) -> Result<(), PoolError> {
        let count = self.count_of(block)?;
        if *count == 0 {
            return Err(PoolError::NotAllocated(block.0));
        }
        *count -= 1;
        if *count == 0 {
            // The block now holds no reference: keep its K/V if indexed.
            if self.index.contains(block) {
                self.lru.push_back(block);
            } else {
                self.free.push(block);
            }
        }
        Ok(())
    }

    fn count_of(&mut self, block: BlockId) -> Result<&mut u32, PoolError> {
        let total = self.ref_counts.len();
        self.ref_counts
            .get_mut(block.index())
            .ok_or(PoolError::OutOfRange(block.0, total))
    }

    /// Current reference count of `block` (0 when free, cached or out of range).
    pub fn ref_count(&self, block: BlockId) -> u32 {
        self.ref_counts.get(block.index()).copied().unwrap_or(0)
    }

    /// Start a sequence for `prompt`, reusing the longest cached prefix of all but
    /// its last token (whose logits must be computed). Full matching blocks are
    /// shared; a match covering only the first *k* tokens of a cached block becomes
    /// a fresh block to fill by [`BlockCopy`] (skipped if no block can be allocated).
    pub fn admit(&mut self, prompt: &[u32]) -> Admission {
        let reusable = &prompt[..prompt.len().saturating_sub(1)];
        let IndexMatch { blocks, partial } = self.index.lookup(reusable);
        let mut table = BlockTable::new();
        for &block in &blocks {
            // Indexed blocks are used or cached, so retain cannot fail.
            let _ = table.push_shared(self, block);
        }
        let mut cached_tokens = blocks.len() * self.block_size;
        let mut copy = None;
        if let Some((src, rows)) = partial {
            if self.retain(src).is_ok() {
                match self.allocate() {
                    Some(dst) => {
                        table.push_owned(dst, rows, self.block_size);
                        cached_tokens += rows;
                        copy = Some(BlockCopy { src, dst, rows });
                    }
                    None => {
                        let _ = self.release(src);
                    }
                }
            }
        }
        self.counters.queried_tokens += prompt.len() as u64;
        self.counters.hit_tokens += cached_tokens as u64;
        Admission {
            table,
            cached_tokens,
            copy,
        }
    }

    /// Release the copy source once its rows are copied.
    pub fn finish_copy(&mut self, copy: BlockCopy) -> Result<(), PoolError> {
        self.release(copy.src)
    }

    /// Index the table's full blocks, whose K/V rows hold `tokens` (the
    /// sequence's tokens so far), so later prompts can share them.
    pub fn commit(&mut self, table: &BlockTable, tokens: &[u32]) {
        let full = table.num_tokens().min(tokens.len()) / self.block_size;
        let blocks = &table.blocks()[..full.min(table.blocks().len())];
        let superseded = self.index.insert(blocks, &tokens[..blocks.len() * self.block_size]);
        self.drop_cached_tails(&superseded);
    }

    /// Index the table's partial last block too (its first rows hold the tokens
    /// after the last full block), so a prompt that continues this sequence
    /// reuses them by copy-on-write. Call when the sequence ends, just before
    /// releasing the table; the full blocks must be committed already.
    pub fn commit_tail(&mut self, table: &BlockTable, tokens: &[u32]) {
        let written = table.num_tokens().min(tokens.len());
        let full = written / self.block_size;
        let Some(&tail) = table.blocks().get(full) else {
            return;
        };
        if written.is_multiple_of(self.block_size) {
            return;
        }
        let split = full * self.block_size;
        let superseded =
            self.index
                .insert_tail(&table.blocks()[..full], &tokens[..split], tail, &tokens[split..written]);
        self.drop_cached_tails(&superseded);
    }

    /// Free redundant tails nobody references (referenced ones stay indexed until evicted).
    fn drop_cached_tails(&mut self, tails: &[BlockId]) {
        for &block in tails {
            if self.lru.unlink(block) {
                self.index.remove_subtree(block);
                self.free.push(block);
            }
        }
    }

    /// Drop every cached block (a cold start for benchmarks); used blocks stay indexed.
    pub fn clear_cache(&mut self) {
        while let Some(block) = self.lru.pop_front() {
            self.unindex_subtree(block);
            self.free.push(block);
        }
    }

    /// Start recording changes to the index's full blocks (a `Cleared`
    /// first): what a KV-event publisher announces.
    pub fn record_events(&mut self) {
        self.index.record_events();
    }

    /// The index changes since the last call, in order (none unless recording).
    pub fn take_events(&mut self) -> Vec<IndexEvent> {
        self.index.take_events()
    }

    /// Every full block in the index, parents first: the set the events describe.
    pub fn full_blocks(&self) -> Vec<FullBlock> {
        self.index.full_blocks()
    }

    /// The prefix index as (block, parent block, tokens), parents first: what a
    /// persisted cache stores beside each block's K/V rows.
    pub fn index_entries(&self) -> Vec<(BlockId, Option<BlockId>, Vec<u32>)> {
        self.index
            .entries()
            .into_iter()
            .map(|(block, parent, tokens)| (block, parent, tokens.to_vec()))
            .collect()
    }

    /// Rebuild cached blocks from persisted entries (parents first; `parent` is an
    /// index into `entries`). Each entry gets a fresh block, indexed and left cached;
    /// returns the block given to each entry (`None` when it was skipped: no free
    /// block, a missing parent or a duplicate). The caller fills the K/V rows.
    pub fn restore_entries(&mut self, entries: &[(Option<usize>, Vec<u32>)]) -> Vec<Option<BlockId>> {
        let mut placed: Vec<Option<BlockId>> = Vec::with_capacity(entries.len());
        for (parent, tokens) in entries {
            let parent_block = match parent {
                None => None,
                Some(i) => match placed.get(*i).copied().flatten() {
                    Some(block) => Some(block),
                    None => {
                        placed.push(None);
                        continue;
                    }
                },
            };
            let Some(block) = self.free.pop() else {
                placed.push(None);
                continue;
            };
            if self.index.insert_child(parent_block, block, tokens) {
                placed.push(Some(block));
            } else {
                self.free.push(block);
                placed.push(None);
            }
        }
        // Children enter the LRU before their parents, so they are evicted first.
        for block in placed.iter().rev().flatten() {
            self.lru.push_back(*block);
        }
        placed
    }

    /// The tokens an indexed block holds (for tests and debugging).
    pub fn cached_tokens_of(&self, block: BlockId) -> Option<&[u32]> {
        self.index.tokens_of(block)
    }

    /// Blocks in the LRU, least recently used first.
    pub fn lru_order(&self) -> Vec<BlockId> {
        self.lru.iter().collect()
    }

    /// Verify the invariants: each block is exactly one of free / cached / used;
    /// cached blocks are indexed; free blocks are not; the index is consistent.
    pub fn check_invariants(&self) -> Result<(), String> {
        let n = self.num_blocks();
        let mut on_free = vec![false; n];
        for block in &self.free {
            let seen = on_free
                .get_mut(block.index())
                .ok_or_else(|| format!("free list holds {block:?}"))?;
            if std::mem::replace(seen, true) {
                return Err(format!("{block:?} is on the free list twice"));
            }
        }
        if self.lru.iter().count() != self.lru.len() {
            return Err("LRU length disagrees with its links".into());
        }
        for (index, (&count, &free)) in self.ref_counts.iter().zip(&on_free).enumerate() {
            let block = BlockId(index as u32);
            let cached = self.lru.contains(block);
            let states = usize::from(count > 0) + usize::from(free) + usize::from(cached);
            if states != 1 {
                return Err(format!("{block:?}: ref count {count}, free {free}, cached {cached}"));
            }
            if cached && !self.index.contains(block) {
                return Err(format!("{block:?} is cached but not indexed"));
            }
            if free && self.index.contains(block) {
                return Err(format!("{block:?} is free but still indexed"));
            }
        }
        self.index.check()
    }
}

#[cfg(test)]
mod tests;
