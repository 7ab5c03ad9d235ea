//! An intrusive doubly linked list over block ids (index-linked, one sentinel),
//! holding cached blocks from least to most recently used. O(1) push, pop and
//! unlink; no allocation after construction (vLLM's free-block queue).

use crate::BlockId;

#[derive(Debug, Clone)]
pub(crate) struct Lru {
    /// `prev[b]`, `next[b]` for each block, and the sentinel at index `n`.
    prev: Vec<u32>,
    next: Vec<u32>,
    len: usize,
}

const UNLINKED: u32 = u32::MAX;

impl Lru {
    pub fn new(num_blocks: usize) -> Self {
        let sentinel = num_blocks as u32;
        let mut prev = vec![UNLINKED; num_blocks + 1];
        let mut next = vec![UNLINKED; num_blocks + 1];
        prev[num_blocks] = sentinel;
        next[num_blocks] = sentinel;
        Self { prev, next, len: 0 }
    }

    fn sentinel(&self) -> u32 {
        (self.prev.len() - 1) as u32
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn contains(&self, block: BlockId) -> bool {
        self.next.get(block.index()).is_some_and(|&n| n != UNLINKED) && block.0 != self.sentinel()
    }

    /// Append as the most recently used.
    pub fn push_back(&mut self, block: BlockId) {
        debug_assert!(!self.contains(block));
        let (s, b) = (self.sentinel(), block.0);
        let last = self.prev[s as usize];
        self.next[last as usize] = b;
        self.prev[b as usize] = last;
        self.next[b as usize] = s;
        self.prev[s as usize] = b;
        self.len += 1;
    }

    /// Remove and return the least recently used.
    pub fn pop_front(&mut self) -> Option<BlockId> {
        let first = self.next[self.sentinel() as usize];
        if first == self.sentinel() {
            return None;
        }
        self.unlink(BlockId(first));
        Some(BlockId(first))
    }

    /// Remove `block` if present.
    pub fn unlink(&mut self, block: BlockId) -> bool {
        if !self.contains(block) {
            return false;
        }
        let b = block.index();
        let (p, n) = (self.prev[b], self.next[b]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
        self.prev[b] = UNLINKED;
        self.next[b] = UNLINKED;
        self.len -= 1;
        true
    }

    /// Blocks from least to most recently used.
    pub fn iter(&self) -> impl Iterator<Item = BlockId> + '_ {
        let s = self.sentinel();
        let mut at = self.next[s as usize];
        std::iter::from_fn(move || {
            if at == s {
                return None;
            }
            let block = BlockId(at);
            at = self.next[at as usize];
            Some(block)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_least_recent_first_and_unlink_works() {
        let mut lru = Lru::new(4);
        for b in [2, 0, 3] {
            lru.push_back(BlockId(b));
        }
        assert!(lru.unlink(BlockId(0)));
        assert!(!lru.unlink(BlockId(0)));
        assert_eq!(lru.iter().collect::<Vec<_>>(), [BlockId(2), BlockId(3)]);
        assert_eq!(lru.pop_front(), Some(BlockId(2)));
        assert_eq!(lru.pop_front(), Some(BlockId(3)));
        assert_eq!(lru.pop_front(), None);
        assert_eq!(lru.len(), 0);
    }
}
