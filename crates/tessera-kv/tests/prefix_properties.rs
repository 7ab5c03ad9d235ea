//! Property tests of the block pool and prefix index: thousands of random
//! admit / decode / finish sequences against a simulated K/V store that
//! records which token each slot holds.

use proptest::prelude::*;
use std::collections::HashMap;
use tessera_kv::{BlockId, BlockPool, BlockTable};

const BLOCK: usize = 4;
const BLOCKS: usize = 24;

#[derive(Debug, Clone)]
enum Op {
    /// Admit a prompt: one of a few shared stems, cut at `cut`, plus a suffix.
    Admit { stem: usize, cut: usize, suffix: Vec<u32> },
    /// Append a token to live sequence `seq % live`.
    Decode { seq: usize, token: u32 },
    /// Finish (or cancel) live sequence `seq % live`, indexing its partial last block if `tail`.
    Finish { seq: usize, tail: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, 0..20usize, prop::collection::vec(0..3u32, 0..6)).prop_map(|(stem, cut, suffix)| Op::Admit {
            stem,
            cut,
            suffix
        }),
        (any::<usize>(), 0..3u32).prop_map(|(seq, token)| Op::Decode { seq, token }),
        (any::<usize>(), any::<bool>()).prop_map(|(seq, tail)| Op::Finish { seq, tail }),
    ]
}

struct Live {
    table: BlockTable,
    tokens: Vec<u32>,
}

/// The world: the pool, live sequences, and what each physical slot holds.
struct World {
    pool: BlockPool,
    live: Vec<Live>,
    slots: HashMap<(BlockId, usize), u32>,
}

fn stems() -> [Vec<u32>; 3] {
    [
        (0..20).map(|i| i % 3).collect(),
        (0..20).map(|i| (i / 2) % 3).collect(),
        vec![1; 20],
    ]
}

impl World {
    fn write(&mut self, table: &BlockTable, tokens: &[u32], from: usize) {
        for (pos, &token) in tokens.iter().enumerate().skip(from) {
            let slot = table.slot(pos, BLOCK).expect("table covers the token");
            self.slots.insert((slot.block, slot.offset), token);
        }
    }

    fn admit(&mut self, prompt: Vec<u32>) -> Result<(), TestCaseError> {
        if prompt.is_empty() {
            return Ok(());
        }
        let lru_before = self.pool.lru_order();
        let admission = self.pool.admit(&prompt);
        prop_assert!(
            admission.cached_tokens < prompt.len(),
            "the last prompt token is always recomputed"
        );
        // A hit never returns a block whose tokens differ from the prompt's.
        for (pos, &want) in prompt.iter().enumerate().take(admission.cached_tokens) {
            let slot = admission.table.slot(pos, BLOCK).expect("hit covered");
            let held = match admission.copy {
                Some(copy) if slot.block == copy.dst => self.slots.get(&(copy.src, slot.offset)),
                _ => self.slots.get(&(slot.block, slot.offset)),
            };
            prop_assert_eq!(held.copied(), Some(want), "hit at position {} holds another token", pos);
        }
        if let Some(copy) = admission.copy {
            for row in 0..copy.rows {
                let token = self.slots[&(copy.src, row)];
                self.slots.insert((copy.dst, row), token);
            }
            self.pool.finish_copy(copy).unwrap();
        }
        let mut table = admission.table;
        if !table.grow(&mut self.pool, prompt.len()) {
            table.release(&mut self.pool).unwrap();
            return Ok(());
        }
        check_lru_evictions(&self.pool, &lru_before, &table)?;
        self.write(&table, &prompt, admission.cached_tokens);
        self.pool.commit(&table, &prompt);
        self.live.push(Live { table, tokens: prompt });
        Ok(())
    }

    fn decode(&mut self, seq: usize, token: u32) {
        if self.live.is_empty() {
            return;
        }
        let index = seq % self.live.len();
        let mut live = self.live.swap_remove(index);
        live.tokens.push(token);
        if live.table.grow(&mut self.pool, live.tokens.len()) {
            let from = live.tokens.len() - 1;
            self.write(&live.table, &live.tokens, from);
            self.pool.commit(&live.table, &live.tokens);
        } else {
            live.tokens.pop();
        }
        self.live.push(live);
    }

    fn finish(&mut self, seq: usize, tail: bool) {
        if self.live.is_empty() {
            return;
        }
        let mut live = self.live.swap_remove(seq % self.live.len());
        if tail {
            self.pool.commit_tail(&live.table, &live.tokens);
        }
        live.table.release(&mut self.pool).unwrap();
    }

    fn check(&self) -> Result<(), TestCaseError> {
        self.pool.check_invariants().map_err(TestCaseError::fail)?;
        // Ref counts equal the number of tables holding each block.
        let mut holders: HashMap<BlockId, u32> = HashMap::new();
        for live in &self.live {
            for &block in live.table.blocks() {
                *holders.entry(block).or_default() += 1;
            }
        }
        for b in 0..BLOCKS as u32 {
            let block = BlockId(b);
            prop_assert_eq!(self.pool.ref_count(block), holders.get(&block).copied().unwrap_or(0));
            // Indexed content equals what the slots hold.
            if let Some(tokens) = self.pool.cached_tokens_of(block) {
                for (offset, &token) in tokens.iter().enumerate() {
                    prop_assert_eq!(self.slots.get(&(block, offset)).copied(), Some(token));
                }
            }
        }
        if self.live.is_empty() {
            let stats = self.pool.stats();
            prop_assert_eq!(stats.free + stats.cached, stats.total, "pool back to baseline");
        }
        Ok(())
    }
}

/// Blocks evicted by an admission are the least recently used of those it did not reuse.
fn check_lru_evictions(pool: &BlockPool, before: &[BlockId], table: &BlockTable) -> Result<(), TestCaseError> {
    let reused: Vec<BlockId> = before.iter().copied().filter(|b| table.blocks().contains(b)).collect();
    let candidates: Vec<BlockId> = before.iter().copied().filter(|b| !reused.contains(b)).collect();
    let evicted: Vec<bool> = candidates.iter().map(|&b| pool.cached_tokens_of(b).is_none()).collect();
    let first_kept = evicted.iter().position(|&e| !e).unwrap_or(evicted.len());
    prop_assert!(
        evicted[first_kept..].iter().all(|&e| !e),
        "evicted {:?} out of LRU order {:?}",
        evicted,
        candidates
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_workloads_keep_every_invariant(ops in prop::collection::vec(op(), 1..60)) {
        let mut world = World { pool: BlockPool::new(BLOCKS, BLOCK), live: Vec::new(), slots: HashMap::new() };
        let stems = stems();
        for op in ops {
            match op {
                Op::Admit { stem, cut, suffix } => {
                    let mut prompt = stems[stem][..cut].to_vec();
                    prompt.extend(suffix);
                    world.admit(prompt)?;
                }
                Op::Decode { seq, token } => world.decode(seq, token),
                Op::Finish { seq, tail } => world.finish(seq, tail),
            }
            world.check()?;
        }
        while !world.live.is_empty() {
            world.finish(0, true);
        }
        world.check()?;
    }
}
