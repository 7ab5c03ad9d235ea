//! Paged KV-cache bookkeeping for Tessera: pure data structures, no tensors.
//!
//! The KV cache is split into fixed-size *blocks* of `block_size` token slots
//! (PagedAttention, Kwon et al. 2023). A [`BlockPool`] hands out block ids with
//! reference counts; each sequence owns a [`BlockTable`] mapping its logical token
//! positions to physical slots. Nothing here assumes a sequence owns its blocks
//! exclusively: a block may appear in several tables (prefix sharing, next step),
//! and is returned to the pool only when its last reference is released.
//!
//! Full blocks are indexed by content in a radix tree over block-sized token
//! runs, so a new prompt reuses the longest cached prefix ([`BlockPool::admit`]),
//! down to single tokens inside a block (copy-on-write, [`BlockCopy`]).
//! Unreferenced indexed blocks stay cached in an LRU until the pool needs them.
//!
//! The model crate stores the K/V rows themselves, indexed by [`Slot`].
#![deny(missing_docs)]

mod block_table;
mod events;
mod ids;
mod lru;
mod pool;
mod radix;

pub use block_table::{BlockTable, Slot};
pub use events::{chain_hash, FullBlock, IndexEvent};
pub use ids::{BlockId, SeqId};
pub use pool::{Admission, BlockCopy, BlockPool, CacheCounters, PoolError, PoolStats};
pub use radix::IndexMatch;

/// Default number of token slots per block (DESIGN.md: block size 16).
pub const DEFAULT_BLOCK_SIZE: usize = 16;
