//! The vocabulary trie (toktrie's `TokTrie`), built once per tokenizer from
//! every token's bytes (special tokens marked with `0xFF`), and the
//! end-of-turn tokens a mask allows where a response may end.
//!
//! Two states dominate a constrained response: free text and the inside of a
//! JSON string. In both, most tokens cannot change the state (no opener byte in text;
//! no `"`, `\` or control byte in a string), so each has a [`Split`]: the set
//! of such plain tokens, allowed wholesale, and a trie of the rest, the only
//! part a mask computation walks there (tens of µs instead of milliseconds).

use toktrie::{SimpleVob, TokRxInfo, TokTrie};

/// Marks a special token's bytes: `0xFF`, then the token's text (llguidance's
/// convention, defined once by `toktrie`: no text token starts with `0xFF`,
/// which is never valid UTF-8). `tessera-model` writes token bytes with it.
pub const SPECIAL_TOKEN_MARKER: u8 = TokTrie::SPECIAL_TOKEN_MARKER;

/// A vocabulary split for one state: plain tokens, and a trie of the others.
#[derive(Clone)]
pub(crate) struct Split {
    pub plain: SimpleVob,
    pub rest: TokTrie,
}

impl Split {
    /// Plain tokens: no byte `is_structural` and `whole(bytes)`.
    fn new(
        trie: &TokTrie,
        token_bytes: &[Vec<u8>],
        is_structural: impl Fn(u8) -> bool,
        whole: impl Fn(&[u8]) -> bool,
    ) -> Self {
        let mut plain = trie.alloc_token_set();
        let mut rest = trie.alloc_token_set();
        for (id, bytes) in token_bytes.iter().enumerate() {
            if bytes.is_empty() {
                continue;
            }
            if bytes.iter().any(|&b| is_structural(b)) || !whole(bytes) {
                rest.allow_token(id as u32);
            } else {
                plain.allow_token(id as u32);
            }
        }
        Self {
            plain,
            rest: trie.filter(&rest),
        }
    }
}

/// Bytes that may start a call envelope's opener (see [`crate::CallFormat`]),
/// and the special-token marker: free-text tokens without any are plain.
pub(crate) fn is_text_structural(byte: u8) -> bool {
    matches!(byte, b'<' | b'[' | b'{' | SPECIAL_TOKEN_MARKER)
}

/// A tokenizer's vocabulary as a byte trie.
#[derive(Clone)]
pub struct Vocabulary {
    pub(crate) trie: TokTrie,
    pub(crate) stop_tokens: Vec<u32>,
    /// Free text: `<`, `[` or `{` may start an opener, `0xFF` marks special tokens.
    pub(crate) text: Split,
    /// Inside a JSON string: `"` and `\` end or escape, control bytes are invalid,
    /// tokens that are not whole UTF-8 characters change the lexer's state.
    pub(crate) string: Split,
    /// Plain string tokens longer than [`SHORT_TOKEN_BYTES`], with their
    /// length in characters: inside a string with a `maxLength` close by,
    /// each is allowed only if its characters fit.
    pub(crate) long_string_tokens: Vec<(u32, u32)>,
}

/// Bytes up to which a plain token is taken wholesale inside a bounded
/// string (when at least that many characters are left before `maxLength`).
pub(crate) const SHORT_TOKEN_BYTES: u32 = 16;

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
        let mut trie = TokTrie::from(&info, token_bytes);
        if !stop_tokens.is_empty() {
            // toktrie refuses an empty list; a vocabulary without end-of-turn tokens keeps its default.
            trie = trie.with_eos_tokens(stop_tokens);
        }
        let text = Split::new(&trie, token_bytes, is_text_structural, |_| true);
        // Strings are valid UTF-8: a token holding part of a character moves the lexer mid-character.
        let string = Split::new(
            &trie,
            token_bytes,
            |b| b == b'"' || b == b'\\' || b < 0x20 || b == SPECIAL_TOKEN_MARKER,
            |bytes| std::str::from_utf8(bytes).is_ok(),
        );
        let long_string_tokens = (0..token_bytes.len() as u32)
            .filter(|&t| string.plain.is_allowed(t) && token_bytes[t as usize].len() as u32 > SHORT_TOKEN_BYTES)
            .map(|t| {
                let chars = std::str::from_utf8(&token_bytes[t as usize]).map_or(0, |s| s.chars().count());
                (t, chars as u32)
            })
            .collect();
        Self {
            trie,
            stop_tokens: stop_tokens.to_vec(),
            text,
            string,
            long_string_tokens,
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

    /// Whether some token's bytes are exactly `bytes`.
    pub fn has_token_bytes(&self, bytes: &[u8]) -> bool {
        self.trie.token_id(bytes).is_some()
    }

    /// Whether some token's bytes start with `bytes` and go on past them (a
    /// tokenization of `bytes` followed by more may merge across their end).
    pub(crate) fn is_strict_prefix(&self, bytes: &[u8]) -> bool {
        let root = self.trie.root();
        self.trie
            .child_at_bytes(root, bytes)
            .is_some_and(|node| self.trie.node_children(node).next().is_some())
    }

    /// Tokens whose bytes are a prefix of `bytes`.
    pub(crate) fn tokens_along(&self, bytes: &[u8]) -> Vec<u32> {
        let mut tokens = Vec::new();
        let mut node = self.trie.root();
        for &byte in bytes {
            let Some(child) = self.trie.child_at_byte(node, byte) else {
                break;
            };
            node = child;
            tokens.extend(node.token_id());
        }
        tokens
    }

    /// Tokens spelling exactly `bytes` (longest match first), or `None` when
    /// some byte has no token.
    pub(crate) fn tokenize_exactly(&self, bytes: &[u8]) -> Option<Vec<u32>> {
        let tokens = self.trie.greedy_tokenize(bytes);
        let spelled: usize = tokens.iter().map(|&t| self.token_bytes(t).len()).sum();
        (spelled == bytes.len()).then_some(tokens)
    }

    /// The tokens that end a turn.
    pub fn stop_tokens(&self) -> &[u32] {
        &self.stop_tokens
    }

    /// Whether `token` ends a turn.
    pub fn is_stop(&self, token: u32) -> bool {
        self.stop_tokens.contains(&token)
    }
}
