//! Changes to the prefix index, for routers that track which prefixes a
//! replica holds (vLLM's KV events: `BlockStored`, `BlockRemoved`,
//! `AllBlocksCleared`). Only full blocks are announced; tails are local.
//!
//! A block is named by its *chain hash*: FNV-1a over the parent's chain hash
//! and the block's tokens, so the same prefix gets the same names on every
//! replica, across restarts and builds (no per-process hash seed).

/// One change to the set of full blocks in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexEvent {
    /// A full block entered the index.
    Stored {
        /// Its chain hash.
        hash: u64,
        /// Its parent's chain hash (`None`: the first block of a prompt).
        parent: Option<u64>,
        /// The tokens it holds (`block_size` of them).
        tokens: Vec<u32>,
    },
    /// A full block left the index (evicted, or superseded).
    Removed {
        /// Its chain hash.
        hash: u64,
    },
    /// The index is empty: forget every block seen so far.
    Cleared,
}

/// A full block of the index, named as events name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullBlock {
    /// Its chain hash.
    pub hash: u64,
    /// Its parent's chain hash (`None`: the first block of a prompt).
    pub parent: Option<u64>,
    /// The tokens it holds.
    pub tokens: Vec<u32>,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The chain hash of a block holding `tokens` after the block named `parent`.
pub fn chain_hash(parent: Option<u64>, tokens: &[u32]) -> u64 {
    let bytes = parent
        .unwrap_or(0)
        .to_le_bytes()
        .into_iter()
        .chain([u8::from(parent.is_some())])
        .chain(tokens.iter().flat_map(|token| token.to_le_bytes()));
    bytes.fold(FNV_OFFSET, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BlockPool;

    #[test]
    fn a_restore_is_announced_after_a_clear_and_tails_never_are() {
        let mut pool = BlockPool::new(8, 2);
        pool.record_events();
        let placed = pool.restore_entries(&[(None, vec![1, 2]), (Some(0), vec![3, 4]), (Some(1), vec![5])]);
        assert!(placed.iter().all(Option::is_some));
        let first = chain_hash(None, &[1, 2]);
        let second = chain_hash(Some(first), &[3, 4]);
        assert_eq!(
            pool.take_events(),
            vec![
                IndexEvent::Cleared,
                IndexEvent::Stored {
                    hash: first,
                    parent: None,
                    tokens: vec![1, 2]
                },
                IndexEvent::Stored {
                    hash: second,
                    parent: Some(first),
                    tokens: vec![3, 4]
                },
            ],
            "the tail [5] is not announced"
        );
        assert_eq!(pool.full_blocks().len(), 2);
        pool.clear_cache();
        let removed = pool.take_events();
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(removed.contains(&IndexEvent::Removed { hash: first }));
        assert!(removed.contains(&IndexEvent::Removed { hash: second }));
        assert!(pool.full_blocks().is_empty());
        assert!(pool.take_events().is_empty(), "taken once");
    }

    #[test]
    fn nothing_is_kept_unless_recording() {
        let mut pool = BlockPool::new(4, 2);
        pool.restore_entries(&[(None, vec![1, 2])]);
        assert!(pool.take_events().is_empty());
    }

    #[test]
    fn chain_hashes_depend_on_the_parent_and_every_token() {
        let first = chain_hash(None, &[1, 2, 3]);
        assert_eq!(first, chain_hash(None, &[1, 2, 3]), "stable");
        assert_ne!(first, chain_hash(None, &[1, 2, 4]));
        assert_ne!(
            first,
            chain_hash(Some(0), &[1, 2, 3]),
            "a root block differs from a child of hash 0"
        );
        let second = chain_hash(Some(first), &[4, 5, 6]);
        assert_ne!(second, chain_hash(Some(chain_hash(None, &[9, 2, 3])), &[4, 5, 6]));
    }
}
