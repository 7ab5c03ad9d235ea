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
    assert_eq!(pool.num_allocatable(), 1);
    pool.release(block).unwrap();
    assert_eq!(pool.num_allocatable(), 2);
    pool.check_invariants().unwrap();
}

#[test]
fn misuse_is_an_error_not_a_panic() {
    let mut pool = BlockPool::new(2, 16);
    assert_eq!(pool.release(BlockId(0)), Err(PoolError::NotAllocated(0)));
    assert_eq!(pool.retain(BlockId(0)), Err(PoolError::NotAllocated(0)));
    assert_eq!(pool.retain(BlockId(9)), Err(PoolError::OutOfRange(9, 2)));
    pool.check_invariants().unwrap();
}

/// Run `tokens` as a sequence: admit, grow to full length, commit, return the table.
fn run(pool: &mut BlockPool, tokens: &[u32]) -> (Admission, BlockTable) {
    let mut admission = pool.admit(tokens);
    if let Some(copy) = admission.copy {
        pool.finish_copy(copy).unwrap();
    }
    let mut table = std::mem::take(&mut admission.table);
    assert!(table.grow(pool, tokens.len()));
    pool.commit(&table, tokens);
    (admission, table)
}

#[test]
fn full_blocks_are_shared_and_the_last_token_is_recomputed() {
    // block size 4; prompt of 8 tokens = exactly two blocks
    let mut pool = BlockPool::new(8, 4);
    let prompt: Vec<u32> = (0..8).collect();
    let (_, mut first) = run(&mut pool, &prompt);
    first.release(&mut pool).unwrap();
    assert_eq!(pool.num_cached(), 2);
    // Same prompt again: the last token must be recomputed, so block 2 is a
    // partial hit of 3 rows (copy-on-write), not a shared block.
    let admission = pool.admit(&prompt);
    assert_eq!(admission.cached_tokens, 7);
    assert_eq!(admission.table.blocks()[0], first_block(&pool, &prompt[..4]));
    let copy = admission.copy.unwrap();
    assert_eq!(copy.rows, 3);
    assert_eq!(pool.counters().hit_tokens, 7);
    pool.check_invariants().unwrap();
}

fn first_block(pool: &BlockPool, run: &[u32]) -> BlockId {
    (0..pool.num_blocks() as u32)
        .map(BlockId)
        .find(|&b| pool.cached_tokens_of(b) == Some(run))
        .unwrap()
}

#[test]
fn a_hit_in_the_middle_of_a_block_copies_only_the_matching_rows() {
    let mut pool = BlockPool::new(8, 4);
    let (_, mut table) = run(&mut pool, &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    table.release(&mut pool).unwrap();
    // Shares block [1,2,3,4], then matches 2 tokens of [5,6,7,8].
    let admission = pool.admit(&[1, 2, 3, 4, 5, 6, 99, 100]);
    assert_eq!(admission.cached_tokens, 6);
    let copy = admission.copy.unwrap();
    assert_eq!(
        (copy.rows, pool.cached_tokens_of(copy.src)),
        (2, Some(&[5, 6, 7, 8][..]))
    );
    assert_eq!(admission.table.num_tokens(), 6);
}

#[test]
fn eviction_takes_the_least_recently_used_and_never_a_referenced_block() {
    let mut pool = BlockPool::new(4, 2);
    let (_, mut a) = run(&mut pool, &[1, 1, 1, 1]); // 2 blocks
    let (_, mut b) = run(&mut pool, &[2, 2, 2, 2]); // 2 blocks
    a.release(&mut pool).unwrap(); // cached: a1, a0 (reverse order)
    let order = pool.lru_order();
    assert_eq!(order.len(), 2);
    // Every block is used or cached; a new block must evict the LRU front.
    let victim = pool.allocate().unwrap();
    assert_eq!(victim, order[0]);
    assert_eq!(pool.counters().evicted_blocks, 1);
    assert!(b.blocks().iter().all(|&x| x != victim));
    b.release(&mut pool).unwrap();
    pool.release(victim).unwrap();
    pool.check_invariants().unwrap();
}

#[test]
fn evicting_a_parent_drops_its_cached_descendants() {
    let mut pool = BlockPool::new(3, 2);
    let (_, mut t) = run(&mut pool, &[1, 2, 3, 4, 5, 6]);
    // Release parent-first, so the parent is the LRU front (the unusual order).
    for &block in t.blocks().to_vec().iter() {
        pool.release(block).unwrap();
    }
    std::mem::take(&mut t);
    let victim = pool.allocate().unwrap();
    assert_eq!(pool.cached_tokens_of(victim), None);
    assert_eq!(
        pool.num_cached(),
        0,
        "descendants of an evicted block are unreachable and freed"
    );
    assert_eq!(pool.counters().evicted_blocks, 3);
    pool.release(victim).unwrap();
    pool.check_invariants().unwrap();
}

#[test]
fn index_entries_round_trip_through_restore() {
    let mut pool = BlockPool::new(8, 2);
    let (_, mut a) = run(&mut pool, &[1, 2, 3, 4, 5]);
    let (_, mut b) = run(&mut pool, &[1, 2, 7, 7, 9]);
    a.release(&mut pool).unwrap();
    b.release(&mut pool).unwrap();
    let entries = pool.index_entries();
    assert_eq!(entries.len(), 3, "[1,2] shared, then [3,4] and [7,7]");
    let position = |block| entries.iter().position(|(b, _, _)| *b == block);
    let persisted: Vec<(Option<usize>, Vec<u32>)> = entries
        .iter()
        .map(|(_, parent, tokens)| (parent.and_then(position), tokens.clone()))
        .collect();
    assert!(
        persisted.iter().enumerate().all(|(i, (p, _))| p.is_none_or(|p| p < i)),
        "parents first"
    );

    let mut fresh = BlockPool::new(8, 2);
    let placed = fresh.restore_entries(&persisted);
    assert!(placed.iter().all(Option::is_some));
    fresh.check_invariants().unwrap();
    assert_eq!(fresh.num_cached(), 3);
    // Children are older in the LRU than the block they extend.
    let root = placed[0].unwrap();
    assert_eq!(fresh.lru_order().last(), Some(&root));
    let admission = fresh.admit(&[1, 2, 7, 7, 9]);
    assert_eq!(admission.cached_tokens, 4);
}

#[test]
fn a_finished_sequences_partial_last_block_is_reused_by_its_continuation() {
    let mut pool = BlockPool::new(8, 4);
    let turn: Vec<u32> = (1..=7).collect(); // one full block, then 3 tokens in the tail
    let (_, mut table) = run(&mut pool, &turn);
    let tail = table.blocks()[1];
    pool.commit_tail(&table, &turn);
    table.release(&mut pool).unwrap();
    assert_eq!(pool.cached_tokens_of(tail), Some(&[5, 6, 7][..]));
    pool.check_invariants().unwrap();
    // The next turn continues the sequence: all 7 tokens are reused, the tail by copy.
    let next: Vec<u32> = (1..=10).collect();
    let admission = pool.admit(&next);
    assert_eq!(admission.cached_tokens, 7);
    assert_eq!(admission.copy.map(|c| (c.src, c.rows)), Some((tail, 3)));
}

#[test]
fn a_longer_tail_or_a_full_block_frees_the_tails_it_covers() {
    let mut pool = BlockPool::new(8, 4);
    let (_, mut short) = run(&mut pool, &[1, 2, 3, 4, 5]);
    pool.commit_tail(&short, &[1, 2, 3, 4, 5]);
    let short_tail = short.blocks()[1];
    short.release(&mut pool).unwrap();
    let (_, mut long) = run(&mut pool, &[1, 2, 3, 4, 5, 6, 7]);
    pool.commit_tail(&long, &[1, 2, 3, 4, 5, 6, 7]);
    let long_tail = long.blocks()[1];
    long.release(&mut pool).unwrap();
    assert_eq!(pool.cached_tokens_of(short_tail), None, "[5] is covered by [5, 6, 7]");
    assert_eq!(pool.cached_tokens_of(long_tail), Some(&[5, 6, 7][..]));
    // A tail covered by an existing child is not indexed at all.
    let (_, mut again) = run(&mut pool, &[1, 2, 3, 4, 5, 6]);
    pool.commit_tail(&again, &[1, 2, 3, 4, 5, 6]);
    let again_tail = again.blocks()[1];
    again.release(&mut pool).unwrap();
    assert_eq!(pool.cached_tokens_of(again_tail), None);
    // A full block covering the tail frees it.
    let (_, mut full) = run(&mut pool, &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(
        pool.cached_tokens_of(long_tail),
        None,
        "[5, 6, 7] is covered by [5, 6, 7, 8]"
    );
    full.release(&mut pool).unwrap();
    pool.check_invariants().unwrap();
    assert_eq!(pool.num_cached(), 2);
}

#[test]
fn a_tail_block_that_fills_up_is_indexed_as_a_full_block() {
    let mut pool = BlockPool::new(8, 4);
    let (_, mut table) = run(&mut pool, &[1, 2, 3, 4, 5, 6]);
    pool.commit_tail(&table, &[1, 2, 3, 4, 5, 6]);
    let tail = table.blocks()[1];
    assert!(table.grow(&mut pool, 8));
    pool.commit(&table, &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(pool.cached_tokens_of(tail), Some(&[5, 6, 7, 8][..]));
    pool.check_invariants().unwrap();
    table.release(&mut pool).unwrap();
    assert_eq!(pool.admit(&[1, 2, 3, 4, 5, 6, 7, 8, 9]).cached_tokens, 8);
}

#[test]
fn tails_round_trip_through_restore() {
    let mut pool = BlockPool::new(8, 4);
    let (_, mut table) = run(&mut pool, &[1, 2, 3, 4, 5, 6]);
    pool.commit_tail(&table, &[1, 2, 3, 4, 5, 6]);
    table.release(&mut pool).unwrap();
    let entries = pool.index_entries();
    let persisted: Vec<(Option<usize>, Vec<u32>)> = vec![(None, entries[0].2.clone()), (Some(0), entries[1].2.clone())];
    assert_eq!(persisted[1].1, vec![5, 6]);
    let mut fresh = BlockPool::new(8, 4);
    assert!(fresh.restore_entries(&persisted).iter().all(Option::is_some));
    fresh.check_invariants().unwrap();
    assert_eq!(fresh.admit(&[1, 2, 3, 4, 5, 6, 7]).cached_tokens, 6);
    // A tail never gets children.
    let mut bad = BlockPool::new(8, 4);
    let placed = bad.restore_entries(&[(None, vec![1, 2]), (Some(0), vec![3, 4, 5, 6])]);
    assert_eq!(placed[1], None);
    bad.check_invariants().unwrap();
}
