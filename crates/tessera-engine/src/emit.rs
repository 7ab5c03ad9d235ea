//! From logits to streamed tokens: drawing a token (through the tool-call
//! mask when there is one), emitting it, verifying a draft row by row, and
//! proposing the next draft.

use crate::active::Active;
use crate::draft::{keep_agreeing, SpeculationConfig};
use crate::escaped::EscapedPrompt;
use crate::{EngineError, EngineMetrics, Event, FinishReason, TokenOrigin};
use std::time::Instant;
use tessera_constrain::{GrammarDraft, Vocabulary};
use tessera_kv::BlockPool;
use tessera_model::{Logits, Tokenizer};

/// What sampling a token needs besides the sequence.
pub(crate) struct StepContext<'a> {
    pub tokenizer: &'a Tokenizer,
    pub vocab: &'a std::sync::OnceLock<Vocabulary>,
    pub metrics: &'a mut EngineMetrics,
    /// The model's context: a sequence stops there whatever its `max_tokens`.
    pub max_context: usize,
    /// The engine step being absorbed (stamped on its tokens).
    pub step: u64,
}

impl<'a> StepContext<'a> {
    /// The constraint's vocabulary, built on first use.
    fn vocab(&self) -> &'a Vocabulary {
        let tokenizer = self.tokenizer;
        self.vocab
            .get_or_init(|| Vocabulary::new(&tokenizer.token_bytes(), tokenizer.stop_ids()))
    }
}

/// Tokens `seq` may still generate, the next one included: a call under way
/// closes within them (budget-aware closing).
fn remaining(seq: &Active, max_context: usize) -> usize {
    seq.stop
        .max_tokens
        .saturating_sub(seq.generated())
        .min(max_context.saturating_sub(seq.tokens.len()))
}

/// Draw the next token, through the tool-call mask when the request has one.
fn draw(seq: &mut Active, logits: &mut [f32], context: &mut StepContext<'_>) -> Result<u32, EngineError> {
    let remaining = remaining(seq, context.max_context);
    let Some(matcher) = seq.matcher.as_mut() else {
        return Ok(seq.sampler.sample(logits, &seq.tokens)?);
    };
    let vocab = context.vocab();
    let started = Instant::now();
    let mask = matcher.compute_mask_within(vocab, remaining.max(1));
    let elapsed = started.elapsed();
    let token = seq
        .sampler
        .sample_allowed(logits, &seq.tokens, |t| mask.is_allowed(t))?;
    matcher.accept_token(vocab, token).map_err(EngineError::sampling)?;
    context.metrics.mask_time.observe(elapsed);
    Ok(token)
}

/// Sample the next token from `logits`, append it and stream its text. Returns
/// the finish reason when this token ends the request. `drafted` is the draft
/// token this row verifies and where it came from: the token's origin when
/// the sampled one agrees with it.
pub(crate) fn emit_next(
    seq: &mut Active,
    logits: &mut [f32],
    drafted: Option<(u32, TokenOrigin)>,
    context: &mut StepContext<'_>,
) -> Result<Option<FinishReason>, EngineError> {
    let token = draw(seq, logits, context)?;
    let origin = match drafted {
        Some((draft, origin)) if draft == token => origin,
        _ => TokenOrigin::Sampled,
    };
    let (tokenizer, metrics) = (context.tokenizer, &mut *context.metrics);
    seq.tokens.push(token);
    let now = Instant::now();
    match seq.times.last_token {
        None => metrics.time_to_first_token.observe(now - seq.times.submitted),
        Some(previous) => metrics.inter_token.observe(now - previous),
    }
    seq.times.first_token.get_or_insert(now);
    seq.times.last_token = Some(now);
    metrics.generated_tokens += 1;
    if seq.is_stop_token(token, tokenizer) {
        return Ok(Some(FinishReason::Stop));
    }
    let text = seq
        .text
        .push(tokenizer, token)
        .map_err(|error| EngineError::model(format!("decoding token {token}"), error))?
        .unwrap_or_default();
    let stopped = seq.hits_stop_string(&text);
    // A closed receiver is noticed (and the sequence cancelled) at the next sweep.
    let _ = seq.events.send(Event::Token {
        id: token,
        text,
        origin,
        step: context.step,
    });
    if stopped {
        return Ok(Some(FinishReason::Stop));
    }
    if seq.generated() >= seq.stop.max_tokens || seq.tokens.len() >= context.max_context {
        return Ok(Some(FinishReason::Length));
    }
    Ok(None)
}

/// Verify `draft` drafted tokens that ran after `seq`'s pending token, whose
/// logits are `rows` (one per input): sample row by row exactly as plain
/// decoding would, keeping drafted tokens while the sampled one equals them.
/// The first disagreement is itself the sampled token (the correction), so
/// every row that is used emits one token. Only the K/V of kept inputs is
/// recorded: rejected rows lie past the sequence's length in blocks only it
/// holds, unindexed, and the next step writes over them.
pub(crate) fn verify(
    seq: &mut Active,
    pool: &mut BlockPool,
    rows: &[usize],
    logits: &mut Logits,
    (draft, max_draft): (usize, usize),
    context: &mut StepContext<'_>,
) -> Result<Option<FinishReason>, EngineError> {
    let start = seq.kv.len();
    let drafted = seq.draft.tokens[..draft].to_vec();
    // Taken for the row loop (which borrows `seq`), put back before `record`.
    let forced = std::mem::take(&mut seq.draft.forced);
    let mut outcome = Ok(None);
    // A drafted token the sampled one agrees with that ends the request is
    // counted as accepted (it was streamed as forced or copied).
    let mut ended_on_draft = false;
    let kept = keep_agreeing(&drafted, |i| {
        let Some(&row) = rows.get(i) else {
            let missing = tessera_model::ModelError::InvalidBatch(format!("no logits for draft row {i}"));
            outcome = Err(EngineError::model("verifying a draft", missing));
            return None;
        };
        let origin = if forced.get(i) == Some(&true) {
            TokenOrigin::Forced
        } else {
            TokenOrigin::Copied
        };
        let hint = drafted.get(i).map(|&token| (token, origin));
        outcome = emit_next(seq, logits.row_mut(row), hint, context);
        match outcome {
            Ok(None) => seq.tokens.last().copied(),
            Ok(Some(_)) => {
                ended_on_draft = hint.is_some_and(|(token, _)| seq.tokens.last() == Some(&token));
                None
            }
            Err(_) => None,
        }
    });
    seq.kv.advance(pool, &seq.tokens[start..start + 1 + kept]);
    let accepted = kept + usize::from(ended_on_draft);
    let forced_drafted = forced.iter().filter(|&&f| f).count();
    tracing::trace!(seq = seq.id.0, ?drafted, forced = forced_drafted, kept, emitted = ?&seq.tokens[start..], "verified");
    seq.draft.forced = forced;
    let forced_before = seq.draft.counts.forced;
    seq.draft.record(draft, accepted, max_draft);
    context.metrics.draft_tokens += draft as u64;
    context.metrics.draft_accepted += accepted as u64;
    context.metrics.forced_tokens += (seq.draft.counts.forced - forced_before) as u64;
    outcome
}

/// Set the draft `seq` verifies next step: the tokens the constraint forces
/// (fast-forward), then prompt-lookup tokens.
pub(crate) fn propose_draft(seq: &mut Active, config: &SpeculationConfig, context: &mut StepContext<'_>) {
    // Forced tokens are fast-forward; the likely punctuation past them is a
    // guess, so it drafts only where speculation (lookup) is on too.
    let grammar = match seq.matcher.as_mut() {
        Some(matcher) if config.fast_forward && config.lookup => {
            matcher.grammar_draft(context.vocab(), config.max_draft)
        }
        Some(matcher) if config.fast_forward => {
            GrammarDraft::forced_run(matcher.forced_tokens(context.vocab(), config.max_draft))
        }
        _ => GrammarDraft::default(),
    };
    tracing::trace!(seq = seq.id.0, after = ?seq.tokens.last(), ?grammar.tokens, forced = grammar.forced_count(), "grammar draft");
    let in_string = config.lookup && seq.matcher.as_ref().is_some_and(|m| m.in_json_string());
    let in_call = config.lookup && seq.matcher.as_ref().is_some_and(|m| m.in_call());
    if in_string && seq.draft.escaped_prompt.is_none() {
        // Queued at submission (`escaped.rs`).
        seq.draft.escaped_prompt = Some(seq.escaping.take().map(EscapedPrompt::wait).unwrap_or_default());
    }
    seq.draft.propose(
        &seq.tokens,
        grammar,
        (config.lookup, in_call, in_string),
        config.max_draft,
    );
    // A token the constraint forbids ends the draft before its rows run (a
    // lookup draft past a call's end, a special token inside a string).
    let Some(matcher) = seq.matcher.as_mut().filter(|_| !seq.draft.tokens.is_empty()) else {
        return;
    };
    let allowed = matcher.allowed_prefix(context.vocab(), &seq.draft.tokens);
    seq.draft.truncate(allowed);
    // A draft that completes a call ends the turn there (a guess, verified:
    // only with lookup on, like every guess).
    let cut = match config.lookup {
        true => matcher.draft_to_call_end(context.vocab(), &seq.draft.tokens, config.max_draft),
        false => None,
    };
    // The end-of-turn token is looked up only for a draft that completes a call.
    let Some(mut cut) = cut else {
        return;
    };
    if let Some(end_of_turn) = end_of_turn_token(&seq.tokens, context.vocab()) {
        cut.push(end_of_turn);
        seq.draft.replace(cut);
    }
}

/// The end-of-turn token the context used last (the prompt's turns end with
/// it), else the vocabulary's first.
fn end_of_turn_token(tokens: &[u32], vocab: &Vocabulary) -> Option<u32> {
    let last = tokens.iter().rev().find(|&&token| vocab.is_stop(token)).copied();
    last.or_else(|| vocab.stop_tokens().first().copied())
}
