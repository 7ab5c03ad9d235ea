//! Logits to token for Tessera: repetition penalty, temperature, top-k, top-p,
//! min-p and a seeded RNG, on plain `&mut [f32]` logits (no tensors).
//!
//! Order of operations follows common practice (llama.cpp's default chain):
//! penalties → (greedy if the temperature is under [`GREEDY_BELOW_TEMPERATURE`])
//! → top-k → temperature → softmax → top-p → min-p → draw. No path divides by
//! zero or multiplies an infinity: for any finite logits and valid parameters
//! the draw is a token with a finite logit (a property test checks it). `-inf` logits (masked tokens) are never drawn; a logit
//! vector with nothing drawable is an error, never a uniform draw.
//! Cost: O(V) per step plus O(K log K) for the candidates kept by top-k/top-p.
#![deny(missing_docs)]

mod params;
mod rng;

pub use params::{SamplingError, SamplingParams, GREEDY_BELOW_TEMPERATURE};
pub use rng::Rng;

/// A stateful sampler: validated parameters and a seeded RNG.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    rng: Rng,
    candidates: Vec<(u32, f32)>,
}

impl Sampler {
    /// A sampler for validated `params` (see [`SamplingParams::validate`]).
    pub fn new(params: SamplingParams) -> Result<Self, SamplingError> {
        params.validate()?;
        Ok(Self {
            rng: Rng::seeded(params.seed),
            params,
            candidates: Vec::new(),
        })
    }

    /// The sampler's parameters.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Pick the next token among those `allowed` (a constraint's mask): disallowed
    /// logits become `-inf` before penalties, temperature and truncation. A mask
    /// that leaves nothing drawable is an error, never a uniform draw.
    pub fn sample_allowed(
        &mut self,
        logits: &mut [f32],
        history: &[u32],
        allowed: impl Fn(u32) -> bool,
    ) -> Result<u32, SamplingError> {
        let mut any = false;
        for (token, logit) in logits.iter_mut().enumerate() {
            if !allowed(token as u32) {
                *logit = f32::NEG_INFINITY;
            } else if logit.is_finite() {
                any = true;
            }
        }
        if !any {
            return Err(SamplingError::EmptyMask);
        }
        self.sample(logits, history)
    }

    /// Pick the next token from `logits` (modified in place by penalties),
    /// given the tokens produced so far (`history`, used by the repetition penalty).
    pub fn sample(&mut self, logits: &mut [f32], history: &[u32]) -> Result<u32, SamplingError> {
        apply_repetition_penalty(logits, history, self.params.repetition_penalty);
        if self.params.is_greedy() {
            return argmax(logits).ok_or(SamplingError::NothingToSample);
        }
        self.collect_candidates(logits);
        if self.candidates.is_empty() {
            return Err(SamplingError::NothingToSample);
        }
        self.softmax_with_temperature();
        self.truncate_top_p();
        self.truncate_min_p();
        let total: f32 = self.candidates.iter().map(|&(_, p)| p).sum();
        let mut target = self.rng.next_f32() * total;
        for &(token, p) in &self.candidates {
            if target < p {
                return Ok(token);
            }
            target -= p;
        }
        // Rounding left `target` at the end: the last candidate takes it.
        self.candidates
            .last()
            .map(|&(token, _)| token)
            .ok_or(SamplingError::NothingToSample)
    }

    /// Finite logits, sorted descending, cut to top-k.
    fn collect_candidates(&mut self, logits: &[f32]) {
        self.candidates.clear();
        self.candidates.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, l)| l.is_finite())
                .map(|(i, &l)| (i as u32, l)),
        );
        let by_logit_desc = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1);
        let k = self.params.top_k;
        if k > 0 && k < self.candidates.len() {
            self.candidates.select_nth_unstable_by(k - 1, by_logit_desc);
            self.candidates.truncate(k);
        }
        self.candidates.sort_unstable_by(by_logit_desc);
    }

    /// Turn candidate logits into probabilities at the configured temperature.
    fn softmax_with_temperature(&mut self) {
        let inv_t = 1.0 / self.params.temperature;
        let max = self.candidates[0].1;
        let mut sum = 0.0;
        for (_, value) in self.candidates.iter_mut() {
            *value = ((*value - max) * inv_t).exp();
            sum += *value;
        }
        for (_, value) in self.candidates.iter_mut() {
            *value /= sum;
        }
    }

    /// Keep the smallest prefix whose probability mass reaches top-p (at least one).
    fn truncate_top_p(&mut self) {
        if self.params.top_p >= 1.0 {
            return;
        }
        let mut mass = 0.0;
        let mut keep = self.candidates.len();
        for (i, &(_, p)) in self.candidates.iter().enumerate() {
            mass += p;
            if mass >= self.params.top_p {
                keep = i + 1;
                break;
            }
        }
        self.candidates.truncate(keep);
    }

    /// Drop candidates below `min_p` times the most likely one's probability.
    fn truncate_min_p(&mut self) {
        if self.params.min_p <= 0.0 {
            return;
        }
        let threshold = self.candidates[0].1 * self.params.min_p;
        self.candidates.retain(|&(_, p)| p >= threshold);
    }
}

/// Index of the largest finite logit (lowest index on ties); `None` if none is finite.
pub fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &value) in logits.iter().enumerate() {
        if value.is_finite() && best.is_none_or(|(_, b)| value > b) {
            best = Some((i, value));
        }
    }
    best.map(|(i, _)| i as u32)
}

/// CTRL-style repetition penalty: divide positive logits (multiply negative ones)
/// of every token already in `history` by `penalty`. 1.0 disables it.
pub fn apply_repetition_penalty(logits: &mut [f32], history: &[u32], penalty: f32) {
    if penalty == 1.0 {
        return;
    }
    let mut seen = vec![false; logits.len()];
    for &token in history {
        let Some(flag) = seen.get_mut(token as usize) else {
            continue;
        };
        if std::mem::replace(flag, true) {
            continue;
        }
        let logit = &mut logits[token as usize];
        *logit = if *logit > 0.0 {
            *logit / penalty
        } else {
            *logit * penalty
        };
    }
}

#[cfg(test)]
mod tests;
