//! The end of a prompt's text as a JSON string holds it, tokenized: inside a
//! call's string arguments, drafts are searched there too (`draft.rs`), since
//! an agent writes back what it read, escaped. Making them for a 34 KB prompt
//! took 289 ms on the Zen 4 EPYC (the first in its process, so with the plain
//! tokenizer's setup), which on the engine thread stalled every running
//! sequence's step at a call's first string. So one thread per engine makes
//! them, in submission order, from the moment a request that may call a tool
//! is submitted: they are made while it waits and prefills. A request whose
//! tokens are not made yet at its first string waits for them rather than
//! drafting without them, so its drafts never depend on timing; one that
//! ends first is skipped.

use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Weak};
use tessera_model::Tokenizer;

/// How much of the prompt's end the escaped lookup searches.
const ESCAPED_PROMPT_BYTES: usize = 32 * 1024;

/// The engine's escaping thread: takes prompts, makes their escaped tokens.
#[derive(Debug)]
pub(crate) struct Escaper {
    jobs: Sender<Job>,
}

/// A prompt to escape, the channel its tokens go back on, and whether its
/// request still wants them.
struct Job {
    prompt: Vec<u32>,
    reply: SyncSender<Vec<u32>>,
    wanted: Weak<()>,
}

impl Escaper {
    /// Start the thread; it ends when the last handle to it is dropped.
    pub fn start(tokenizer: Arc<Tokenizer>) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("tessera-escape".into())
            .spawn(move || {
                for job in queue {
                    if job.wanted.strong_count() == 0 {
                        continue;
                    }
                    let start = std::time::Instant::now();
                    let tokens = escaped_prompt(&job.prompt, &tokenizer);
                    tracing::debug!(tokens = tokens.len(), elapsed = ?start.elapsed(), "escaped prompt");
                    // The request may have ended meanwhile: nothing to deliver then.
                    drop(job.reply.send(tokens));
                }
            })?;
        Ok(Self { jobs })
    }

    /// Queue `prompt`'s escaped tokens.
    pub fn escape(&self, prompt: Vec<u32>) -> EscapedPrompt {
        let (reply, tokens) = mpsc::sync_channel(1);
        let wanted = Arc::new(());
        let job = Job {
            prompt,
            reply,
            wanted: Arc::downgrade(&wanted),
        };
        // A thread that is gone dropped the job's channel: `wait` gives no tokens.
        if self.jobs.send(job).is_err() {
            tracing::warn!("the escaping thread has stopped: drafts inside strings search the sequence only");
        }
        EscapedPrompt {
            tokens,
            _wanted: wanted,
        }
    }
}

/// A prompt's escaped tokens, being made by the [`Escaper`].
#[derive(Debug)]
pub(crate) struct EscapedPrompt {
    tokens: Receiver<Vec<u32>>,
    /// Dropped with the request: the escaper skips a job nobody wants.
    _wanted: Arc<()>,
}

impl EscapedPrompt {
    /// The tokens, waiting for them if they are not made yet (none if the
    /// escaping thread died).
    pub fn wait(self) -> Vec<u32> {
        match self.tokens.try_recv() {
            Ok(tokens) => tokens,
            Err(TryRecvError::Disconnected) => Vec::new(),
            Err(TryRecvError::Empty) => {
                let start = std::time::Instant::now();
                let tokens = self.tokens.recv().unwrap_or_default();
                tracing::debug!(waited = ?start.elapsed(), "the engine waited for the escaped prompt");
                tokens
            }
        }
    }
}

/// The end of the prompt's text (its last [`ESCAPED_PROMPT_BYTES`], where an
/// agent's latest tool results are) as a JSON string holds it, tokenized by
/// the model's own tokenizer: the model writes a string's content as that
/// tokenizer splits it (`.\` then `n`), and a draft split otherwise (longest
/// match first gave `.\n`) is rejected at its first line break. Special-token
/// text stays plain text, and the plain tokenizer keeps no word cache, so the
/// escaped words do not pile up in memory. Empty when it does not decode.
fn escaped_prompt(prompt: &[u32], tokenizer: &Tokenizer) -> Vec<u32> {
    let Ok(text) = tokenizer.decode(prompt) else {
        return Vec::new();
    };
    let mut from = text.len().saturating_sub(ESCAPED_PROMPT_BYTES);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    tokenizer.encode_plain(&json_escaped(&text[from..])).unwrap_or_default()
}

/// `text` as the inside of a JSON string, escaped as serializers write it
/// (`\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, other controls as `\u00XX`).
fn json_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn text_is_escaped_as_a_json_string_holds_it() {
        let text = "line \"one\"\n\tC:\\dir \u{1} é";
        assert_eq!(super::json_escaped(text), r#"line \"one\"\n\tC:\\dir \u0001 é"#);
    }
}
