//! Numbers, digit by digit. A number with bounds (`minimum`, `maximum`, their
//! exclusive forms, `multipleOf`, or `integer`, which is bounded by i64) is
//! read as an exact decimal: at most 19 integer and 18 fraction digits, no
//! exponent, and each digit is allowed only if some completion still lands
//! in range on the multiple's grid (values are compared as integers scaled by
//! 10^18). A number without bounds may use an exponent, within what an f64
//! holds (magnitude below 10^308), with at most 20 integer and 24 fraction
//! digits (serde_json writes an f64 in fewer), so a model cannot loop on digits.
//!
//! A *strict* number (inside a `oneOf` whose alternatives overlap, where
//! every alternative must judge the value, not its spelling) has one spelling
//! per value: no exponent, no trailing zero in a fraction (an integral value
//! has no fraction), no `-0`, at most 18 integer and 18 fraction digits (so
//! an integer fits an i64 and a fraction the scale); see
//! [`is_canonical`](crate::schema::spelling::is_canonical).

use super::NumAt;
use crate::schema::spelling::{
    MAX_DECIMAL_EXPONENT, MAX_FRAC_DIGITS, MAX_FREE_FRAC_DIGITS, MAX_FREE_INT_DIGITS, MAX_INT_DIGITS,
    MAX_NEGATIVE_EXPONENT, MAX_STRICT_INT_DIGITS,
};
use crate::schema::{NumberShape, SCALE};

/// A number read so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct NumLex {
    pub at: NumAt,
    neg: bool,
    int_len: u16,
    frac_len: u16,
    exp_neg: bool,
    exp: u16,
    /// Bounded numbers: the integer part's value and the fraction digits' value.
    int: u64,
    frac: u64,
    /// One spelling per value (see the module's notes).
    strict: bool,
    /// The last fraction digit was a zero (a strict number cannot end there).
    trailing_zero: bool,
}

/// What one byte does to a number.
pub(crate) enum NumStep {
    Inside(NumLex),
    /// The number ended before this byte (which belongs to what follows).
    Ended,
}

impl NumLex {
    const EMPTY: Self = Self {
        at: NumAt::Minus,
        neg: false,
        int_len: 0,
        frac_len: 0,
        exp_neg: false,
        exp: 0,
        int: 0,
        frac: 0,
        strict: false,
        trailing_zero: false,
    };

    /// The number `byte` starts, if one of `shape` can (`strict`: see the module's notes).
    pub fn start(shape: &NumberShape, byte: u8, strict: bool) -> Option<Self> {
        let empty = Self { strict, ..Self::EMPTY };
        let number = match byte {
            b'-' => Self { neg: true, ..empty },
            b'0'..=b'9' => empty.digit(shape, byte)?,
            _ => return None,
        };
        (!shape.is_bounded() || shape.feasible(number.reach().as_slice())).then_some(number)
    }

    /// Whether the number may end here.
    pub fn complete(&self, shape: &NumberShape) -> bool {
        let spelled = !self.strict || !(self.trailing_zero || self.neg && self.at == NumAt::Zero);
        matches!(self.at, NumAt::Zero | NumAt::Int | NumAt::Frac | NumAt::Exp)
            && spelled
            && (!shape.is_bounded() || shape.feasible(&[self.point()]))
    }

    pub fn step(self, shape: &NumberShape, byte: u8) -> Option<NumStep> {
        let next = match (self.at, byte) {
            (NumAt::Minus | NumAt::Int, b'0'..=b'9') => self.digit(shape, byte),
            (NumAt::Zero | NumAt::Int, b'.') if !shape.integer => Some(Self { at: NumAt::Dot, ..self }),
            (NumAt::Dot | NumAt::Frac, b'0'..=b'9') => self.fraction_digit(shape, byte),
            (NumAt::Zero | NumAt::Int | NumAt::Frac, b'e' | b'E') if !shape.is_bounded() && !self.strict => {
                Some(Self { at: NumAt::E, ..self })
            }
            (NumAt::E, b'+' | b'-') => Some(Self {
                at: NumAt::ESign,
                exp_neg: byte == b'-',
                ..self
            }),
            (NumAt::E | NumAt::ESign | NumAt::Exp, b'0'..=b'9') => self.exponent_digit(byte),
            _ => {
                return (!byte.is_ascii_digit() && self.complete(shape)).then_some(NumStep::Ended);
            }
        }?;
        (!shape.is_bounded() || shape.feasible(next.reach().as_slice())).then_some(NumStep::Inside(next))
    }

    fn digit(self, shape: &NumberShape, byte: u8) -> Option<Self> {
        let d = (byte - b'0') as u64;
        let int_len = self.int_len + 1;
        let most = match (self.strict, shape.is_bounded()) {
            (true, _) => MAX_STRICT_INT_DIGITS,
            (false, true) => MAX_INT_DIGITS,
            (false, false) => MAX_FREE_INT_DIGITS,
        };
        if int_len > most {
            return None;
        }
        Some(Self {
            at: if self.int_len == 0 && d == 0 {
                NumAt::Zero
            } else {
                NumAt::Int
            },
            int_len,
            int: self.int.saturating_mul(10).saturating_add(d),
            ..self
        })
    }

    fn fraction_digit(self, shape: &NumberShape, byte: u8) -> Option<Self> {
        let frac_len = self.frac_len + 1;
        let most = if shape.is_bounded() || self.strict {
            MAX_FRAC_DIGITS
        } else {
            MAX_FREE_FRAC_DIGITS
        };
        let trailing_zero = byte == b'0';
        // A strict fraction's last digit is not a zero: none may come last.
        if frac_len > most || self.strict && trailing_zero && frac_len == most {
            return None;
        }
        Some(Self {
            at: NumAt::Frac,
            frac_len,
            trailing_zero,
            frac: self.frac.saturating_mul(10).saturating_add((byte - b'0') as u64),
            ..self
        })
    }

    fn exponent_digit(self, byte: u8) -> Option<Self> {
        let exp = self.exp.checked_mul(10)?.checked_add((byte - b'0') as u16)?;
        let too_big = if self.exp_neg {
            exp > MAX_NEGATIVE_EXPONENT
        } else {
            self.int_len.saturating_add(exp) > MAX_DECIMAL_EXPONENT
        };
        (!too_big).then_some(Self {
            at: NumAt::Exp,
            exp,
            ..self
        })
    }

    /// The value so far, scaled (a bounded number's point if it ended here).
    fn point(&self) -> (i128, i128) {
        let magnitude =
            self.int as i128 * SCALE + self.frac as i128 * 10i128.pow((MAX_FRAC_DIGITS - self.frac_len) as u32);
        self.signed(magnitude, magnitude)
    }

    fn signed(&self, lo: i128, hi: i128) -> (i128, i128) {
        if self.neg {
            (-hi, -lo)
        } else {
            (lo, hi)
        }
    }

    /// The scaled intervals its completions can reach (no allocation: this runs per digit in mask walks).
    fn reach(&self) -> Reach {
        let int = self.int as i128;
        let most = if self.strict {
            MAX_STRICT_INT_DIGITS
        } else {
            MAX_INT_DIGITS
        };
        // Strict: a number cannot stop at `-0`, after a `.` or on a fraction's zero.
        let past = i128::from(self.strict);
        let mut reach = Reach::default();
        match self.at {
            NumAt::Minus => reach.push((-(10i128.pow(most as u32) * SCALE - 1), -past)),
            NumAt::Zero => reach.push(self.signed(past * i128::from(self.neg), SCALE - 1)),
            NumAt::Int => {
                for j in 0..=(most - self.int_len) as u32 {
                    let base = int * 10i128.pow(j);
                    reach.push(self.signed(base * SCALE, (base + 10i128.pow(j)) * SCALE - 1));
                }
            }
            NumAt::Dot => reach.push(self.signed(int * SCALE + past, (int + 1) * SCALE - 1)),
            _ => {
                let magnitude = self.point().0.abs();
                let unit = 10i128.pow((MAX_FRAC_DIGITS - self.frac_len) as u32);
                let low = magnitude + past * i128::from(self.trailing_zero);
                reach.push(self.signed(low, magnitude + unit - 1));
            }
        }
        reach
    }
}

/// Up to one interval per integer digit still possible.
#[derive(Default)]
struct Reach {
    intervals: [(i128, i128); MAX_INT_DIGITS as usize + 1],
    len: usize,
}

impl Reach {
    fn push(&mut self, interval: (i128, i128)) {
        self.intervals[self.len] = interval;
        self.len += 1;
    }

    fn as_slice(&self) -> &[(i128, i128)] {
        &self.intervals[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::spelling::is_canonical;
    use crate::schema::SCALE;

    /// Whether `text` (then a `,`) is a complete number of `shape`.
    fn reads(shape: &NumberShape, text: &str) -> bool {
        reads_as(shape, text, false)
    }

    /// [`reads`], strict or not.
    fn reads_as(shape: &NumberShape, text: &str, strict: bool) -> bool {
        let mut bytes = text.bytes();
        let Some(mut num) = bytes.next().and_then(|b| NumLex::start(shape, b, strict)) else {
            return false;
        };
        for byte in bytes {
            match num.step(shape, byte) {
                Some(NumStep::Inside(next)) => num = next,
                _ => return false,
            }
        }
        matches!(num.step(shape, b','), Some(NumStep::Ended))
    }

    fn bounded(integer: bool, min: Option<f64>, max: Option<f64>, step: f64) -> NumberShape {
        let scale = |v: f64| (v * 1e6).round() as i128 * (SCALE / 1_000_000);
        NumberShape {
            integer,
            min: min.map(scale),
            max: max.map(scale),
            step: scale(step).max(1),
        }
    }

    #[test]
    fn integers_stay_within_bounds_and_i64() {
        let timeout = bounded(true, Some(1.0), Some(3600.0), 0.0);
        assert!(reads(&timeout, "3600"));
        assert!(reads(&timeout, "1"));
        assert!(!reads(&timeout, "1000000"), "the issue's timeout_seconds");
        assert!(!reads(&timeout, "3601"));
        assert!(!reads(&timeout, "0"));
        assert!(!reads(&timeout, "36.5"));
        let any = bounded(true, None, None, 0.0);
        assert!(reads(&any, "9223372036854775807"));
        assert!(reads(&any, "-9223372036854775808"));
        assert!(!reads(&any, "9223372036854775808"), "past i64");
        assert!(!reads(&any, "12345678901234567890123"), "a digit loop ends at i64");
        assert!(!reads(&any, "1e3"));
        assert!(!reads(&any, "01"));
    }

    #[test]
    fn decimals_compare_exactly_and_keep_to_their_grid() {
        let below = bounded(false, None, Some(3.0), 0.0);
        assert!(reads(&below, "3.0") && reads(&below, "2.999999") && reads(&below, "-1"));
        assert!(!reads(&below, "3.000001"));
        let above_exclusive = NumberShape {
            min: Some(11 * SCALE / 10 + 1),
            ..NumberShape::ANY
        };
        assert!(!reads(&above_exclusive, "1.1"));
        assert!(reads(&above_exclusive, "1.100000000000000001"));
        let cents = bounded(false, None, None, 0.01);
        assert!(reads(&cents, "19.99") && !reads(&cents, "19.999"));
        let free = NumberShape::ANY;
        assert!(reads(&free, "1.5e+300") && reads(&free, "-0.000123") && reads(&free, "1E-7"));
        assert!(!reads(&free, "1e309"), "not an f64");
        assert!(!reads(&free, &format!("0.{}", "3".repeat(25))), "a fraction loop ends");
    }

    #[test]
    fn strict_numbers_have_one_spelling_and_no_dead_ends() {
        let strict = |shape: &NumberShape, text: &str| reads_as(shape, text, true);
        let free = NumberShape::ANY;
        for text in ["0", "-1", "2.5", "0.125", "-0.5", "123456789012345678"] {
            assert!(strict(&free, text) && is_canonical(text.as_bytes()), "{text}");
        }
        for text in ["2.0", "2.50", "-0", "1e3", "1234567890123456789", "0.0"] {
            assert!(!strict(&free, text) && !is_canonical(text.as_bytes()), "{text}");
        }
        // Bounds [1, 1]: after `1.` no digit can lead anywhere (1.0 is spelled `1`).
        let one = bounded(false, Some(1.0), Some(1.0), 0.0);
        assert!(strict(&one, "1"));
        let dot = NumLex::start(&one, b'1', true).and_then(|n| n.step(&one, b'.'));
        assert!(dot.is_none(), "`1.` would be a dead end");
        // Bounds [0, 5]: a `-` could only lead to `-0`.
        let low = bounded(false, Some(0.0), Some(5.0), 0.0);
        assert!(NumLex::start(&low, b'-', true).is_none());
        assert!(
            NumLex::start(&low, b'-', false).is_some(),
            "`-0` is 0 outside a `oneOf`"
        );
    }
}
