//! ECMA-262 patterns (JSON Schema's dialect, with the `u` flag) rewritten into
//! Rust `regex` syntax with the same meaning: `\d` and `\w` are ASCII, `\s` is
//! ECMA's white space, `.` stops at line terminators, `\b` is the ASCII word
//! boundary, and `[`, `&`, `~` inside a class are plain characters. What has
//! no DFA (back-references, look-around) or no equivalent is refused.

use super::PatternError;

/// ECMA-262 `WhiteSpace` and `LineTerminator`, as class items.
const SPACE: &str = r"\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";
const WORD: &str = "0-9A-Za-z_";
const DIGIT: &str = "0-9";
/// `.`: anything but a line terminator.
const DOT: &str = r"[^\n\r\x{2028}\x{2029}]";

/// The pattern in `regex` syntax.
pub(super) fn translate(source: &str) -> Result<String, PatternError> {
    let mut out = String::with_capacity(source.len() * 2);
    let mut chars = source.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let escaped = chars.next().ok_or_else(|| refuse("ends with a lone `\\`"))?;
                escape(escaped, &mut chars, in_class, &mut out)?;
            }
            '[' if !in_class => {
                in_class = true;
                let negated = chars.next_if_eq(&'^').is_some();
                if chars.next_if_eq(&']').is_some() {
                    // ECMA `[]` matches nothing, `[^]` anything.
                    out.push_str(if negated { "(?s:.)" } else { r"[^\x00-\x{10FFFF}]" });
                    in_class = false;
                } else {
                    out.push_str(if negated { "[^" } else { "[" });
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '[' | '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '-' if in_class && chars.peek() == Some(&'-') => {
                return Err(refuse("`--` inside a character class"));
            }
            '.' if !in_class => out.push_str(DOT),
            '(' if !in_class => group(&mut chars, &mut out)?,
            '{' if !in_class && chars.peek() == Some(&',') => {
                return Err(refuse("a `{,n}` quantifier (not ECMA-262)"));
            }
            ']' => out.push_str(r"\]"),
            _ => out.push(c),
        }
    }
    if in_class {
        return Err(refuse("an unclosed character class"));
    }
    Ok(out)
}

/// The opening of a group: plain, non-capturing or named; look-around is refused.
fn group(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, out: &mut String) -> Result<(), PatternError> {
    out.push('(');
    if chars.next_if_eq(&'?').is_none() {
        return Ok(());
    }
    match chars.next() {
        Some(':') => out.push_str("?:"),
        Some('<') if !matches!(chars.peek(), Some('=') | Some('!')) => out.push_str("?<"),
        Some('=' | '!' | '<') => return Err(refuse("look-around (no DFA can run it)")),
        _ => return Err(refuse("a group modifier that ECMA-262 does not define")),
    }
    Ok(())
}

/// The escape `\c` (the backslash already read).
fn escape(
    c: char,
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    in_class: bool,
    out: &mut String,
) -> Result<(), PatternError> {
    let class = |items: &str, negated: bool| match (in_class, negated) {
        (true, false) => items.to_string(),
        (_, true) => format!("[^{items}]"),
        (false, false) => format!("[{items}]"),
    };
    let text = match c {
        'd' => class(DIGIT, false),
        'D' => class(DIGIT, true),
        'w' => class(WORD, false),
        'W' => class(WORD, true),
        's' => class(SPACE, false),
        'S' => class(SPACE, true),
        'b' if in_class => r"\x08".into(),
        'b' => r"(?-u:\b)".into(),
        'B' => r"(?-u:\B)".into(),
        't' => r"\t".into(),
        'n' => r"\n".into(),
        'r' => r"\r".into(),
        'f' => r"\x0C".into(),
        'v' => r"\x0B".into(),
        '0' if !chars.peek().is_some_and(char::is_ascii_digit) => r"\x00".into(),
        '0'..='9' | 'k' => return Err(refuse("a back-reference (no DFA can run it)")),
        'c' => {
            let letter = chars
                .next()
                .filter(char::is_ascii_alphabetic)
                .ok_or_else(|| refuse("`\\c` without a control letter"))?;
            format!(r"\x{:02X}", letter as u32 % 32)
        }
        'x' => format!(r"\x{{{:X}}}", hex(chars, 2)?),
        'u' => format!(r"\x{{{:X}}}", unicode_escape(chars)?),
        'p' | 'P' => {
            let body: String = std::iter::from_fn(|| chars.next_if(|&c| c != '}')).collect();
            if chars.next() != Some('}') || !body.starts_with('{') {
                return Err(refuse("`\\p` without `{...}`"));
            }
            format!(r"\{c}{body}}}")
        }
        c if c.is_ascii_punctuation() => format!(r"\{c}"),
        c if c.is_ascii_alphanumeric() => {
            return Err(refuse(&format!("the escape `\\{c}`, which ECMA-262 does not define")))
        }
        c => c.to_string(),
    };
    out.push_str(&text);
    Ok(())
}

/// `\uXXXX` (a surrogate pair joined), or `\u{X...}`.
fn unicode_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<u32, PatternError> {
    if chars.next_if_eq(&'{').is_some() {
        let digits: String = std::iter::from_fn(|| chars.next_if(|&c| c != '}')).collect();
        chars.next().ok_or_else(|| refuse("an unclosed `\\u{`"))?;
        let value = u32::from_str_radix(&digits, 16).map_err(|_| refuse("a bad `\\u{...}` escape"))?;
        return char::from_u32(value)
            .map(u32::from)
            .ok_or_else(|| refuse("a `\\u{...}` escape that is not a character"));
    }
    let high = hex(chars, 4)?;
    if !(0xD800..0xDC00).contains(&high) {
        return char::from_u32(high)
            .map(u32::from)
            .ok_or_else(|| refuse("a lone surrogate escape"));
    }
    let low = if chars.next() == Some('\\') && chars.next() == Some('u') {
        hex(chars, 4)?
    } else {
        return Err(refuse("a lone surrogate escape"));
    };
    if !(0xDC00..0xE000).contains(&low) {
        return Err(refuse("a lone surrogate escape"));
    }
    Ok(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
}

fn hex(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, digits: usize) -> Result<u32, PatternError> {
    let text: String = (0..digits).filter_map(|_| chars.next()).collect();
    if text.len() != digits {
        return Err(refuse("a short hex escape"));
    }
    u32::from_str_radix(&text, 16).map_err(|_| refuse("a bad hex escape"))
}

fn refuse(what: &str) -> PatternError {
    PatternError(format!("uses {what}"))
}

#[cfg(test)]
mod tests {
    use super::super::Dfa;

    fn matches(pattern: &str, text: &str) -> bool {
        Dfa::ecma(pattern).unwrap().matches(text)
    }

    #[test]
    fn classes_have_their_ecma_meaning() {
        assert!(!matches(r"^\d$", "৪"), "\\d is ASCII");
        assert!(!matches(r"^\w$", "é"), "\\w is ASCII");
        assert!(matches(r"^\s$", "\u{FEFF}"), "\\s includes the BOM");
        assert!(!matches(r"^\s$", "\u{85}"), "\\s excludes NEL");
        assert!(!matches("^.$", "\n") && !matches("^.$", "\u{2028}"));
        assert!(matches("^.$", "😀"), "`.` is a code point");
        assert!(matches(r"^[[&~]+$", "[&~"), "`[` `&` `~` are plain inside a class");
        assert!(matches(r"^[^]$", "\n") && !matches(r"^[]$", ""));
        assert!(matches(r"^\cJ$", "\n"));
        assert!(matches(r"^\u00e9\ud83d\ude00$", "é😀"));
        assert!(matches(r"\bword\b", "a word here") && !matches(r"\bword\b", "swordfish"));
        assert!(matches(r"^\p{L}+$", "héllo"));
        assert!(matches(r"^a\/b$", "a/b"));
    }

    #[test]
    fn what_no_dfa_can_run_is_refused() {
        for pattern in [
            r"(a)\1", r"(?=a)", r"(?<!a)b", r"(?i)a", r"a{,3}", r"\q", r"[a", r"\ud800",
        ] {
            assert!(Dfa::ecma(pattern).is_err(), "{pattern} should be refused");
        }
    }
}
