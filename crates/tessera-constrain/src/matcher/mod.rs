//! One response's constraint: the automaton state, advanced token by token,
//! and the allowed-token mask for the next token, computed by walking the
//! vocabulary trie and skipping every subtree the automaton rejects
//! (toktrie's `add_bias`). Cost: O(trie nodes visited), which is small where
//! few bytes are allowed (names, literals) and the whole trie in free text.

mod forced;
mod likely;

pub use likely::GrammarDraft;

use crate::budget::BudgetMemo;
use crate::call::{CallMachine, CallState, Phase};
use crate::choice::{CallMode, ToolChoice};
use crate::envelope::format::Envelope;
use crate::envelope::syntax::CallSyntax;
use crate::error::ConstrainError;
use crate::json::{JsonState, Lex, Stacks};
use crate::tools::{AllowedNames, CompiledTools, ResponseSchema};
use crate::vocab::Vocabulary;
use crate::vocab::{is_text_structural, Split, SHORT_TOKEN_BYTES};
use std::collections::HashMap;
use std::sync::Arc;
use toktrie::{Recognizer, SimpleVob, TokTrie};

/// The tokens allowed next, as a bit set over the vocabulary.
#[derive(Debug, Clone)]
pub struct TokenMask {
    bits: SimpleVob,
}

impl TokenMask {
    /// Whether `token` is allowed.
    pub fn is_allowed(&self, token: u32) -> bool {
        (token as usize) < self.bits.len() && self.bits.is_allowed(token)
    }

    /// Number of allowed tokens.
    pub fn count(&self) -> usize {
        self.bits.num_set()
    }

    /// Allowed token ids, ascending.
    pub fn to_vec(&self) -> Vec<u32> {
        self.bits.to_list()
    }

    /// Set every disallowed logit to `-inf`.
    pub fn apply(&self, logits: &mut [f32]) {
        for (token, logit) in logits.iter_mut().enumerate() {
            if !self.is_allowed(token as u32) {
                *logit = f32::NEG_INFINITY;
            }
        }
    }
}

/// A response being constrained.
pub struct ToolCallMatcher {
    envelope: Envelope,
    tools: Arc<CompiledTools>,
    allowed: AllowedNames,
    mode: CallMode,
    parallel: bool,
    stacks: Stacks,
    state: CallState,
    prefill: String,
    finished: bool,
    /// The response is one JSON value (a response format), not tool calls.
    json_value: bool,
    /// Masks by state: inside a string or in free text the state repeats token
    /// after token, so most steps are a lookup.
    cache: HashMap<CallState, TokenMask>,
    /// Shortest completions found, by state (budget-aware closing).
    budget: BudgetMemo,
    /// Tokens that complete the response from the current state (kept while
    /// the model follows it, so a budget it fits stays met).
    plan: Vec<u32>,
    /// Per state: the non-plain allowed tokens with their next state's
    /// completion cost, most expensive first (budget-aware closing).
    priced: HashMap<CallState, Arc<Vec<(u32, u32)>>>,
    /// The whitespace this response writes after separators (for drafts).
    style: likely::SpaceStyle,
}

/// Plain tokens (see [`Vocabulary`]'s splits) that all lead to `end`
/// (`None`: free text, which may end anywhere), save `exceptions`.
struct PlainTokens<'v> {
    tokens: &'v SimpleVob,
    /// The trie of the other tokens.
    rest: &'v TokTrie,
    end: Option<CallState>,
    exceptions: Vec<u32>,
}

/// Masks kept per matcher before the cache is cleared.
const CACHE_LIMIT: usize = 64;

impl std::fmt::Debug for ToolCallMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCallMatcher")
            .field("mode", &self.mode)
            .field("state", &self.state)
            .finish()
    }
}

/// Drives the automaton under toktrie's trie walk: one state per pushed byte.
struct Walker<'m> {
    machine: CallMachine<'m>,
    stack: Vec<CallState>,
}

impl Recognizer for Walker<'_> {
    fn pop_bytes(&mut self, num: usize) {
        self.stack.truncate(self.stack.len() - num);
    }

    fn collapse(&mut self) {
        let top = self.stack[self.stack.len() - 1];
        self.stack.clear();
        self.stack.push(top);
    }

    fn trie_finished(&mut self) {
        self.stack.truncate(1);
    }

    fn try_push_byte(&mut self, byte: u8) -> bool {
        let top = self.stack[self.stack.len() - 1];
        match self.machine.step(top, byte) {
            Some(next) => {
                self.stack.push(next);
                true
            }
            None => false,
        }
    }
}

impl ToolCallMatcher {
    /// A matcher for `choice` over `tools`, calls written in `envelope`.
    /// `required` (and a specified tool set) starts after a prefill (the opener
    /// and the allowed names' common prefix) that the caller appends to the
    /// prompt: see [`prefill`](Self::prefill).
    pub fn new(tools: Arc<CompiledTools>, choice: &ToolChoice, envelope: &Envelope) -> Result<Self, ConstrainError> {
        let chosen = tools.resolve(choice.allowed.as_deref())?;
        if chosen.is_empty() && choice.mode != CallMode::None {
            let mode = if choice.mode == CallMode::Auto {
                "auto"
            } else {
                "required"
            };
            return Err(ConstrainError::NoTools(mode.into()));
        }
        let allowed = AllowedNames::new(&tools, chosen);
        // In `auto` mode the reply may open with a bare call.
        let phase = match choice.mode {
            CallMode::Auto if !envelope.bare.is_empty() => Phase::Tentative { item: 0, at: 0 },
            _ => Phase::Text { matched: 0 },
        };
        let start = CallState {
            phase,
            form: 0,
            tool: 0,
            json: JsonState::start(0),
        };
        let mut matcher = Self {
            envelope: envelope.clone(),
            tools,
            allowed,
            mode: choice.mode,
            parallel: choice.parallel,
            stacks: Stacks::default(),
            state: start,
            prefill: String::new(),
            finished: false,
            json_value: false,
            cache: HashMap::new(),
            budget: BudgetMemo::default(),
            plan: Vec::new(),
            priced: HashMap::new(),
            style: likely::SpaceStyle::default(),
        };
        if choice.mode == CallMode::Required {
            let prefix = matcher.allowed.common_prefix(&matcher.tools).to_string();
            let at = prefix
                .bytes()
                .try_fold(0, |node, byte| matcher.allowed.trie.step(node, byte))
                .unwrap_or(0);
            matcher.state.phase = Phase::Name { at };
            matcher.prefill = format!("{}{prefix}", envelope.call_start_text());
        }
        Ok(matcher)
    }

    /// A matcher for a response that is exactly one JSON value of `schema`
    /// (OpenAI's `response_format`), then end of turn.
    pub fn json_value(schema: &ResponseSchema) -> Self {
        let root = schema.root;
        let allowed = AllowedNames::new(&schema.compiled, vec![0]);
        Self {
            envelope: Envelope::bare_value(),
            tools: schema.compiled.clone(),
            allowed,
            mode: CallMode::Required,
            parallel: false,
            stacks: Stacks::default(),
            state: CallState {
                phase: Phase::Args,
                form: 0,
                tool: 0,
                json: JsonState::start(root),
            },
            prefill: String::new(),
            finished: false,
            json_value: true,
            cache: HashMap::new(),
            budget: BudgetMemo::default(),
            plan: Vec::new(),
            priced: HashMap::new(),
            style: likely::SpaceStyle::default(),
        }
    }

    /// Whether the response is one JSON value rather than text and tool calls.
    pub fn is_json_value(&self) -> bool {
        self.json_value
    }

    /// The envelope calls are written in.
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// Text to append to the prompt before generating (empty unless a call is required).
    pub fn prefill(&self) -> &str {
        &self.prefill
    }

    fn machine(&mut self) -> CallMachine<'_> {
        CallMachine {
            envelope: &self.envelope,
            tools: &self.tools,
            allowed: &self.allowed,
            mode: self.mode,
            parallel: self.parallel,
            stacks: &mut self.stacks,
        }
    }

    /// Whether the response may end here.
    pub fn is_accepting(&self) -> bool {
        self.state.accepting(&self.envelope)
    }

    /// Whether an end-of-turn token was accepted.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The state after `bytes`, if every byte is allowed (the matcher is not changed).
    fn try_bytes(&mut self, bytes: &[u8]) -> Option<CallState> {
        let start = self.state;
        let mut machine = self.machine();
        bytes.iter().try_fold(start, |state, &byte| machine.step(state, byte))
    }

    /// Advance over `text` if every byte of it is allowed (all or nothing).
    pub fn advance_text(&mut self, text: &str) -> bool {
        match self.try_bytes(text.as_bytes()) {
            Some(state) if !self.finished => {
                let from = self.state;
                self.observe_style(from, text.as_bytes());
                self.state = state;
                self.plan.clear();
                true
            }
            _ => false,
        }
    }

    /// Whether the response is in free text (outside any call; a bare call's
    /// head is free text until its arguments begin).
    pub fn in_free_text(&self) -> bool {
        matches!(self.state.phase, Phase::Text { .. } | Phase::Tentative { .. })
    }

    /// How this response's calls appear in its text, for the parsers; `None`
    /// when it cannot hold calls (mode `none`, a JSON value).
    pub fn call_syntax(&self) -> Option<CallSyntax> {
        if self.json_value || self.mode == CallMode::None {
            return None;
        }
        let syntax = CallSyntax::new(self.envelope.format());
        Some(match self.mode {
            CallMode::Auto => syntax.with_bare_calls(self.allowed.tools.iter().map(|&i| self.tools.names[i].clone())),
            _ => syntax,
        })
    }

    /// Whether the response is inside a string value of a call's arguments
    /// (or of a JSON response).
    pub fn in_json_string(&self) -> bool {
        matches!(self.state.phase, Phase::Args) && self.state.json.in_string()
    }

    /// Whether the response is inside a call: its envelope (or what may
    /// still be a bare call's head) or its arguments.
    pub fn in_call(&self) -> bool {
        matches!(
            self.state.phase,
            Phase::Tentative { .. } | Phase::Fixed { .. } | Phase::Name { .. } | Phase::Args
        )
    }

    /// Whether a complete call has been read and nothing after it yet.
    pub fn after_call(&self) -> bool {
        matches!(self.state.phase, Phase::AfterCall | Phase::Done)
    }

    /// Whether `token` may come next (the slow way: its bytes one by one; for tests).
    pub fn allows_token(&mut self, vocab: &Vocabulary, token: u32) -> bool {
        self.after_token(vocab, token).is_some()
    }

    /// Where `token` leads: `Some(None)` = an end-of-turn token ends the response,
    /// `Some(Some(state))` = the state after its bytes, `None` = not allowed.
    fn after_token(&mut self, vocab: &Vocabulary, token: u32) -> Option<Option<CallState>> {
        if self.finished || token as usize >= vocab.len() {
            return None;
        }
        if vocab.is_stop(token) {
            return self.is_accepting().then_some(None);
        }
        let bytes = vocab.token_bytes(token);
        if bytes.is_empty() {
            return None;
        }
        self.try_bytes(bytes).map(Some)
    }

    /// The tokens allowed next (nothing once finished); cached by state.
    pub fn compute_mask(&mut self, vocab: &Vocabulary) -> TokenMask {
        if let Some(mask) = self.cache.get(&self.state).filter(|_| !self.finished) {
            return mask.clone();
        }
        let mask = self.compute_mask_uncached(vocab);
        if self.cache.len() >= CACHE_LIMIT {
            self.cache.clear();
        }
        self.cache.insert(self.state, mask.clone());
        mask
    }

    /// The allowed tokens outside the plain set (and the plain exceptions),
    /// each with the tokens its next state needs to complete, most first;
    /// cached by state.
    fn priced_tokens(&mut self, vocab: &Vocabulary, allowed: &SimpleVob, exceptions: Vec<u32>) -> Arc<Vec<(u32, u32)>> {
        let state = self.state;
        if let Some(priced) = self.priced.get(&state) {
            return priced.clone();
        }
        let trie = match self.plain_tokens(vocab) {
            Some(plain) => plain.rest,
            None => &vocab.trie,
        };
        let mut priced = Vec::new();
        let mut todo = vec![(trie.root(), state)];
        while let Some((node, at)) = todo.pop() {
            for child in trie.node_children(node) {
                let Some(next) = self.machine().step(at, child.byte()) else {
                    continue;
                };
                if let Some(token) = child.token_id().filter(|&t| allowed.is_allowed(t) && !vocab.is_stop(t)) {
                    priced.push((token, self.cost_of(vocab, next)));
                }
                todo.push((child, next));
            }
        }
        for token in exceptions.into_iter().filter(|&t| allowed.is_allowed(t)) {
            if let Some(Some(next)) = self.after_token(vocab, token) {
                priced.push((token, self.cost_of(vocab, next)));
            }
        }
        priced.sort_unstable_by_key(|&(_, cost)| std::cmp::Reverse(cost));
        let priced = Arc::new(priced);
        if self.priced.len() >= CACHE_LIMIT {
            self.priced.clear();
        }
        self.priced.insert(state, priced.clone());
        priced
    }

    /// Tokens that complete the response from `state` (0 when none was found:
    /// such a state is not held against the budget).
    fn cost_of(&mut self, vocab: &Vocabulary, state: CallState) -> u32 {
        self.completion_tokens(vocab, state).map_or(0, |plan| plan.len() as u32)
    }

    /// Plain tokens that lead to one state, save the exceptions.
    fn plain_tokens<'v>(&mut self, vocab: &'v Vocabulary) -> Option<PlainTokens<'v>> {
        let state = self.state;
        let split = self.split(vocab)?;
        let (end, exceptions) = match state.json.lex {
            _ if std::ptr::eq(split, &vocab.text) => (None, Vec::new()),
            // A key in the declared names' trie: plain tokens leave it for an
            // undeclared key, except those spelling the start of a declared name.
            Lex::KeyStr { at: Some(_), text } => {
                let rests = self.machine().json().declared_key_rests(state.json);
                let exceptions = rests.iter().flat_map(|rest| vocab.tokens_along(rest)).collect();
                let json = JsonState {
                    lex: Lex::KeyStr { at: None, text },
                    ..state.json
                };
                (Some(CallState { json, ..state }), exceptions)
            }
            // A plain token only moves the count towards minLength (those that
            // would pass maxLength are not in the mask): priced as the state.
            _ => (Some(state), Vec::new()),
        };
        Some(PlainTokens {
            tokens: &split.plain,
            rest: &split.rest,
            end,
            exceptions,
        })
    }

    /// Where plain tokens cannot change the state (free text, inside a string
    /// or key), the vocabulary's split for it: those allowed wholesale, the rest walked.
    fn split<'v>(&mut self, vocab: &'v Vocabulary) -> Option<&'v Split> {
        let state = self.state;
        match state.phase {
            // A bare call's head only commits at a `{`: plain tokens never end it otherwise.
            Phase::Text { matched: 0 } | Phase::Tentative { .. }
                if is_text_structural(self.envelope.pieces.opener[0]) =>
            {
                Some(&vocab.text)
            }
            Phase::Args if self.machine().json().in_plain_string(state.json, SHORT_TOKEN_BYTES) => Some(&vocab.string),
            _ => None,
        }
    }

    /// The tokens allowed next, always by a fresh trie walk (benchmarks, tests).
    pub fn compute_mask_uncached(&mut self, vocab: &Vocabulary) -> TokenMask {
        if self.finished {
            return TokenMask {
                bits: vocab.trie.alloc_token_set(),
            };
        }
        // Where plain tokens cannot change the state, allow them wholesale and walk the rest.
        let state = self.state;
        let split = self.split(vocab);
        let (mut bits, trie) = match split {
            Some(split) => (split.plain.clone(), &split.rest),
            None => (vocab.trie.alloc_token_set(), &vocab.trie),
        };
        let accepting = self.is_accepting();
        let start = self.state;
        let mut walker = Walker {
            machine: self.machine(),
            stack: vec![start],
        };
        trie.add_bias(&mut walker, &mut bits, &[]);
        // Near a string's maxLength, a long plain token is allowed only if its characters fit.
        if split.is_some_and(|s| std::ptr::eq(s, &vocab.string)) {
            if let Some(room) = self.machine().json().string_room(state.json) {
                for &(token, chars) in &vocab.long_string_tokens {
                    bits.set(token as usize, chars <= room);
                }
            }
        }
        // Special tokens are never spelled by the automaton; only end-of-turn, where a response may end.
        for &stop in &vocab.stop_tokens {
            bits.set(stop as usize, accepting);
        }
        TokenMask { bits }
    }

    /// Advance by a sampled token; an error if the mask would not have allowed it.
    pub fn accept_token(&mut self, vocab: &Vocabulary, token: u32) -> Result<(), RejectedToken> {
        match self.after_token(vocab, token).ok_or(RejectedToken(token))? {
            None => self.finished = true,
            Some(state) => {
                let from = self.state;
                self.observe_style(from, vocab.token_bytes(token));
                self.state = state;
            }
        }
        if self.plan.first() == Some(&token) {
            self.plan.remove(0);
        } else {
            self.plan.clear();
        }
        Ok(())
    }

    /// The fewest tokens found that complete the response from here: 0 where
    /// it may end; `None` when no completion was found (never for a state the
    /// automaton reaches, barring a bug).
    pub fn tokens_to_complete(&mut self, vocab: &Vocabulary) -> Option<usize> {
        let state = self.state;
        self.completion_tokens(vocab, state).map(|plan| plan.len())
    }

    fn completion_tokens(&mut self, vocab: &Vocabulary, state: CallState) -> Option<Vec<u32>> {
        let mut memo = std::mem::take(&mut self.budget);
        let tokens = self.machine().completion_tokens(state, vocab, &mut memo);
        self.budget = memo;
        tokens
    }

    /// The tokens allowed next when at most `remaining` more tokens may be
    /// generated (this one included): those after which the response can
    /// still be completed within the rest. The plan's next token always can,
    /// so a response cut by the budget is complete and valid whenever its
    /// budget covered [`tokens_to_complete`](Self::tokens_to_complete) at the start.
    pub fn compute_mask_within(&mut self, vocab: &Vocabulary, remaining: usize) -> TokenMask {
        let mut mask = self.compute_mask(vocab);
        if self.finished || remaining == 0 {
            return mask;
        }
        let state = self.state;
        if let Some(fresh) = self.completion_tokens(vocab, state) {
            if self.plan.is_empty() || fresh.len() < self.plan.len() {
                self.plan = fresh;
            }
        }
        let left = remaining - 1;
        // Plain tokens that all lead to one state (or stay in free text) are
        // priced at once; the others are priced once per state (a walk of
        // their trie), most expensive first, so a roomy budget stops at the first.
        let unfiltered = mask.bits.clone();
        let mut exceptions = Vec::new();
        if let Some(plain) = self.plain_tokens(vocab) {
            let fits = plain
                .end
                .is_none_or(|end| self.completion_tokens(vocab, end).is_none_or(|plan| plan.len() <= left));
            if !fits {
                let mut bulk = plain.tokens.clone();
                for &token in &plain.exceptions {
                    bulk.set(token as usize, false);
                }
                mask.bits.sub(&bulk);
            }
            exceptions = plain.exceptions;
        }
        for &(token, cost) in self.priced_tokens(vocab, &unfiltered, exceptions).iter() {
            if cost as usize <= left {
                break;
            }
            mask.bits.set(token as usize, false);
        }
        if let Some(&next) = self.plan.first() {
            mask.bits.set(next as usize, true);
        }
        mask
    }
}

/// A token the constraint does not allow here (a bug upstream: masks prevent it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("token {0} is not allowed by the tool-call constraint here")]
pub struct RejectedToken(pub u32);
