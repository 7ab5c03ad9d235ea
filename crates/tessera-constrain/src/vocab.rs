//! The vocabulary trie (toktrie's `TokTrie`), built once per tokenizer from
//! every token's bytes (special tokens marked with `0xFF`), and the
//! end-of-turn tokens a mask allows where a response may end.

use toktrie::{TokRxInfo, TokTrie};

/// A tokenizer's vocabulary as a byte trie.
#[derive(Clone)]
pub struct Vocabulary {
    pub(crate) trie: TokTrie,
    pub(crate) stop_tokens: Vec<u32>,
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary")
            .field("size", &self.trie.vocab_size())
            .field("stop_tokens", &self.stop_tokens)
            .finish()
    }
}

impl Vocabulary {
    /// `token_bytes[id]` = the bytes token `id` stands for; `stop_tokens` end a turn.
    pub fn new(token_bytes: &[Vec<u8>], stop_tokens: &[u32]) -> Self {
        let eos = stop_tokens.first().copied().unwrap_or(0);
        let info = TokRxInfo::new(token_bytes.len() as u32, eos);
        let trie = TokTrie::from(&info, token_bytes).with_eos_tokens(stop_tokens);
        Self {
            trie,
            stop_tokens: stop_tokens.to_vec(),
        }
    }

    /// Number of token ids.
    pub fn len(&self) -> usize {
        self.trie.vocab_size()
    }

    /// Whether the vocabulary is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of `token`.
    pub fn token_bytes(&self, token: u32) -> &[u8] {
        self.trie.token(token)
    }

    /// Whether `token` ends a turn.
    pub fn is_stop(&self, token: u32) -> bool {
        self.stop_tokens.contains(&token)
    }
}
