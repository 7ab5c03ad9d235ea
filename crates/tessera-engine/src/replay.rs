//! Token replay: a chat's next prompt starts with the text of the last one and
//! the reply generated after it, but tokenizing that text again need not give
//! the tokens the engine ran (the reply's tokens were the model's choice, and
//! a prefill was tokenized apart from its prompt), and the prefix cache
//! matches tokens. So the engine remembers, for its recent sequences, the text
//! their tokens decode to; a prompt that starts with one of those texts
//! reuses its tokens and tokenizes only the rest. The split falls where a
//! sequence ended (for a chat, after its end-of-turn token, a special token no
//! merge crosses), and the tokens reused spell exactly the text they replace.

use std::collections::VecDeque;
use std::sync::Mutex;
use tessera_model::Tokenizer;

/// Sequences remembered (most recent first out when full).
const REMEMBERED: usize = 64;

/// Shortest text worth remembering (bytes): a prompt shorter gains nothing.
const SHORTEST: usize = 64;

/// One finished sequence: the text its tokens decode to, and the tokens.
#[derive(Debug)]
struct Replay {
    text: String,
    tokens: Vec<u32>,
}

/// Recent sequences' texts and tokens.
#[derive(Debug, Default)]
pub(crate) struct ReplayMemory {
    entries: Mutex<VecDeque<Replay>>,
}

impl ReplayMemory {
    /// Remember a finished sequence's `tokens` (prompt, prefill and generated).
    pub fn remember(&self, tokenizer: &Tokenizer, tokens: &[u32]) {
        let Ok(text) = tokenizer.decode(tokens) else {
            return;
        };
        // A token that is part of a character decodes lossily: such a text is not its tokens.
        if text.len() < SHORTEST || text.contains('\u{FFFD}') {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        entries.retain(|entry| entry.text != text);
        if entries.len() == REMEMBERED {
            entries.pop_back();
        }
        entries.push_front(Replay {
            text,
            tokens: tokens.to_vec(),
        });
    }

    /// `text`'s tokens: the longest remembered sequence whose text starts it,
    /// then the rest tokenized; `None` when none does.
    pub fn tokens_for(&self, tokenizer: &Tokenizer, text: &str) -> Option<Vec<u32>> {
        let (length, mut tokens) = {
            let entries = self.entries.lock().ok()?;
            let entry = entries
                .iter()
                .filter(|entry| text.starts_with(entry.text.as_str()))
                .max_by_key(|entry| entry.text.len())?;
            (entry.text.len(), entry.tokens.clone())
        };
        let rest = &text[length..];
        if !rest.is_empty() {
            tokens.extend(tokenizer.encode(rest).ok()?);
        }
        Some(tokens)
    }
}
