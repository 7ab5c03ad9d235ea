//! The prefix index: a radix tree whose edges are block-sized token runs.
//!
//! Each node is one KV block; the path from the root spells the tokens of
//! every block before it, so a node's K/V rows are valid for exactly one token
//! prefix (SGLang's RadixCache, with vLLM's block granularity). Children are
//! found through one hash map keyed by (parent node, hash of the run), and the
//! stored run is compared before a match is accepted, so a hash collision can
//! never return a block holding other tokens. Lookup costs O(matched blocks)
//! map probes plus one scan of the last node's children for a partial hit.
//!
//! A node is *full* (a run of `block_size` tokens) or a *tail*: the partial last
//! block of a finished sequence (`0 < len < block_size` tokens, always a leaf,
//! not in the hash map). Tails are only ever read by partial hits, which copy
//! their first rows; they are what lets the next turn of an agent reuse the
//! last few tokens of the previous one instead of rounding down to a block.
//!
//! Why a tree and not vLLM's chain of block hashes: a token-granular hit needs
//! the children of the last matched block, which a tree has at hand; a chain
//! would need a second parent → children map.

use crate::events::{chain_hash, FullBlock, IndexEvent};
use crate::BlockId;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// Index of a node in the arena; 0 is the root (no block).
pub(crate) type NodeId = u32;
const ROOT: NodeId = 0;
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Node {
    block: BlockId,
    parent: NodeId,
    tokens: Box<[u32]>,
    children: Vec<NodeId>,
    /// The chain hash naming this block in [`IndexEvent`]s (0 for the root).
    chain: u64,
}

/// What a lookup found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexMatch {
    /// Full blocks matching the prompt's first `blocks.len() × block_size` tokens, in order.
    pub blocks: Vec<BlockId>,
    /// A cached block whose first `tokens` tokens (0 < tokens < block_size) match the next prompt tokens.
    pub partial: Option<(BlockId, usize)>,
}

/// Radix tree over block-sized token runs.
#[derive(Debug, Clone)]
pub(crate) struct RadixIndex {
    block_size: usize,
    nodes: Vec<Node>,
    free_nodes: Vec<NodeId>,
    /// `node_of_block[b]` = the node holding block `b`, or `NONE`.
    node_of_block: Vec<NodeId>,
    /// (parent, hash of the child's tokens) → children with that hash.
    children: HashMap<(NodeId, u64), Vec<NodeId>>,
    /// Changes to the full blocks, kept while someone listens (`None`: nobody).
    events: Option<Vec<IndexEvent>>,
}

fn hash_run(tokens: &[u32]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tokens.hash(&mut hasher);
    hasher.finish()
}

/// The root, or a freed arena slot.
fn empty_node() -> Node {
    Node {
        block: BlockId(u32::MAX),
        parent: ROOT,
        tokens: Box::new([]),
        children: Vec::new(),
        chain: 0,
    }
}

impl RadixIndex {
    pub fn new(num_blocks: usize, block_size: usize) -> Self {
        Self {
            block_size,
            nodes: vec![empty_node()],
            free_nodes: Vec::new(),
            node_of_block: vec![NONE; num_blocks],
            children: HashMap::new(),
            events: None,
        }
    }

    /// Start keeping [`IndexEvent`]s (first a `Cleared`, then every change).
    pub fn record_events(&mut self) {
        self.events = Some(vec![IndexEvent::Cleared]);
    }

    /// The events since the last call (none when not recording).
    pub fn take_events(&mut self) -> Vec<IndexEvent> {
        self.events.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Every full block, parents first: what the events announced, for
    /// checking a subscriber against.
    pub fn full_blocks(&self) -> Vec<FullBlock> {
        self.entries_nodes()
            .filter(|&id| !self.is_tail(id))
            .map(|id| {
                let node = &self.nodes[id as usize];
                let parent = (node.parent != ROOT).then(|| self.nodes[node.parent as usize].chain);
                FullBlock {
                    hash: node.chain,
                    parent,
                    tokens: node.tokens.to_vec(),
                }
            })
            .collect()
    }

    /// Whether `block` is in the index.
    pub fn contains(&self, block: BlockId) -> bool {
        self.node_of_block.get(block.index()).is_some_and(|&n| n != NONE)
    }

    /// Number of indexed blocks.
    pub fn len(&self) -> usize {
        self.nodes.len() - 1 - self.free_nodes.len()
    }

    /// The tokens a block's K/V rows were computed for (its own run only).
    pub fn tokens_of(&self, block: BlockId) -> Option<&[u32]> {
        let node = *self.node_of_block.get(block.index())?;
        (node != NONE).then(|| &*self.nodes[node as usize].tokens)
    }

    fn child(&self, parent: NodeId, run: &[u32]) -> Option<NodeId> {
        self.children
            .get(&(parent, hash_run(run)))?
            .iter()
            .copied()
            .find(|&c| *self.nodes[c as usize].tokens == *run)
    }

    /// Longest cached prefix of `tokens`: whole blocks, then at most one partial block.
    pub fn lookup(&self, tokens: &[u32]) -> IndexMatch {
        let mut found = IndexMatch::default();
        let mut node = ROOT;
        let mut rest = tokens;
        while rest.len() >= self.block_size {
            let Some(next) = self.child(node, &rest[..self.block_size]) else {
                break;
            };
            found.blocks.push(self.nodes[next as usize].block);
            node = next;
            rest = &rest[self.block_size..];
        }
        let best = self.nodes[node as usize]
            .children
            .iter()
            .map(|&c| {
                let child = &self.nodes[c as usize];
                let common = child.tokens.iter().zip(rest).take_while(|(a, b)| a == b).count();
                (common, child.block)
            })
            .max_by_key(|&(common, block)| (common, std::cmp::Reverse(block)));
        if let Some((common, block)) = best.filter(|&(common, _)| common > 0) {
            found.partial = Some((block, common.min(self.block_size - 1)));
        }
        found
    }

    /// Index the full blocks of a sequence (`blocks[i]` holds `tokens[i*bs..(i+1)*bs]`),
    /// following the nodes it already has indexed. Every indexed block's path from
    /// the root is held by the same sequence, so a node is never less recently
    /// used than its cached descendants. Returns the tails the new blocks make
    /// redundant (their runs are prefixes of a new full run): the pool frees the
    /// unreferenced ones.
    pub fn insert(&mut self, blocks: &[BlockId], tokens: &[u32]) -> Vec<BlockId> {
        let mut superseded = Vec::new();
        let mut node = ROOT;
        for (block, run) in blocks.iter().zip(tokens.chunks_exact(self.block_size)) {
            if let Some(existing) = self.child(node, run) {
                if self.nodes[existing as usize].block != *block {
                    // Another block already holds this content (two sequences computed
                    // the same prefix). Stop: indexing our later blocks under a node we
                    // do not hold would let that node be evicted while they are in use.
                    break;
                }
                node = existing;
                continue;
            }
            if self.contains(*block) && !self.drop_own_tail(node, *block, run) {
                // Indexed under another prefix: never index a block twice.
                break;
            }
            superseded.extend(self.tails_covered_by(node, run));
            node = self.add_node(node, *block, run);
        }
        superseded
    }

    /// The block was indexed as a tail under `parent` and has since filled up to
    /// `run`: drop the tail node so the block can be indexed full. `false` when
    /// the block is indexed anywhere else or as other tokens.
    fn drop_own_tail(&mut self, parent: NodeId, block: BlockId, run: &[u32]) -> bool {
        let node = &self.nodes[self.node_of_block[block.index()] as usize];
        if node.parent != parent || node.tokens.len() >= self.block_size || !run.starts_with(&node.tokens) {
            return false;
        }
        self.remove_subtree(block);
        true
    }

    /// Tail children of `parent` whose tokens are a prefix of `run` (made redundant by it).
    fn tails_covered_by(&self, parent: NodeId, run: &[u32]) -> Vec<BlockId> {
        self.nodes[parent as usize]
            .children
            .iter()
            .map(|&c| &self.nodes[c as usize])
            .filter(|c| c.tokens.len() < self.block_size && run.starts_with(&c.tokens))
            .map(|c| c.block)
            .collect()
    }

    /// Index the partial last block of a sequence: `blocks`/`tokens` are its full
    /// blocks (already indexed, held by it), `tail` holds `tail_tokens`
    /// (`0 < len < block_size`). Skipped when the full path is not this
    /// sequence's, the tail block is already indexed, or a cached child already
    /// starts with these tokens. Returns the shorter tails it makes redundant.
    pub fn insert_tail(
        &mut self,
        blocks: &[BlockId],
        tokens: &[u32],
        tail: BlockId,
        tail_tokens: &[u32],
    ) -> Vec<BlockId> {
        if tail_tokens.is_empty() || tail_tokens.len() >= self.block_size || self.contains(tail) {
            return Vec::new();
        }
        let mut node = ROOT;
        for (block, run) in blocks.iter().zip(tokens.chunks_exact(self.block_size)) {
            match self.child(node, run) {
                Some(existing) if self.nodes[existing as usize].block == *block => node = existing,
                _ => return Vec::new(),
            }
        }
        if self.child_covers(node, tail_tokens) {
            return Vec::new();
        }
        let superseded = self.tails_covered_by(node, tail_tokens);
        self.add_node(node, tail, tail_tokens);
        superseded
    }

    /// Every indexed block with its parent block and tokens, parents before children.
    pub fn entries(&self) -> Vec<(BlockId, Option<BlockId>, &[u32])> {
        self.entries_nodes()
            .map(|id| {
                let node = &self.nodes[id as usize];
                let parent = (node.parent != ROOT).then(|| self.nodes[node.parent as usize].block);
                (node.block, parent, &*node.tokens)
            })
            .collect()
    }

    /// Every node but the root, parents before children (depth first).
    fn entries_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        let mut stack: Vec<NodeId> = self.nodes[ROOT as usize].children.iter().rev().copied().collect();
        std::iter::from_fn(move || {
            let id = stack.pop()?;
            stack.extend(self.nodes[id as usize].children.iter().rev());
            Some(id)
        })
    }

    /// Index `block` holding `run` (a full block or a tail) under `parent` (`None`:
    /// the root). `false` when the parent is not indexed or is a tail, the block
    /// already is indexed, the run is empty or longer than a block, or a child
    /// already holds it.
    pub fn insert_child(&mut self, parent: Option<BlockId>, block: BlockId, run: &[u32]) -> bool {
        let parent_node = match parent {
            None => ROOT,
            Some(p) => match self.node_of_block.get(p.index()) {
                Some(&n) if n != NONE && !self.is_tail(n) => n,
                _ => return false,
            },
        };
        if run.is_empty() || run.len() > self.block_size || self.contains(block) {
            return false;
        }
        let duplicate = if run.len() == self.block_size {
            self.child(parent_node, run).is_some()
        } else {
            self.child_covers(parent_node, run)
        };
        if duplicate {
            return false;
        }
        self.add_node(parent_node, block, run);
        true
    }

    /// Whether a child of `parent` (full or tail) already holds `tail_tokens` as its prefix.
    fn child_covers(&self, parent: NodeId, tail_tokens: &[u32]) -> bool {
        self.nodes[parent as usize]
            .children
            .iter()
            .any(|&c| self.nodes[c as usize].tokens.starts_with(tail_tokens))
    }

    fn is_tail(&self, node: NodeId) -> bool {
        node != ROOT && self.nodes[node as usize].tokens.len() < self.block_size
    }

    fn add_node(&mut self, parent: NodeId, block: BlockId, run: &[u32]) -> NodeId {
        let parent_chain = (parent != ROOT).then(|| self.nodes[parent as usize].chain);
        let chain = chain_hash(parent_chain, run);
        if let (Some(events), true) = (self.events.as_mut(), run.len() == self.block_size) {
            events.push(IndexEvent::Stored {
                hash: chain,
                parent: parent_chain,
                tokens: run.to_vec(),
            });
        }
        let node = Node {
            block,
            parent,
            tokens: run.into(),
            children: Vec::new(),
            chain,
        };
        let id = match self.free_nodes.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeId
            }
        };
        self.nodes[parent as usize].children.push(id);
        if run.len() == self.block_size {
            self.children.entry((parent, hash_run(run))).or_default().push(id);
        }
        self.node_of_block[block.index()] = id;
        id
    }

    /// Remove `block` and every node below it; returns the removed blocks, `block` first.
    pub fn remove_subtree(&mut self, block: BlockId) -> Vec<BlockId> {
        let Some(&top) = self.node_of_block.get(block.index()) else {
            return Vec::new();
        };
        if top == NONE {
            return Vec::new();
        }
        let parent = self.nodes[top as usize].parent;
        self.nodes[parent as usize].children.retain(|&c| c != top);
        let mut removed = Vec::new();
        let mut stack = vec![top];
        while let Some(id) = stack.pop() {
            let node = std::mem::replace(&mut self.nodes[id as usize], empty_node());
            if let (Some(events), true) = (self.events.as_mut(), node.tokens.len() == self.block_size) {
                events.push(IndexEvent::Removed { hash: node.chain });
            }
            let key = (node.parent, hash_run(&node.tokens));
            if let Some(list) = self.children.get_mut(&key) {
                list.retain(|&c| c != id);
                if list.is_empty() {
                    self.children.remove(&key);
                }
            }
            self.node_of_block[node.block.index()] = NONE;
            self.free_nodes.push(id);
            removed.push(node.block);
            stack.extend(node.children);
        }
        removed
    }

    /// Check the tree's internal consistency.
    pub fn check(&self) -> Result<(), String> {
        let mut indexed = 0;
        for (b, &node) in self.node_of_block.iter().enumerate() {
            if node == NONE {
                continue;
            }
            indexed += 1;
            let n = &self.nodes[node as usize];
            if n.block.index() != b {
                return Err(format!("block {b} maps to node {node} holding {:?}", n.block));
            }
            let in_map = self
                .children
                .get(&(n.parent, hash_run(&n.tokens)))
                .is_some_and(|list| list.contains(&node));
            if n.tokens.len() == self.block_size {
                if !in_map {
                    return Err(format!("full node {node} is missing from the child map"));
                }
            } else if n.tokens.is_empty() || n.tokens.len() > self.block_size {
                return Err(format!("node {node} holds {} tokens", n.tokens.len()));
            } else if in_map || !n.children.is_empty() {
                return Err(format!("tail node {node} is in the child map or has children"));
            }
            if self.is_tail(n.parent) {
                return Err(format!("node {node} hangs under a tail"));
            }
            if !self.nodes[n.parent as usize].children.contains(&node) {
                return Err(format!("node {node} is missing from its parent's children"));
            }
        }
        if indexed != self.len() {
            return Err(format!(
                "{indexed} blocks map to nodes but the tree holds {}",
                self.len()
            ));
        }
        Ok(())
    }
}
