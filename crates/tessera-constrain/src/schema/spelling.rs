//! The one spelling a *strict* number has (inside a `oneOf` whose
//! alternatives overlap, every alternative must judge the value, not its
//! spelling): no exponent, no trailing zero in a fraction, no `-0`, at most
//! 18 integer and 18 fraction digits. The schema compiler judges `enum`
//! literals by it; the automaton (`json::number`) writes numbers by it.

/// Most fraction digits a bounded number may have (the scale, 10^18).
pub(crate) const MAX_FRAC_DIGITS: u16 = 18;
/// Most integer digits of a strict number (below i64's range).
pub(crate) const MAX_STRICT_INT_DIGITS: u16 = 18;

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
