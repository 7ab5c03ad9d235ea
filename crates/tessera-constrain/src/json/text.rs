//! The inside of a JSON string, byte by byte: UTF-8 validated (no overlong
//! forms, no encoded surrogates), escapes checked (a `\u` high surrogate must
//! be followed by its low half; a lone low half is refused, since a parser
//! could not decode it), and characters counted in code points for length
//! bounds. A string with a pattern also carries its pattern's DFA state,
//! fed the decoded characters (an escape as the character it stands for); a
//! byte is allowed only while a match of an allowed length can still follow.

use crate::pattern::{KeyDfa, KeyEnd, PatternUse};

/// Position inside an escape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Esc {
    None,
    Backslash,
    /// Hex digits still expected after `\u`, and the value so far.
    Hex {
        left: u8,
        value: u16,
    },
    /// A high surrogate was read: `\` of its low half expected.
    LowBackslash,
    /// `u` of the low half expected.
    LowU,
    /// The low half's hex digits.
    LowHex {
        left: u8,
        value: u16,
    },
}

/// Continuation bytes still expected in a UTF-8 sequence, and the range of the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Utf8 {
    left: u8,
    lo: u8,
    hi: u8,
}

impl Utf8 {
    pub const READY: Self = Self {
        left: 0,
        lo: 0x80,
        hi: 0xBF,
    };

    /// The sequence a lead byte opens (`None`: not a lead byte of valid UTF-8).
    fn lead(byte: u8) -> Option<Self> {
        let (left, lo, hi) = match byte {
            0xC2..=0xDF => (1, 0x80, 0xBF),
            0xE0 => (2, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
            0xED => (2, 0x80, 0x9F),
            0xF0 => (3, 0x90, 0xBF),
            0xF1..=0xF3 => (3, 0x80, 0xBF),
            0xF4 => (3, 0x80, 0x8F),
            _ => return None,
        };
        Some(Self { left, lo, hi })
    }
}

/// Where inside a string's text the lexer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TextAt {
    pub esc: Esc,
    pub utf8: Utf8,
    /// Code points so far, saturated at the bound that still matters.
    pub count: u32,
    /// The pattern's DFA state after the characters decoded so far (0 without a pattern).
    pub dfa: u32,
}

/// What one byte does to a string's text.
pub(crate) enum TextStep {
    /// The closing quote.
    End,
    Inside(TextAt),
}

/// Length bounds of the text, in code points.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub min: u32,
    pub max: u32,
}

/// What a string's text must be.
#[derive(Clone, Copy)]
pub(crate) struct TextRules<'a> {
    pub bounds: Bounds,
    /// Escapes only as serde_json writes them (always so with a pattern).
    pub canonical: bool,
    pub pattern: Option<TextPattern<'a>>,
}

/// What a string's decoded text must match.
#[derive(Clone, Copy)]
pub(crate) enum TextPattern<'a> {
    /// A string value's pattern, under its length bounds.
    Value(&'a PatternUse),
    /// An object's keys: a declared name among `declared` (bits), or an
    /// undeclared key whose set of matching key patterns is among `sets`.
    Key { keys: &'a KeyDfa, declared: u64, sets: u64 },
}

impl TextPattern<'_> {
    fn step(&self, state: u32, byte: u8) -> u32 {
        match self {
            Self::Value(pattern) => pattern.dfa.step(state, byte),
            Self::Key { keys, .. } => keys.step(state, byte),
        }
    }

    fn live(&self, state: u32, count: u32, bounds: Bounds) -> bool {
        match *self {
            Self::Value(pattern) => pattern.live(state, count, bounds.min, bounds.max),
            Self::Key { keys, declared, sets } => keys.live(state, declared, sets),
        }
    }

    /// Whether the text may end in `state`.
    fn accepts(&self, state: u32) -> bool {
        match *self {
            Self::Value(pattern) => pattern.dfa.accepts(state),
            Self::Key { keys, declared, sets } => match keys.end(state) {
                Some(KeyEnd::Declared(i)) => declared >> i & 1 != 0,
                Some(KeyEnd::Undeclared(set)) => sets >> set & 1 != 0,
                None => false,
            },
        }
    }
}

impl TextRules<'_> {
    /// Any text.
    pub const ANY: TextRules<'static> = TextRules {
        bounds: Bounds { min: 0, max: u32::MAX },
        canonical: false,
        pattern: None,
    };
}

impl TextAt {
    pub const START: Self = Self {
        esc: Esc::None,
        utf8: Utf8::READY,
        count: 0,
        dfa: 0,
    };

    /// Between characters, outside any escape.
    pub fn at_boundary(&self) -> bool {
        self.esc == Esc::None && self.utf8.left == 0
    }

    /// `byte` after this point, or `None` when no valid string continues so.
    pub fn step(self, byte: u8, rules: &TextRules<'_>) -> Option<TextStep> {
        let next = self.step_text(byte, rules.bounds, rules.canonical)?;
        let Some(pattern) = rules.pattern else {
            return Some(next);
        };
        let TextStep::Inside(mut next) = next else {
            return pattern.accepts(self.dfa).then_some(TextStep::End);
        };
        let live = |c: u8| pattern.live(pattern.step(self.dfa, c), next.count, rules.bounds);
        if next.esc == Esc::None {
            let decoded = match self.esc {
                Esc::Backslash => short_escape(byte)?,
                Esc::Hex { value, .. } => (value << 4 | hex_value(byte)? as u16) as u8,
                _ => byte,
            };
            if !live(decoded) {
                return None;
            }
            next.dfa = pattern.step(self.dfa, decoded);
            return Some(TextStep::Inside(next));
        }
        // An escape has begun: some character it may still stand for must keep a match.
        let possible = match next.esc {
            Esc::Backslash => (0x00..0x20).chain([b'"', b'\\']).any(live),
            Esc::Hex { left, value } => {
                let shift = 4 * left as u32;
                let lo = (value as u32) << shift;
                let hi = ((value as u32 + 1) << shift).min(0x20);
                (lo..hi)
                    .map(|c| c as u8)
                    .filter(|&c| short_escape_of(c).is_none())
                    .any(live)
            }
            _ => false,
        };
        possible.then_some(TextStep::Inside(next))
    }

    /// The text step alone. `canonical`: escapes only as serde_json writes
    /// them (`\"`, `\\`, `\b` `\f` `\n` `\r` `\t`, `\u00XX` for other control
    /// characters), so each text has one spelling (object keys, matched
    /// against declared names; strings with a pattern).
    fn step_text(self, byte: u8, bounds: Bounds, canonical: bool) -> Option<TextStep> {
        if self.utf8.left > 0 {
            let utf8 = self.utf8;
            if !(utf8.lo..=utf8.hi).contains(&byte) {
                return None;
            }
            let next = Utf8 {
                left: utf8.left - 1,
                ..Utf8::READY
            };
            return Some(TextStep::Inside(Self { utf8: next, ..self }));
        }
        let inside = |esc: Esc| Some(TextStep::Inside(Self { esc, ..self }));
        match self.esc {
            Esc::None => match byte {
                b'"' => (self.count >= bounds.min).then_some(TextStep::End),
                b'\\' => self.new_char(bounds, Esc::Backslash, Utf8::READY),
                0x00..=0x1F => None,
                0x20..=0x7F => self.new_char(bounds, Esc::None, Utf8::READY),
                _ => self.new_char(bounds, Esc::None, Utf8::lead(byte)?),
            },
            Esc::Backslash => match byte {
                b'/' if canonical => None,
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => inside(Esc::None),
                b'u' => inside(Esc::Hex { left: 4, value: 0 }),
                _ => None,
            },
            Esc::Hex { left, value } => {
                let value = value << 4 | hex_value(byte)? as u16;
                // serde_json writes `\u00XX` with lowercase hex digits: one spelling.
                if canonical && (!canonical_control(left - 1, value) || byte.is_ascii_uppercase()) {
                    return None;
                }
                match left - 1 {
                    // After two digits: `\uDC..`-`\uDF..` would be a lone low surrogate.
                    2 if (0xDC..=0xDF).contains(&value) => None,
                    0 if (0xD800..=0xDBFF).contains(&value) => inside(Esc::LowBackslash),
                    0 => inside(Esc::None),
                    left => inside(Esc::Hex { left, value }),
                }
            }
            Esc::LowBackslash => (byte == b'\\').then_some(TextStep::Inside(Self { esc: Esc::LowU, ..self })),
            Esc::LowU => (byte == b'u').then_some(TextStep::Inside(Self {
                esc: Esc::LowHex { left: 4, value: 0 },
                ..self
            })),
            Esc::LowHex { left, value } => {
                let value = value << 4 | hex_value(byte)? as u16;
                match left - 1 {
                    3 if value != 0xD => None,
                    2 if !(0xDC..=0xDF).contains(&value) => None,
                    0 => inside(Esc::None),
                    left => inside(Esc::LowHex { left, value }),
                }
            }
        }
    }

    /// A character starts (counted), if the bound allows one more.
    fn new_char(self, bounds: Bounds, esc: Esc, utf8: Utf8) -> Option<TextStep> {
        if self.count >= bounds.max {
            return None;
        }
        // Past `min` and without a `max`, the count no longer matters: keep the state still.
        let cap = if bounds.max == u32::MAX { bounds.min } else { bounds.max };
        let count = (self.count + 1).min(cap);
        Some(TextStep::Inside(Self {
            esc,
            utf8,
            count,
            ..self
        }))
    }
}

/// The character a short escape (`\n`...) stands for.
fn short_escape(byte: u8) -> Option<u8> {
    Some(match byte {
        b'"' | b'\\' | b'/' => byte,
        b'b' => 0x08,
        b'f' => 0x0C,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        _ => return None,
    })
}

/// The short escape of a character, if it has one.
fn short_escape_of(c: u8) -> Option<u8> {
    (b"\"\\bfnrt".iter().copied()).find(|&e| short_escape(e) == Some(c))
}

/// Whether `\u` digits so far (`left` still to come) can spell a control
/// character serde_json escapes as `\u00XX` (not one with a short escape).
fn canonical_control(left: u8, value: u16) -> bool {
    match left {
        3 | 2 => value == 0,
        1 => value <= 1,
        _ => value < 0x20 && !matches!(value, 0x08 | 0x09 | 0x0A | 0x0C | 0x0D),
    }
}

fn hex_value(byte: u8) -> Option<u8> {
    (byte as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &[u8], bounds: Bounds) -> Option<bool> {
        let mut at = TextAt::START;
        for (i, &byte) in text.iter().enumerate() {
            let rules = TextRules {
                bounds,
                ..TextRules::ANY
            };
            match at.step(byte, &rules)? {
                TextStep::End => return Some(i + 1 == text.len()),
                TextStep::Inside(next) => at = next,
            }
        }
        Some(false)
    }

    const ANY: Bounds = Bounds { min: 0, max: u32::MAX };

    #[test]
    fn strings_are_valid_utf8_with_valid_escapes() {
        assert_eq!(read("héllo 😀\"".as_bytes(), ANY), Some(true));
        assert_eq!(read(br#"\ud83d\ude00\n\"""#, ANY), Some(true));
        assert_eq!(read(b"\xC0\x80\"", ANY), None, "overlong");
        assert_eq!(read(b"\xED\xA0\x80\"", ANY), None, "an encoded surrogate");
        assert_eq!(read(b"\xF4\x90\x80\x80\"", ANY), None, "past U+10FFFF");
        assert_eq!(read(br#"\udc00""#, ANY), None, "a lone low surrogate");
        assert_eq!(read(br#"\ud800x""#, ANY), None, "a high surrogate alone");
        assert_eq!(
            read(br#"\ud800\u0041""#, ANY),
            None,
            "a high surrogate before a non-surrogate"
        );
        assert_eq!(read(b"a\nb\"", ANY), None, "a raw control byte");
    }

    #[test]
    fn canonical_text_has_one_spelling() {
        let canonical = |text: &[u8]| {
            let mut at = TextAt::START;
            for &byte in text {
                let rules = TextRules {
                    canonical: true,
                    ..TextRules::ANY
                };
                match at.step(byte, &rules) {
                    Some(TextStep::Inside(next)) => at = next,
                    Some(TextStep::End) => return true,
                    None => return false,
                }
            }
            false
        };
        assert!(canonical(br#"a\n\"\u001f""#));
        assert!(!canonical(br#"\u0041""#), "`A` escaped");
        assert!(!canonical(br#"\u000a""#), "a newline has a short escape");
        assert!(!canonical(br#"\/""#));
        assert!(
            canonical(br#"\u000b""#) && !canonical(br#"\u000B""#),
            "lowercase hex only"
        );
    }

    #[test]
    fn lengths_count_code_points() {
        let two_to_three = Bounds { min: 2, max: 3 };
        assert_eq!(read("é\"".as_bytes(), two_to_three), None, "one code point: too short");
        assert_eq!(read("😀é\"".as_bytes(), two_to_three), Some(true));
        assert_eq!(
            read(br#"\ud83d\ude00\n""#, two_to_three),
            Some(true),
            "a surrogate pair is one"
        );
        assert_eq!(read("abcd\"".as_bytes(), two_to_three), None, "four: too long");
    }
}
