//! Sampling parameters and their validation (the one place limits are checked).

/// Why a sampling request is refused or a draw failed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SamplingError {
    /// A parameter is outside its documented range; names the field and the limit.
    #[error("invalid sampling parameter `{field}` = {value}: {limit}")]
    InvalidParameter {
        /// The parameter's name as the CLI/API spells it.
        field: &'static str,
        /// The value given.
        value: String,
        /// The allowed range, in words.
        limit: &'static str,
    },
    /// Every logit was masked (`-inf`) or not finite: nothing may be drawn.
    #[error("no token may be sampled: every logit is masked or not finite")]
    NothingToSample,
    /// A constraint's mask allows no token with a finite logit.
    #[error("the constraint allows no token here")]
    EmptyMask,
}

/// Temperatures below this sample greedily. At `1/t` = 10⁴ the softmax is one-hot
/// for any logit gap over ~0.01 already, and far below it `1/t` overflows: at
/// `t = 1e-45` it is infinite, `0 × ∞` is NaN, and the draw would be garbage.
pub const GREEDY_BELOW_TEMPERATURE: f32 = 1e-4;

/// How the next token is chosen. A temperature under
/// [`GREEDY_BELOW_TEMPERATURE`] (0 included) means greedy.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature, `0 ≤ t ≤ 100`; below [`GREEDY_BELOW_TEMPERATURE`]
    /// (0 included) it selects greedy decoding.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; 0 disables.
    pub top_k: usize,
    /// Nucleus sampling mass, `0 < p ≤ 1`; 1 disables.
    pub top_p: f32,
    /// Drop tokens below `min_p` × the top probability, `0 ≤ p ≤ 1`; 0 disables.
    pub min_p: f32,
    /// Repetition penalty, `0 < r ≤ 10`; 1 disables.
    pub repetition_penalty: f32,
    /// RNG seed: the same seed and logits give the same tokens.
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }
}

impl SamplingParams {
    /// Whether these parameters select greedy decoding.
    pub fn is_greedy(&self) -> bool {
        self.temperature < GREEDY_BELOW_TEMPERATURE || self.top_k == 1
    }

    /// Check every field against its range.
    pub fn validate(&self) -> Result<(), SamplingError> {
        check(
            "temperature",
            self.temperature,
            (0.0..=100.0).contains(&self.temperature),
            "must be between 0 and 100 (0 = greedy)",
        )?;
        check(
            "top_p",
            self.top_p,
            self.top_p > 0.0 && self.top_p <= 1.0,
            "must be in (0, 1]",
        )?;
        check(
            "min_p",
            self.min_p,
            (0.0..=1.0).contains(&self.min_p),
            "must be in [0, 1]",
        )?;
        check(
            "repetition_penalty",
            self.repetition_penalty,
            self.repetition_penalty > 0.0 && self.repetition_penalty <= 10.0,
            "must be in (0, 10]",
        )
    }
}

fn check(field: &'static str, value: f32, ok: bool, limit: &'static str) -> Result<(), SamplingError> {
    // NaN fails every range comparison above, so it lands here too.
    if ok {
        Ok(())
    } else {
        Err(SamplingError::InvalidParameter {
            field,
            value: value.to_string(),
            limit,
        })
    }
}
