//! What a caller submits and what streams back.

use std::sync::Arc;
use std::time::Duration;
use tessera_constrain::{CompiledTools, ParsedResponse, ResponseSchema, ToolChoice};
use tessera_sample::SamplingParams;

/// Constrain a response to the tool-call format: which tools, and how they may be called.
#[derive(Debug, Clone)]
pub struct ToolConstraint {
    /// The compiled tool set (compile once per set: `CompiledTools::compile`).
    pub tools: Arc<CompiledTools>,
    /// Mode, allowed names or families, parallel calls.
    pub choice: ToolChoice,
}

/// What masking holds a response to.
#[derive(Debug, Clone)]
pub enum Constraint {
    /// The tool-call format: which tools, and how they may be called
    /// (end-of-turn tokens then always end generation).
    Tools(ToolConstraint),
    /// One JSON value of the first tool's parameters schema (a response format).
    Json(ResponseSchema),
}

/// A generation request over already-tokenized input.
#[derive(Debug, Clone)]
pub struct GenerateRequest {
    /// Prompt token ids (at least one).
    pub prompt: Vec<u32>,
    /// How tokens are drawn.
    pub sampling: SamplingParams,
    /// Most tokens to generate (at least one).
    pub max_tokens: usize,
    /// Stop at the tokenizer's end-of-turn tokens (off to measure fixed lengths).
    pub stop_at_eos: bool,
    /// More token ids that end generation.
    pub stop_tokens: Vec<u32>,
    /// Strings that end generation once the free text (outside tool calls)
    /// contains one; the text streamed up to it includes it (callers cut it).
    pub stop_strings: Vec<String>,
    /// Mask tokens so the response obeys tools or a JSON format (none: free text).
    pub constraint: Option<Constraint>,
    /// The client's session (a conversation or agent run), if it gave one:
    /// logged with the request, and its prefix is kept warm under pressure.
    pub session: Option<Arc<str>>,
    /// Draft and verify under the engine's speculation setting (the
    /// default); `false` decodes this request plainly, one token per step
    /// (`tessera bench decode` compares both on one engine and one copy of
    /// the weights). The output is the same either way.
    pub speculate: bool,
}

impl GenerateRequest {
    /// Greedy decoding of up to `max_tokens` after `prompt`, stopping at end of turn.
    pub fn greedy(prompt: Vec<u32>, max_tokens: usize) -> Self {
        Self {
            prompt,
            sampling: SamplingParams::default(),
            max_tokens,
            stop_at_eos: true,
            stop_tokens: Vec::new(),
            stop_strings: Vec::new(),
            constraint: None,
            session: None,
            speculate: true,
        }
    }
}

/// Most stop strings per request.
pub const MAX_STOP_STRINGS: usize = 4;
/// Longest stop string, in bytes.
pub const MAX_STOP_BYTES: usize = 256;

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-turn or stop token was drawn (it is not streamed as text).
    Stop,
    /// `max_tokens` were generated, or the context or the KV pool is full.
    Length,
    /// A constrained response ended after one or more tool calls.
    ToolCalls,
}

/// Token accounting, OpenAI-style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Tokens generated (a final stop token included).
    pub completion_tokens: usize,
    /// Prompt tokens whose K/V came from the prefix cache at admission.
    pub cached_tokens: usize,
    /// Tokens drafted, kept and forced by the constraint (speculative decoding).
    pub speculation: crate::DraftCounts,
}

/// Where the request's time went, measured by the engine.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Timings {
    /// Submission to first admission.
    pub queued: Duration,
    /// Submission to the first generated token.
    pub time_to_first_token: Duration,
    /// Submission to the end.
    pub total: Duration,
}

/// How a request ended, sent as its last event.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Why.
    pub reason: FinishReason,
    /// Token counts.
    pub usage: Usage,
    /// Timings.
    pub timings: Timings,
    /// For a constrained request: the prefilled start of the response (part of the
    /// prompt) and the whole response split into free text and calls.
    pub tool_output: Option<ToolOutput>,
}

/// What a constrained response said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text the engine appended to the prompt to start the response (required calls).
    pub prefill: String,
    /// The response (prefill included) as free text and typed calls.
    pub parsed: ParsedResponse,
}

/// Where a generated token came from. Under speculative decoding a step
/// runs the pending token and a draft in one forward; the draft's tokens
/// that the sampled ones agree with come out of that step too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenOrigin {
    /// Sampled from the step's last verified row (the only kind without
    /// drafts): one forward pass per such token.
    Sampled,
    /// Forced by the constraint (grammar fast-forward), kept.
    Forced,
    /// Drafted from the sequence's own context (prompt lookup), or a call's
    /// likely punctuation past what the constraint forces, kept.
    Copied,
}

impl TokenOrigin {
    /// `forced`, `copied` or `sampled`.
    pub fn name(self) -> &'static str {
        match self {
            TokenOrigin::Sampled => "sampled",
            TokenOrigin::Forced => "forced",
            TokenOrigin::Copied => "copied",
        }
    }
}

/// One item of a request's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A generated token and the text it completes (empty while a multi-byte
    /// character is still incomplete; the text arrives with a later token).
    Token {
        /// Token id.
        id: u32,
        /// Newly completed text.
        text: String,
        /// Whether the token ran as a draft row (forced or copied) or was
        /// sampled after the step's last kept draft. Every token is sampled
        /// from its logits either way; the origin says what it cost.
        origin: TokenOrigin,
        /// The engine step (forward pass) that produced it: tokens of one
        /// step share it.
        step: u64,
    },
    /// The request finished normally (the stream's last event).
    Finished(Completion),
    /// The request failed (the stream's last event).
    Failed(crate::EngineError),
}
