//! One request's live state inside the engine: its tokens, the K/V it has in
//! the pool, its sampler and its event channel.

use crate::draft::Drafter;
use crate::escaped::EscapedPrompt;
use crate::{Event, GenerateRequest};
use std::time::Instant;
use tessera_constrain::ToolCallMatcher;
use tessera_kv::SeqId;
use tessera_model::{Sequence, TextStream};
use tessera_sample::Sampler;
use tokio::sync::mpsc::UnboundedSender;

/// How a request stops, fixed at submission.
#[derive(Debug, Clone)]
pub(crate) struct StopRule {
    pub max_tokens: usize,
    pub stop_at_eos: bool,
    pub stop_tokens: Vec<u32>,
    pub stop_strings: Vec<String>,
}

/// A request the engine is serving (waiting, running or preempted).
///
/// Invariant: `kv.len() <= tokens.len()`; the tokens still to run are
/// `tokens[kv.len()..]` (the uncached prompt, or the last sampled token).
#[derive(Debug)]
pub(crate) struct Active {
    pub id: SeqId,
    /// Prompt followed by the generated tokens.
    pub tokens: Vec<u32>,
    pub prompt_len: usize,
    /// The K/V this sequence holds in the pool (empty while waiting).
    pub kv: Sequence,
    pub sampler: Sampler,
    pub stop: StopRule,
    pub text: TextStream,
    /// The end of the free text so far, as long as the longest stop string.
    pub recent_text: String,
    pub events: UnboundedSender<Event>,
    pub times: Times,
    /// Prompt tokens reused at the first admission (`None` before it).
    pub cached_tokens: Option<usize>,
    /// The tool-call constraint, when the request has one.
    pub matcher: Option<ToolCallMatcher>,
    /// The client's session, whose prefix is pinned when this request finishes.
    pub session: Option<std::sync::Arc<str>>,
    /// What to verify after the pending token next step, and the request's drafting counts.
    pub draft: Drafter,
    /// Whether this request drafts at all (`GenerateRequest::speculate`).
    pub speculate: bool,
    /// The prompt's escaped tokens being made (queued at submission for a
    /// request that may call a tool and drafts) until its first string takes
    /// them into `draft`.
    pub escaping: Option<EscapedPrompt>,
}

/// When things happened to a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Times {
    pub submitted: Instant,
    pub admitted: Option<Instant>,
    pub first_token: Option<Instant>,
    pub last_token: Option<Instant>,
}

impl Active {
    pub fn new(
        id: SeqId,
        request: GenerateRequest,
        sampler: Sampler,
        matcher: Option<ToolCallMatcher>,
        events: UnboundedSender<Event>,
    ) -> Self {
        Self {
            id,
            prompt_len: request.prompt.len(),
            session: request.session,
            speculate: request.speculate,
            tokens: request.prompt,
            kv: Sequence::new(),
            sampler,
            stop: StopRule {
                max_tokens: request.max_tokens,
                stop_at_eos: request.stop_at_eos,
                stop_tokens: request.stop_tokens,
                stop_strings: request.stop_strings,
            },
            recent_text: String::new(),
            text: TextStream::new(),
            events,
            times: Times {
                submitted: Instant::now(),
                admitted: None,
                first_token: None,
                last_token: None,
            },
            cached_tokens: None,
            matcher,
            draft: Drafter::default(),
            escaping: None,
        }
    }

    /// Tokens generated so far.
    pub fn generated(&self) -> usize {
        self.tokens.len() - self.prompt_len
    }

    /// Tokens still to run through the model before the next sample.
    pub fn pending(&self) -> usize {
        self.tokens.len() - self.kv.len()
    }

    /// Whether the prompt is done and the sequence feeds one sampled token per step.
    pub fn is_decoding(&self) -> bool {
        self.kv.len() >= self.prompt_len
    }

    /// Whether the caller dropped its receiver.
    pub fn is_cancelled(&self) -> bool {
        self.events.is_closed()
    }

    /// Whether `token` ends generation.
    pub fn is_stop_token(&self, token: u32, tokenizer: &tessera_model::Tokenizer) -> bool {
        let stop_at_eos = self.stop.stop_at_eos || self.matcher.is_some();
        (stop_at_eos && tokenizer.is_stop(token)) || self.stop.stop_tokens.contains(&token)
    }

    /// Add newly streamed `text`; whether the free text now contains a stop string
    /// (text inside a tool call never stops generation).
    pub fn hits_stop_string(&mut self, text: &str) -> bool {
        let longest = self.stop.stop_strings.iter().map(String::len).max().unwrap_or(0);
        if longest == 0 || self.matcher.as_ref().is_some_and(|m| !m.in_free_text()) {
            return false;
        }
        self.recent_text.push_str(text);
        if self
            .stop
            .stop_strings
            .iter()
            .any(|stop| self.recent_text.contains(stop.as_str()))
        {
            return true;
        }
        // Keep the last `longest - 1` bytes (on a character boundary): enough for a match across tokens.
        let mut cut = self.recent_text.len().saturating_sub(longest - 1);
        while !self.recent_text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.recent_text.drain(..cut);
        false
    }
}
