//! Newtype ids: never a bare `usize` for a block or a sequence.

/// Index of a physical KV block in the pool (and in the model's K/V storage).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub u32);

impl BlockId {
    /// The block's index as a `usize`, for addressing K/V storage.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Identity of one sequence (one request's token stream) in the engine.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(pub u64);
