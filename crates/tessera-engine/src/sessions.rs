//! Session pins: the prefix of a session's last finished request, kept
//! referenced so other traffic cannot evict it before the session's next turn
//! (an agent's turn n+1 starts with turn n's whole context). Bounded to a
//! share of the pool and a number of sessions; the least recently active
//! session is unpinned first, by the bound or whenever a running sequence
//! needs blocks (before any preemption). Unpinned blocks stay cached (LRU).

use std::collections::HashMap;
use std::sync::Arc;
use tessera_kv::{BlockId, BlockPool, BlockTable};

/// Most sessions pinned at once.
pub const MAX_PINNED_SESSIONS: usize = 64;

/// The pinned prefixes, least recently active first.
#[derive(Debug, Default)]
pub(crate) struct SessionPins {
    pins: Vec<(Arc<str>, BlockTable)>,
    /// Most blocks pinned at once (a share of the pool).
    limit_blocks: usize,
}

impl SessionPins {
    /// Pins over a pool of `pool_blocks`: at most a quarter of it.
    pub fn new(pool_blocks: usize) -> Self {
        Self {
            pins: Vec::new(),
            limit_blocks: pool_blocks / 4,
        }
    }

    /// Distinct blocks held by pins (sessions sharing a prefix share its blocks).
    pub fn blocks(&self) -> usize {
        self.references().len()
    }

    /// Each pinned block and how many pins reference it.
    fn references(&self) -> HashMap<BlockId, u32> {
        let mut references = HashMap::new();
        for (_, table) in &self.pins {
            for &block in table.blocks() {
                *references.entry(block).or_insert(0) += 1;
            }
        }
        references
    }

    /// Blocks only pins reference (no running sequence holds them): what pins
    /// take from the pool beyond the running sequences' own blocks.
    pub fn blocks_held_only_by_pins(&self, pool: &BlockPool) -> usize {
        self.references()
            .into_iter()
            .filter(|&(block, pins)| pool.ref_count(block) == pins)
            .count()
    }

    /// Sessions pinned.
    pub fn sessions(&self) -> usize {
        self.pins.len()
    }

    /// Pin `blocks` (full, indexed blocks of a finished sequence) for `session`,
    /// replacing its previous pin; then unpin the oldest sessions past the bounds.
    pub fn pin(&mut self, session: Arc<str>, blocks: &[BlockId], pool: &mut BlockPool) {
        if let Some(at) = self.pins.iter().position(|(s, _)| *s == session) {
            let (_, mut old) = self.pins.remove(at);
            release(&mut old, pool);
        }
        let blocks = &blocks[..blocks.len().min(self.limit_blocks)];
        if blocks.is_empty() {
            return;
        }
        let mut table = BlockTable::new();
        for &block in blocks {
            if let Err(error) = table.push_shared(pool, block) {
                tracing::error!(%error, "pinning a session's block");
                release(&mut table, pool);
                return;
            }
        }
        self.pins.push((session, table));
        while self.pins.len() > MAX_PINNED_SESSIONS || self.blocks() > self.limit_blocks {
            self.unpin_oldest(pool);
        }
    }

    /// Unpin the least recently active session; false when none is pinned.
    pub fn unpin_oldest(&mut self, pool: &mut BlockPool) -> bool {
        if self.pins.is_empty() {
            return false;
        }
        let (session, mut table) = self.pins.remove(0);
        tracing::debug!(%session, blocks = table.blocks().len(), "unpinning a session's prefix");
        release(&mut table, pool);
        true
    }

    /// Unpin every session.
    pub fn clear(&mut self, pool: &mut BlockPool) {
        while self.unpin_oldest(pool) {}
    }
}

fn release(table: &mut BlockTable, pool: &mut BlockPool) {
    // A pin only holds blocks it retained from this pool; an error here is a bug.
    if let Err(error) = table.release(pool) {
        tracing::error!(%error, "releasing a session pin");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` blocks of 4 tokens indexed as one chain starting with token `first`, unreferenced.
    fn chain(pool: &mut BlockPool, n: usize, first: u32) -> Vec<BlockId> {
        let mut table = BlockTable::new();
        assert!(table.grow(pool, n * 4));
        let tokens: Vec<u32> = (first..first + n as u32 * 4).collect();
        pool.commit(&table, &tokens);
        let blocks = table.blocks().to_vec();
        table.release(pool).unwrap();
        blocks
    }

    #[test]
    fn pins_hold_distinct_blocks_within_bounds_and_release_them() {
        let mut pool = BlockPool::new(16, 4);
        let one = chain(&mut pool, 6, 0);
        let two = chain(&mut pool, 4, 1000);
        let mut pins = SessionPins::new(pool.num_blocks()); // at most 4 blocks
        pins.pin("a".into(), &one[..3], &mut pool);
        assert_eq!((pins.sessions(), pins.blocks()), (1, 3));
        assert_eq!(pool.num_cached(), 7, "pinned blocks are referenced, not evictable");
        // Sessions sharing a prefix count its blocks once; one pin is cut to the bound.
        pins.pin("b".into(), &one[..6], &mut pool);
        assert_eq!((pins.sessions(), pins.blocks()), (2, 4));
        assert_eq!(pins.blocks_held_only_by_pins(&pool), 4);
        // Re-pinning a session replaces its pin.
        pins.pin("b".into(), &one[..2], &mut pool);
        assert_eq!((pins.sessions(), pins.blocks()), (2, 3));
        // Past the bound, the least recently active sessions go first.
        pins.pin("c".into(), &two[..3], &mut pool);
        assert_eq!((pins.sessions(), pins.blocks()), (1, 3));
        // A block a running sequence also holds is not counted as held only by pins.
        let mut running = BlockTable::new();
        running.push_shared(&mut pool, two[0]).unwrap();
        assert_eq!(pins.blocks_held_only_by_pins(&pool), 2);
        running.release(&mut pool).unwrap();
        pins.clear(&mut pool);
        assert_eq!(pins.blocks(), 0);
        assert_eq!(pool.stats().used, 0);
        pool.check_invariants().unwrap();
    }
}
