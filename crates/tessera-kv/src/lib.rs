//! Paged KV-cache bookkeeping for Tessera: pure data structures, no tensors.
//!
//! The KV cache is split into fixed-size *blocks* of `block_size` token slots
//! (PagedAttention, Kwon et al. 2023). A [`BlockPool`] hands out block ids with
//! reference counts; each sequence owns a [`BlockTable`] mapping its logical token
//! positions to physical slots. Nothing here assumes a sequence owns its blocks
//! exclusively: a block may appear in several tables (prefix sharing, next step),
//! and is returned to the pool only when its last reference is released.
//!
//! The model crate stores the K/V rows themselves, indexed by [`Slot`].
#![deny(missing_docs)]

mod block_table;
mod ids;
mod pool;

pub use block_table::{BlockTable, Slot};
pub use ids::{BlockId, SeqId};
pub use pool::{BlockPool, PoolError, PoolStats};

/// Default number of token slots per block (DESIGN.md: block size 16).
pub const DEFAULT_BLOCK_SIZE: usize = 16;
