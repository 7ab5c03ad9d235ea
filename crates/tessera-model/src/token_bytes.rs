//! The raw bytes of every token, for byte-level constrained decoding.
//!
//! Byte-level BPE vocabularies (GPT-2 family, SmolLM2, Llama 3, Qwen2) spell
//! each byte as one printable character (GPT-2's `bytes_to_unicode` table);
//! SentencePiece vocabularies spell a space as `▁` and raw bytes as `<0xNN>`.
//! Special tokens become `0xFF` followed by their text (llguidance's
//! convention: no text token starts with `0xFF`, which is never valid UTF-8).

use crate::tokenizer::Tokenizer;
use std::collections::HashMap;
use tokenizers::DecoderWrapper;
use toktrie::TokTrie;

/// GPT-2's byte → char table, inverted: char → byte.
fn byte_level_decoder() -> HashMap<char, u8> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut next = 256u32;
    (0u32..=255)
        .map(|b| {
            let c = if printable(b) {
                b
            } else {
                next += 1;
                next - 1
            };
            (char::from_u32(c).unwrap_or('\u{FFFD}'), b as u8)
        })
        .collect()
}

/// `<0xNN>` → the byte.
fn byte_fallback(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok().filter(|_| hex.len() == 2)
}

impl Tokenizer {
    /// The bytes each id stands for, indexed by id (special tokens marked with
    /// `toktrie`'s [`TokTrie::SPECIAL_TOKEN_MARKER`], the convention's one definition; ids without a token are empty).
    pub fn token_bytes(&self) -> Vec<Vec<u8>> {
        let specials: HashMap<u32, String> = self
            .inner
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, token)| token.special)
            .map(|(id, token)| (id, token.content))
            .collect();
        let byte_level = matches!(self.inner.get_decoder(), Some(DecoderWrapper::ByteLevel(_)));
        let table = byte_level_decoder();
        (0..self.vocab_size() as u32)
            .map(|id| {
                if let Some(text) = specials.get(&id) {
                    return [&[TokTrie::SPECIAL_TOKEN_MARKER], text.as_bytes()].concat();
                }
                let Some(token) = self.inner.id_to_token(id) else {
                    return Vec::new();
                };
                if byte_level {
                    // Every char of a byte-level token is in the table; anything else is kept as UTF-8.
                    let mut bytes = Vec::with_capacity(token.len());
                    for c in token.chars() {
                        match table.get(&c) {
                            Some(&b) => bytes.push(b),
                            None => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                        }
                    }
                    bytes
                } else if let Some(byte) = byte_fallback(&token) {
                    vec![byte]
                } else {
                    token.replace('\u{2581}', " ").into_bytes()
                }
            })
            .collect()
    }
}
