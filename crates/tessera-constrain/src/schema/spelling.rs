//! The one spelling a *strict* number has (inside a `oneOf` whose
//! alternatives overlap, every alternative must judge the value, not its
//! spelling): no exponent, no trailing zero in a fraction, no `-0`, at most
//! 18 integer and 18 fraction digits. The schema compiler judges `enum`
//! literals by it; the automaton (`json::number`) writes numbers by it.
//! Also the digit and exponent limits of every number the automaton reads,
//! which both judge by.

/// Most fraction digits a bounded number may have (the scale, 10^18).
pub(crate) const MAX_FRAC_DIGITS: u16 = 18;
/// Most integer digits of a strict number (below i64's range).
pub(crate) const MAX_STRICT_INT_DIGITS: u16 = 18;
/// Most integer digits a bounded number may have (i64 has 19).
pub(crate) const MAX_INT_DIGITS: u16 = 19;
/// Most integer and fraction digits of a number without bounds (serde_json
/// writes an f64 in fewer), so a model cannot loop on digits.
pub(crate) const MAX_FREE_INT_DIGITS: u16 = 20;
pub(crate) const MAX_FREE_FRAC_DIGITS: u16 = 24;
/// A free number's magnitude stays below 10^this (an f64's range) ...
pub(crate) const MAX_DECIMAL_EXPONENT: u16 = 308;
/// ... and a negative exponent at most this.
pub(crate) const MAX_NEGATIVE_EXPONENT: u16 = 999;

/// Whether `text` is a number in the one spelling strict numbers have (see the module's notes).
pub(crate) fn is_canonical(text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else {
        return false;
    };
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let fraction_ok = !digits.ends_with('.') && !frac.ends_with('0') && frac.len() <= MAX_FRAC_DIGITS as usize;
    let int_ok =
        !int.is_empty() && int.len() <= MAX_STRICT_INT_DIGITS as usize && (int == "0" || !int.starts_with('0'));
    let all_digits = int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit());
    let negative_zero = text.starts_with('-') && int == "0" && frac.is_empty();
    all_digits && int_ok && fraction_ok && !negative_zero
}
