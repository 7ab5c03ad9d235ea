//! A byte trie over a small set of byte strings (tool names, object keys,
//! enum values), walked one byte at a time. Nodes live in a `Vec` and link by
//! index; each node knows which strings end at it and which pass through it
//! (as a bit set over the strings, when there are at most 64).

/// Index of a node; 0 is the root.
pub(crate) type LitNode = u32;

#[derive(Debug, Clone, Default)]
struct Node {
    /// (byte, child), sorted by byte.
    children: Vec<(u8, LitNode)>,
    /// Index of the string ending here.
    terminal: Option<u32>,
    /// Bit i set when string i (i < 64) ends in this node's subtree.
    below: u64,
}

/// The trie.
#[derive(Debug, Clone)]
pub(crate) struct LiteralTrie {
    nodes: Vec<Node>,
    /// The strings, by index.
    strings: Vec<Vec<u8>>,
}

impl LiteralTrie {
    /// A trie of `strings`, string `i` reported as index `i` (duplicates keep the first).
    pub fn new<S: AsRef<[u8]>>(strings: &[S]) -> Self {
        let mut trie = Self {
            nodes: vec![Node::default()],
            strings: strings.iter().map(|s| s.as_ref().to_vec()).collect(),
        };
        for (index, string) in strings.iter().enumerate() {
            trie.insert(string.as_ref(), index as u32);
        }
        trie
    }

    /// The strings the trie was built from, by index.
    pub fn strings(&self) -> &[Vec<u8>] {
        &self.strings
    }

    fn insert(&mut self, bytes: &[u8], index: u32) {
        let bit = if index < 64 { 1u64 << index } else { 0 };
        let mut node = 0usize;
        self.nodes[0].below |= bit;
        for &byte in bytes {
            let next = match self.nodes[node].children.binary_search_by_key(&byte, |&(b, _)| b) {
                Ok(at) => self.nodes[node].children[at].1 as usize,
                Err(at) => {
                    self.nodes.push(Node::default());
                    let child = self.nodes.len() - 1;
                    self.nodes[node].children.insert(at, (byte, child as LitNode));
                    child
                }
            };
            node = next;
            self.nodes[node].below |= bit;
        }
        self.nodes[node].terminal.get_or_insert(index);
    }

    /// The child of `node` along `byte`.
    pub fn step(&self, node: LitNode, byte: u8) -> Option<LitNode> {
        let children = &self.nodes[node as usize].children;
        children
            .binary_search_by_key(&byte, |&(b, _)| b)
            .ok()
            .map(|at| children[at].1)
    }

    /// The string ending exactly at `node`.
    pub fn terminal(&self, node: LitNode) -> Option<u32> {
        self.nodes[node as usize].terminal
    }

    /// Strings (by bit, the first 64) ending at or below `node`.
    pub fn below(&self, node: LitNode) -> u64 {
        self.nodes[node as usize].below
    }

    /// Whether `node` has children.
    pub fn has_children(&self, node: LitNode) -> bool {
        !self.nodes[node as usize].children.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ```text
    /// root ─b─ r ─o─ w ─s─ e ─r─ [0 "browser"] ─_─ o ─p─ e ─n─ [1 "browser_open"]
    ///      └s─ h ─e─ l ─l─ [2 "shell"]
    /// ```
    #[test]
    fn walks_terminals_and_subtree_sets() {
        let trie = LiteralTrie::new(&["browser", "browser_open", "shell"]);
        let walk = |s: &str| s.bytes().try_fold(0, |n, b| trie.step(n, b));
        assert_eq!(walk("browser").and_then(|n| trie.terminal(n)), Some(0));
        assert_eq!(walk("browser_open").and_then(|n| trie.terminal(n)), Some(1));
        assert_eq!(walk("brow").and_then(|n| trie.terminal(n)), None);
        assert_eq!(walk("brow").map(|n| trie.below(n)), Some(0b011));
        assert_eq!(walk("sh").map(|n| trie.below(n)), Some(0b100));
        assert_eq!(walk("bx"), None);
        assert_eq!(trie.below(0), 0b111);
    }
}
