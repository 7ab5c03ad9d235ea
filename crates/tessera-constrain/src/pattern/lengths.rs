//! A pattern together with a string's length bounds. For each DFA state, the
//! set of code-point counts that can still lead to a match is a bit set, so a
//! character is allowed only while some match of an allowed length remains:
//! `^[0-9]{4}$` with `maxLength: 3` matches nothing, and `^(ab)+$` with
//! `maxLength: 5` closes after four characters, never after five.

use super::{starts_char, Dfa, PatternError, DEAD};
use std::sync::Arc;

/// The largest length bound a string with a pattern may have.
pub(crate) const MAX_PATTERN_LENGTH_BOUND: u32 = 4094;

/// A pattern's table with the counts that can still complete a match.
#[derive(Debug, Clone)]
pub(crate) struct PatternUse {
    pub dfa: Arc<Dfa>,
    /// Words per state; the highest bit of the last word stands for "that many or more".
    words: usize,
    lengths: Vec<u64>,
    /// Per state, the first step of a shortest match's rest (see [`Dfa::toward_accept`]).
    toward_accept: Vec<Option<(u8, u32)>>,
}

impl PatternUse {
    /// The pattern under bounds up to `min` and `max` (`u32::MAX`: none).
    pub fn new(dfa: Arc<Dfa>, min: u32, max: u32) -> Result<Self, PatternError> {
        let bound = if max == u32::MAX { min } else { max.max(min) };
        if bound > MAX_PATTERN_LENGTH_BOUND {
            return Err(PatternError(format!(
                "a length bound of {bound} with a pattern is over the longest supported ({MAX_PATTERN_LENGTH_BOUND})"
            )));
        }
        // The sticky top bit (index 64 * words - 1) is above every bound.
        let words = (bound as usize + 2) / 64 + 1;
        let lengths = remaining_lengths(&dfa, words);
        let toward_accept = dfa.toward_accept();
        Ok(Self {
            dfa,
            words,
            lengths,
            toward_accept,
        })
    }

    fn bits(&self, state: u32) -> &[u64] {
        &self.lengths[state as usize * self.words..][..self.words]
    }

    /// Whether, `count` code points in (saturated as the string lexer does),
    /// some match with a length in `min..=max` still follows `state`.
    pub fn live(&self, state: u32, count: u32, min: u32, max: u32) -> bool {
        if state == DEAD {
            return false;
        }
        let lo = min.saturating_sub(count) as usize;
        let top = self.words * 64 - 1;
        let hi = if max == u32::MAX {
            top
        } else {
            (max.saturating_sub(count) as usize).min(top)
        };
        lo <= hi && any_in_range(self.bits(state), lo, hi)
    }
}

impl PatternUse {
    /// The bytes of a shortest rest of a match from `state`, when they need
    /// no JSON escape (`None` otherwise, or from a dead state).
    pub fn plain_rest(&self, mut state: u32) -> Option<Vec<u8>> {
        let mut rest = Vec::new();
        while !self.dfa.accepts(state) {
            let (byte, next) = (*self.toward_accept.get(state as usize)?)?;
            if byte < 0x20 || byte == b'"' || byte == b'\\' {
                return None;
            }
            rest.push(byte);
            state = next;
        }
        Some(rest)
    }
}

/// Whether a bit in `lo..=hi` is set.
fn any_in_range(bits: &[u64], lo: usize, hi: usize) -> bool {
    (lo / 64..=hi / 64).any(|w| {
        let low = if w == lo / 64 { !0u64 << (lo % 64) } else { !0 };
        let high = if w == hi / 64 { !0u64 >> (63 - hi % 64) } else { !0 };
        bits[w] & low & high != 0
    })
}

/// Per state, the code-point counts of the texts that lead from it to a
/// match (a worklist fixpoint over reversed edges; counts saturate at the top bit).
fn remaining_lengths(dfa: &Dfa, words: usize) -> Vec<u64> {
    let n = dfa.states();
    let mut lengths = vec![0u64; n * words];
    let mut incoming: Vec<Vec<(u32, bool)>> = vec![Vec::new(); n];
    for from in 0..n as u32 {
        for (byte, to) in dfa.edges(from) {
            if to != DEAD {
                incoming[to as usize].push((from, starts_char(byte)));
            }
        }
    }
    let mut todo = Vec::new();
    for state in 0..n {
        if dfa.accept[state] {
            lengths[state * words] = 1;
            todo.push(state as u32);
        }
    }
    let mut shifted = vec![0u64; words];
    while let Some(state) = todo.pop() {
        for &(from, counts) in &incoming[state as usize] {
            shifted.copy_from_slice(&lengths[state as usize * words..][..words]);
            if counts {
                shift_saturating(&mut shifted);
            }
            let row = &mut lengths[from as usize * words..][..words];
            let mut changed = false;
            for (word, add) in row.iter_mut().zip(&shifted) {
                changed |= *word | add != *word;
                *word |= add;
            }
            if changed {
                todo.push(from);
            }
        }
    }
    lengths
}

/// Every count one higher; the top bit keeps what passes it.
fn shift_saturating(bits: &mut [u64]) {
    let last = bits.len() - 1;
    let sticky = bits[last] >> 63;
    for w in (0..bits.len()).rev() {
        let carry = if w > 0 { bits[w - 1] >> 63 } else { 0 };
        bits[w] = bits[w] << 1 | carry;
    }
    bits[last] |= sticky << 63;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(source: &str, min: u32, max: u32) -> PatternUse {
        PatternUse::new(Dfa::ecma(source).unwrap(), min, max).unwrap()
    }

    #[test]
    fn bounds_that_no_match_meets_leave_nothing_live() {
        assert!(!pattern("^[0-9]{4}$", 0, 3).live(0, 0, 0, 3));
        assert!(pattern("^[0-9]{4}$", 0, 4).live(0, 0, 0, 4));
    }

    #[test]
    fn lengths_follow_the_pattern_not_just_an_interval() {
        let p = pattern("^(ab)+$", 0, 5);
        let dfa = &p.dfa;
        let mut state = 0;
        for (i, byte) in b"abab".iter().enumerate() {
            state = dfa.step(state, *byte);
            assert!(p.live(state, i as u32 + 1, 0, 5));
        }
        // A fifth character could only start a sixth one.
        let a = dfa.step(state, b'a');
        assert!(!p.live(a, 5, 0, 5));
    }

    #[test]
    fn long_minimums_count_past_a_word() {
        let p = pattern("^a*$", 200, u32::MAX);
        assert!(p.live(0, 0, 200, u32::MAX));
        assert!(p.live(0, 150, 200, u32::MAX));
        let q = pattern("^a{0,150}$", 200, u32::MAX);
        assert!(!q.live(0, 0, 200, u32::MAX));
    }

    #[test]
    fn multibyte_characters_count_once() {
        let p = pattern("^é{2}$", 2, 2);
        let dfa = &p.dfa;
        let bytes = "é".as_bytes();
        let lead = dfa.step(0, bytes[0]);
        assert!(p.live(lead, 1, 2, 2));
        let one = dfa.step(lead, bytes[1]);
        assert!(p.live(one, 1, 2, 2));
    }
}
