//! Drafts for speculative decoding, taken from the sequence itself: the bytes
//! the tool-call constraint forces next (grammar fast-forward), a call's
//! likely punctuation past them (`", "arguments": {"` with the response's own
//! spacing, `matcher/likely.rs`; a guess, so only with lookup on), then the tokens that
//! followed the latest earlier occurrence of the sequence's last few tokens
//! (prompt lookup: an agent writing a file it just read, a path or an
//! identifier from an earlier turn). Inside a call's string a confident
//! lookup match drafts as far as the step allows at once: there it is a copy
//! under way, and ramping up again after each edit cost steps. Before a
//! draft runs, `emit.rs` cuts it at its first token the constraint forbids,
//! and at the end of a call it completes, closed with end of turn.
//!
//! Inside a tool call's JSON string the model writes text it read escaped
//! (`\n`, `\"`), so its tokens stop matching the context's at every line
//! break; the lookup then also searches the end of the prompt's text as a JSON string
//! would hold it, tokenized once per request, and prefers that rendering's
//! match unless the sequence's own runs longer.
//!
//! A draft is only a guess: the engine runs it in the same forward as the
//! sequence's last token, with logits for every row, and samples row by row
//! as plain decoding would, keeping drafted tokens while the sampled token
//! equals them (see `Engine::verify`). Because a draft is a point mass, "sample
//! from the row and keep the draft if they agree" is exactly speculative
//! rejection sampling: the output distribution, and with a seed the output
//! itself, is what plain decoding gives.

use crate::lookup::lookup_in;
use tessera_constrain::GrammarDraft;

/// Lookup draft length a sequence starts with.
const FIRST_LEN: usize = 4;
/// Shortest match whose continuation is drafted at the adaptive length; a
/// shorter one (a common phrase more often than a copy) proposes one token.
/// A rejected draft costs its rows: on a 2-core Zen 4 a forward of 2 rows
/// took 1.5× one row and of 4 rows 2.4×, so a 3-token guess that missed cost
/// 1.4 tokens of plain decoding. On free text (`tessera bench decode`'s
/// story) drafts fell from 6 tokens in 64 to 2; a copy's match grows past
/// this within a token or two.
const CONFIDENT_MATCH: usize = 4;
/// Tokens proposed after a match shorter than [`CONFIDENT_MATCH`].
const PROBE_LEN: usize = 1;
/// Most steps a sequence waits after drafts that were all rejected.
const MAX_COOLDOWN: u32 = 32;

/// How the engine speculates (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeculationConfig {
    /// Draft from the sequence's own context (prompt lookup).
    pub lookup: bool,
    /// Draft what the tool-call constraint forces (grammar fast-forward).
    pub fast_forward: bool,
    /// Most drafted tokens per sequence and step.
    pub max_draft: usize,
    /// Rows a step of one sequence may hold with its drafts.
    pub step_rows: usize,
    /// Rows a step of several sequences may hold with their drafts: batching
    /// and speculation compete for the same compute, so drafts only fill what
    /// a small batch leaves of the rows that cost little more than one
    /// weight read (on a 2-core AVX2 CPU, 4 streams ran 13% slower with
    /// drafts up to 16 rows than without).
    pub shared_step_rows: usize,
}

impl SpeculationConfig {
    /// The rows a step of `sequences` sequences may hold with their drafts.
    pub fn rows_for(&self, sequences: usize) -> usize {
        if sequences > 1 {
            self.shared_step_rows
        } else {
            self.step_rows
        }
    }
}

impl Default for SpeculationConfig {
    fn default() -> Self {
        Self {
            lookup: true,
            fast_forward: true,
            // 7 drafted tokens and the pending one fill the 8-row VNNI tiles
            // exactly: on a 2-core Zen 4, 9 to 15 rows ran a second tile
            // pass for the rows past 8, and agent turns decoded 52.9-53.9 tok/s
            // with 7, 51.8-51.9 with 12 and 48.0-49.1 with 15 (one run each,
            // alternated).
            max_draft: 7,
            step_rows: 8,
            shared_step_rows: 4,
        }
    }
}

impl SpeculationConfig {
    /// No drafts at all: plain decoding, one token per sequence and step.
    pub fn off() -> Self {
        Self {
            lookup: false,
            fast_forward: false,
            ..Self::default()
        }
    }

    /// Whether any draft source is on.
    pub fn enabled(&self) -> bool {
        (self.lookup || self.fast_forward) && self.max_draft > 0
    }
}

/// Drafting counts of one request (also summed into the engine's metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DraftCounts {
    /// Tokens proposed and run through the model.
    pub drafted: usize,
    /// Of those, tokens that sampling kept.
    pub accepted: usize,
    /// Of the accepted ones, tokens the constraint forced (fast-forward).
    pub forced: usize,
}

/// One sequence's draft for the next step and how long its lookup drafts run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Drafter {
    /// Tokens to verify after the sequence's pending token.
    pub tokens: Vec<u32>,
    /// Per token of `tokens`: whether the constraint forced it (the
    /// constraint's tokens lead; see `GrammarDraft`).
    pub forced: Vec<bool>,
    /// How many of `tokens` (from the start) came from the constraint: the
    /// forced ones and the call's likely punctuation after them.
    grammar: usize,
    /// Lookup tokens to propose next (adapts to acceptance).
    lookup_len: usize,
    /// Steps left without lookup drafts after a rejected one.
    cooldown: u32,
    /// Consecutive lookup drafts with nothing accepted.
    misses: u32,
    /// Whether the lookup part of the draft came from a resynchronized occurrence.
    resynced: bool,
    /// The prompt's text escaped as in a JSON string, tokenized (see
    /// `escaped.rs`; taken at a call's first string).
    pub escaped_prompt: Option<Vec<u32>>,
    pub counts: DraftCounts,
}

impl Drafter {
    /// Set the next draft: the constraint's tokens (`grammar`: those it
    /// forces, then the call's likely punctuation), then up to the adaptive
    /// length of prompt-lookup tokens continuing `context` + them (`lookup` off:
    /// none), found in `context` itself and, inside a call's JSON string
    /// (`in_string`), in the escaped prompt. Inside a call (`in_call`: its
    /// envelope or arguments) a miss pauses nothing.
    pub fn propose(
        &mut self,
        context: &[u32],
        grammar: GrammarDraft,
        (lookup, in_call, in_string): (bool, bool, bool),
        max_draft: usize,
    ) {
        self.grammar = grammar.tokens.len().min(max_draft);
        self.forced = grammar.forced;
        self.forced.truncate(self.grammar);
        self.resynced = false;
        self.tokens = grammar.tokens;
        self.tokens.truncate(max_draft);
        if !lookup || self.tokens.len() >= max_draft {
            return;
        }
        // Inside a call a miss pauses nothing: what the model writes there is
        // most often a copy (of an earlier call's shape, of text it read), and
        // a paused copy runs a step per token.
        if self.cooldown > 0 {
            self.cooldown -= 1;
            if !in_call {
                return;
            }
        }
        let room = max_draft - self.tokens.len();
        let want = self.lookup_length().min(room);
        let continued;
        let history = if self.tokens.is_empty() {
            context
        } else {
            continued = [context, &self.tokens].concat();
            &continued[..]
        };
        let mut found = lookup_in(history, history, room);
        if let (true, Some(escaped)) = (in_string, &self.escaped_prompt) {
            // The sequence's prompt holds the text raw, so a match there
            // continues with a raw line break or quote where the string needs
            // its escape: the escaped rendering wins unless the sequence's
            // own match runs longer (a copy of what the model itself wrote).
            let rendered = lookup_in(escaped, history, room);
            if !rendered.tokens.is_empty() && rendered.matched >= found.matched {
                found = rendered;
            }
        }
        // Inside a call's string a confident match is a copy under way (a file
        // written back, a path): it runs as far as the step's room at once
        // rather than ramping up again after each edit the model made.
        let take = match found.matched >= CONFIDENT_MATCH {
            true if in_string && !found.resynced => found.tokens.len(),
            true => found.tokens.len().min(want),
            false => found.tokens.len().min(PROBE_LEN),
        };
        self.resynced = found.resynced && take > 0;
        self.tokens.extend_from_slice(&found.tokens[..take]);
    }

    fn lookup_length(&self) -> usize {
        if self.lookup_len == 0 {
            FIRST_LEN
        } else {
            self.lookup_len
        }
    }

    /// Record a verification: `ran` of the draft's tokens went through the
    /// model and the first `accepted` were kept. Adapts the lookup length:
    /// doubled after a draft kept whole, cut to what was kept (plus one) after
    /// a partial one, and paused for a growing number of steps after a
    /// lookup draft of which nothing was kept. A resynchronized lookup draft
    /// changes neither, nor one behind constraint tokens that were not all
    /// kept (it was never reached).
    pub fn record(&mut self, ran: usize, accepted: usize, max_draft: usize) {
        let grammar_ran = self.grammar.min(ran);
        self.counts.drafted += ran;
        self.counts.accepted += accepted;
        self.counts.forced += self.forced.iter().take(accepted.min(ran)).filter(|&&f| f).count();
        let lookup_ran = ran - grammar_ran;
        // A resynchronized draft is a one-off guess (see `lookup.rs`): what
        // became of it says nothing of how long the copy runs.
        let resynced = std::mem::take(&mut self.resynced);
        if lookup_ran == 0 || resynced || accepted < grammar_ran {
            return;
        }
        let lookup_kept = accepted - grammar_ran;
        if lookup_kept == lookup_ran {
            self.lookup_len = (self.lookup_length() * 2).min(max_draft.max(1));
            self.misses = 0;
        } else if lookup_kept == 0 {
            self.misses += 1;
            self.cooldown = (1u32 << self.misses.min(5)).min(MAX_COOLDOWN);
            self.lookup_len = (self.lookup_length() / 2).max(1);
        } else {
            self.lookup_len = (lookup_kept + 1).max(2);
            self.misses = 0;
        }
    }

    /// Keep the draft's first `len` tokens (the rest is forbidden by the constraint).
    pub fn truncate(&mut self, len: usize) {
        self.tokens.truncate(len);
        self.forced.truncate(len);
        self.grammar = self.grammar.min(len);
    }

    /// Replace the draft by `tokens` (the same draft ended otherwise): what
    /// it keeps of the old one keeps its kind.
    pub fn replace(&mut self, tokens: Vec<u32>) {
        let same = self.tokens.iter().zip(&tokens).take_while(|(a, b)| a == b).count();
        self.truncate(same);
        self.tokens = tokens;
    }

    /// Forget the draft (the sequence was preempted or its tokens changed).
    pub fn clear(&mut self) {
        self.tokens.clear();
        self.forced.clear();
        self.grammar = 0;
        self.resynced = false;
    }
}

/// Speculative verification of a point-mass draft: `sample(i)` draws the
/// token of row `i` (the row after the pending token and `draft[..i]`) from
/// the model's distribution there, as plain decoding would, or `None` when
/// the sequence ends with it. Drafted tokens are kept while the sampled one
/// equals them; the first that differs is itself the sampled token. With
/// q the draft's point mass at d, rejection sampling keeps d with
/// probability min(1, p(d)/q(d)) = p(d) and otherwise draws from p less d,
/// renormalized: the same as drawing from p. Returns how many drafted tokens
/// were kept; `sample` ran for that many rows plus one (fewer on an end).
pub(crate) fn keep_agreeing(draft: &[u32], mut sample: impl FnMut(usize) -> Option<u32>) -> usize {
    let mut kept = 0;
    while kept <= draft.len() {
        match sample(kept) {
            Some(token) if kept < draft.len() && token == draft[kept] => kept += 1,
            _ => break,
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A constraint draft of `tokens`, the first `forced` forced.
    fn grammar(tokens: &[u32], forced: usize) -> GrammarDraft {
        GrammarDraft {
            tokens: tokens.to_vec(),
            forced: (0..tokens.len()).map(|i| i < forced).collect(),
        }
    }

    #[test]
    fn a_shared_step_leaves_fewer_rows_to_drafts() {
        let config = SpeculationConfig::default();
        assert_eq!(config.rows_for(1), config.step_rows);
        assert_eq!(config.rows_for(2), config.shared_step_rows);
        assert!(config.shared_step_rows < config.step_rows);
    }

    #[test]
    fn inside_a_string_the_escaped_prompt_is_searched_too() {
        let mut drafter = Drafter {
            escaped_prompt: Some(vec![40, 41, 42, 43, 44, 45]),
            ..Drafter::default()
        };
        let context = [1, 2, 3, 9, 41, 42, 43];
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert!(
            drafter.tokens.is_empty(),
            "outside a string only the sequence is searched"
        );
        drafter.propose(&context, GrammarDraft::default(), (true, true, true), 12);
        assert_eq!(drafter.tokens, [44], "a three-token match proposes one token");
        // Matches as long in both: the escaped rendering wins (the prompt's
        // raw text continues with a raw line break where the string escapes it).
        let context = [41, 42, 43, 7, 41, 42, 43];
        drafter.propose(&context, GrammarDraft::default(), (true, true, true), 12);
        assert_eq!(drafter.tokens, [44]);
        // The sequence's own match runs longer: it wins.
        let context = [9, 41, 42, 43, 7, 9, 41, 42, 43];
        drafter.propose(&context, GrammarDraft::default(), (true, true, true), 12);
        assert_eq!(
            drafter.tokens,
            [7, 9, 41, 42, 43],
            "a four-token match in a string: its whole run, not the first length"
        );
        drafter.propose(&context, GrammarDraft::default(), (true, true, false), 12);
        assert_eq!(drafter.tokens, [7, 9, 41, 42], "outside a string: the first length");
        let context = [1, 2, 3, 9, 40, 41, 42, 43];
        drafter.propose(&context, GrammarDraft::default(), (true, true, true), 12);
        assert_eq!(drafter.tokens, [44, 45], "a four-token match proposes its continuation");
    }

    #[test]
    fn a_short_match_proposes_one_token_and_a_longer_one_its_run() {
        // "7 1 2 3" matches "1 2 3" only: a common phrase, one token.
        let context = [0, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3];
        let found = lookup_in(&context, &context, 4);
        assert_eq!((found.tokens, found.matched), (&[4, 5, 6, 7][..], 3));
        let mut drafter = Drafter::default();
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert_eq!(drafter.tokens, [4]);
        // Kept: the copy goes on and the match now runs four tokens back.
        drafter.record(1, 1, 12);
        let context = [0, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4];
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert_eq!(
            drafter.tokens,
            [5, 6, 7, 1, 2, 3, 4],
            "the whole doubled length (8), up to the end"
        );
        assert_eq!(lookup_in(&context, &context, 8).matched, 4);
    }

    #[test]
    fn a_missed_resynchronized_draft_pauses_nothing() {
        let mut drafter = Drafter::default();
        let context = [1, 2, 3, 4, 5, 8, 6, 7, 0, 1, 2, 3, 4, 5, 9];
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert_eq!(drafter.tokens, [6, 7], "past the replaced 8");
        drafter.record(2, 0, 12);
        let context = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0, 1, 2, 3];
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert_eq!(drafter.tokens, [4, 5, 6, 7], "drafts at once, at the first length");
    }

    #[test]
    fn lookup_length_adapts_to_acceptance() {
        let mut drafter = Drafter::default();
        let context = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0, 1, 2, 3];
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert_eq!(drafter.tokens, [4, 5, 6, 7], "starts at four");
        drafter.record(4, 4, 12);
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert_eq!(drafter.tokens.len(), 8, "doubled after a full accept");
        drafter.record(8, 2, 12);
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert_eq!(drafter.tokens.len(), 3, "cut to what was kept, plus one");
        drafter.record(3, 0, 12);
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert!(drafter.tokens.is_empty(), "paused after a miss");
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert!(drafter.tokens.is_empty(), "for two steps after the first miss");
        drafter.propose(&context, GrammarDraft::default(), (true, false, false), 12);
        assert!(!drafter.tokens.is_empty(), "then drafts again");
        drafter.record(1, 0, 12);
        drafter.propose(&context, GrammarDraft::default(), (true, true, true), 12);
        assert!(!drafter.tokens.is_empty(), "inside a call a miss pauses nothing");
        assert_eq!(
            drafter.counts,
            DraftCounts {
                drafted: 16,
                accepted: 6,
                forced: 0
            }
        );
    }

    /// Two rows of a four-token vocabulary, the second depending on the
    /// first token: drafting [2, 1] through [`keep_agreeing`] with the real
    /// sampler emits first tokens with row 0's probabilities and second
    /// tokens, after a kept 2, with row 1's (a chi-square test with a
    /// p < 10⁻⁶ threshold: a rule that kept drafts more often fails it).
    #[test]
    fn verification_keeps_the_sampling_distribution() {
        use tessera_sample::{Sampler, SamplingParams};
        let rows = [[0.0f32, 1.0, 2.0, 0.5], [1.5, 0.0, -1.0, 0.7]];
        let softmax = |row: &[f32; 4]| {
            let total: f32 = row.iter().map(|x| x.exp()).sum();
            row.map(|x| x.exp() / total)
        };
        let (p0, p1) = (softmax(&rows[0]), softmax(&rows[1]));
        let params = SamplingParams {
            temperature: 1.0,
            seed: 7,
            ..SamplingParams::default()
        };
        let mut sampler = Sampler::new(params).expect("valid parameters");
        let draft = [2, 1];
        let trials = 40_000;
        let (mut first, mut second, mut seconds) = ([0usize; 4], [0usize; 4], 0);
        for _ in 0..trials {
            let mut emitted = Vec::new();
            keep_agreeing(&draft, |i| {
                let mut logits = rows[i.min(1)];
                let token = sampler.sample(&mut logits, &[]).expect("a token");
                emitted.push(token);
                Some(token)
            });
            first[emitted[0] as usize] += 1;
            if emitted[0] == 2 {
                second[emitted[1] as usize] += 1;
                seconds += 1;
            }
        }
        let chi_square = |counts: &[usize; 4], p: &[f32; 4], n: usize| -> f64 {
            (0..4)
                .map(|k| {
                    let expected = p[k] as f64 * n as f64;
                    (counts[k] as f64 - expected).powi(2) / expected
                })
                .sum()
        };
        // Three degrees of freedom: P(χ² > 33.4) < 10⁻⁶.
        assert!(
            chi_square(&first, &p0, trials) < 33.4,
            "first tokens {first:?} vs {p0:?}"
        );
        assert!(
            chi_square(&second, &p1, seconds) < 33.4,
            "second tokens {second:?} vs {p1:?}"
        );
        // The draft's own token is kept about as often as the model would pick it.
        let kept_rate = first[2] as f64 / trials as f64;
        assert!((kept_rate - p0[2] as f64).abs() < 0.02, "{kept_rate} vs {}", p0[2]);
    }

    #[test]
    fn verification_stops_at_the_first_disagreement_or_end() {
        let mut calls = Vec::new();
        let kept = keep_agreeing(&[5, 6, 7], |i| {
            calls.push(i);
            Some([5, 9, 7][i])
        });
        assert_eq!(
            (kept, calls),
            (1, vec![0, 1]),
            "row 1 disagreed: its token is the correction"
        );
        let kept = keep_agreeing(&[5, 6], |i| Some([5, 6, 8][i]));
        assert_eq!(kept, 2, "all kept, and the row after the draft still samples");
        let kept = keep_agreeing(&[5, 6], |_| None);
        assert_eq!(kept, 0, "the sequence ended on row 0");
    }

    #[test]
    fn forced_tokens_lead_and_count_apart() {
        let mut drafter = Drafter::default();
        let context = [4, 5, 6, 7, 8, 9, 4, 5, 6];
        // Forced [7] makes the history end "4 5 6 7", found earlier: lookup adds "8 9 4 5".
        drafter.propose(&context, grammar(&[7], 1), (true, false, false), 12);
        assert_eq!(drafter.tokens, [7, 8, 9, 4, 5]);
        assert_eq!(drafter.forced, [true]);
        drafter.record(5, 3, 12);
        assert_eq!(
            drafter.counts,
            DraftCounts {
                drafted: 5,
                accepted: 3,
                forced: 1
            }
        );
        drafter.propose(&context, grammar(&[1, 2, 3], 3), (false, false, false), 2);
        assert_eq!(drafter.tokens, [1, 2], "capped at max_draft, no lookup");
    }
}
