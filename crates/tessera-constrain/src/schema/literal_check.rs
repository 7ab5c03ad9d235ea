//! Whether a compiled shape takes one scalar literal (`null`, `true`, a
//! number or a string, as [`super::values::spellings`] writes it): what
//! [`super::merge`] asks when an `enum` meets other keywords. It reads the
//! description alone, so compiling never runs the JSON automaton; it decides
//! exactly as the automaton reads the literal as a whole value (a test
//! checks the two against each other on every shape of the JSON Schema Test
//! Suite), including the automaton's own limits and spelling rules:
//! - a number without bounds takes an exponent (magnitude below 10^308, a
//!   negative one down to 10^-999) and at most 20 integer and 24 fraction
//!   digits; a bounded one (`minimum`, `multipleOf`, `integer`, …) is an
//!   exact decimal of at most 19 integer and 18 fraction digits, judged on
//!   the scaled grid; `integer` takes no fraction at all (`1.0` is refused);
//! - inside an overlapping `oneOf` every alternative reads *strictly*:
//!   numbers in their one spelling ([`super::spelling::is_canonical`]),
//!   strings with serde_json's escapes only, literal sets through their
//!   strict tries; the `oneOf` takes the literal when exactly one
//!   alternative does (a repeated alternative excludes itself);
//! - a string's length counts code points of the decoded text, and its
//!   pattern reads the decoded text's UTF-8 bytes (with a pattern, escapes
//!   must be serde_json's too).
//!
//! Containers are not literals: an array or object shape takes none.

use super::spelling::{
    is_canonical, MAX_DECIMAL_EXPONENT, MAX_FRAC_DIGITS, MAX_FREE_FRAC_DIGITS, MAX_FREE_INT_DIGITS, MAX_INT_DIGITS,
    MAX_NEGATIVE_EXPONENT, MAX_STRICT_INT_DIGITS,
};
use super::{Node, NodeId, NumberShape, SchemaArena, StringShape, SCALE};

/// Whether `node` takes the scalar literal `text` as a whole value.
pub(super) fn accepts_literal(arena: &SchemaArena, node: NodeId, text: &[u8]) -> bool {
    takes(arena, node, text, false)
}

/// [`accepts_literal`], `strict` inside an overlapping `oneOf`.
fn takes(arena: &SchemaArena, node: NodeId, text: &[u8], strict: bool) -> bool {
    match &arena.nodes[node as usize] {
        Node::Never | Node::Pending | Node::Array(_) | Node::Object(_) => false,
        Node::Any => match text.first() {
            Some(b'"') => string_takes(arena, &StringShape::ANY, text, strict),
            Some(b't' | b'f') => is_boolean(text),
            Some(b'n') => text == b"null",
            _ => number_takes(&NumberShape::ANY, text, strict),
        },
        Node::Null => text == b"null",
        Node::Boolean => is_boolean(text),
        Node::Number(shape) => number_takes(shape, text, strict),
        Node::String(shape) => string_takes(arena, shape, text, strict),
        Node::Literals(trie) => {
            let trie = &arena.tries[arena.literal_trie(*trie, strict) as usize];
            trie.strings().iter().any(|literal| literal == text)
        }
        Node::Union(alternatives) => alternatives.iter().any(|&alt| takes(arena, alt, text, strict)),
        Node::OneOf(alternatives) => {
            alternatives
                .iter()
                .filter(|&&alt| takes(arena, alt, text, true))
                .count()
                == 1
        }
    }
}

fn is_boolean(text: &[u8]) -> bool {
    text == b"true" || text == b"false"
}

/// A JSON number's parts, as written.
struct Spelled<'a> {
    negative: bool,
    int: &'a [u8],
    /// Empty without a `.`.
    frac: &'a [u8],
    has_dot: bool,
    /// `(negative, digits)` after an `e`/`E`, if one.
    exponent: Option<(bool, &'a [u8])>,
}

/// `text` split by the JSON number grammar (`None`: not a JSON number).
fn spelled(text: &[u8]) -> Option<Spelled<'_>> {
    let digits_at = |from: usize| from + text[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let negative = text.first() == Some(&b'-');
    let int_start = usize::from(negative);
    let int_end = digits_at(int_start);
    let int = &text[int_start..int_end];
    if int.is_empty() || int.len() > 1 && int[0] == b'0' {
        return None;
    }
    let mut at = int_end;
    let has_dot = text.get(at) == Some(&b'.');
    let mut frac: &[u8] = &[];
    if has_dot {
        let end = digits_at(at + 1);
        frac = &text[at + 1..end];
        if frac.is_empty() {
            return None;
        }
        at = end;
    }
    let mut exponent = None;
    if matches!(text.get(at), Some(b'e' | b'E')) {
        let sign = matches!(text.get(at + 1), Some(b'+' | b'-'));
        let start = at + 1 + usize::from(sign);
        let end = digits_at(start);
        if end == start {
            return None;
        }
        exponent = Some((text.get(at + 1) == Some(&b'-'), &text[start..end]));
        at = end;
    }
    (at == text.len()).then_some(Spelled {
        negative,
        int,
        frac,
        has_dot,
        exponent,
    })
}

/// Whether a number shape takes the number `text`.
fn number_takes(shape: &NumberShape, text: &[u8], strict: bool) -> bool {
    let Some(number) = spelled(text) else {
        return false;
    };
    if strict && !is_canonical(text) {
        return false;
    }
    let bounded = shape.is_bounded();
    let (int_digits, frac_digits) = match (strict, bounded) {
        (true, _) => (MAX_STRICT_INT_DIGITS, MAX_FRAC_DIGITS),
        (false, true) => (MAX_INT_DIGITS, MAX_FRAC_DIGITS),
        (false, false) => (MAX_FREE_INT_DIGITS, MAX_FREE_FRAC_DIGITS),
    };
    let (int_digits, frac_digits) = (usize::from(int_digits), usize::from(frac_digits));
    if number.int.len() > int_digits || number.frac.len() > frac_digits || shape.integer && number.has_dot {
        return false;
    }
    if let Some((negative, digits)) = number.exponent {
        if bounded || strict || !exponent_in_range(number.int.len(), negative, digits) {
            return false;
        }
    }
    // Only a bounded number is an exact decimal (at most 18 fraction digits).
    !bounded || {
        let value = scaled(&number);
        shape.feasible(&[(value, value)])
    }
}

/// Whether an exponent keeps the number an f64 the automaton writes.
fn exponent_in_range(int_digits: usize, negative: bool, digits: &[u8]) -> bool {
    let value = digits
        .iter()
        .try_fold(0u16, |v, &d| v.checked_mul(10)?.checked_add(u16::from(d - b'0')));
    match (value, negative) {
        (None, _) => false,
        (Some(exp), true) => exp <= MAX_NEGATIVE_EXPONENT,
        (Some(exp), false) => int_digits + usize::from(exp) <= usize::from(MAX_DECIMAL_EXPONENT),
    }
}

/// A bounded number's value in units of 10^-18 (no exponent: it has none).
fn scaled(number: &Spelled<'_>) -> i128 {
    let value = |digits: &[u8]| digits.iter().fold(0i128, |v, &d| v * 10 + i128::from(d - b'0'));
    let fraction_unit = 10i128.pow((MAX_FRAC_DIGITS as usize - number.frac.len()) as u32);
    let magnitude = value(number.int) * SCALE + value(number.frac) * fraction_unit;
    if number.negative {
        -magnitude
    } else {
        magnitude
    }
}

/// Whether a string shape takes the string literal `text`.
fn string_takes(arena: &SchemaArena, shape: &StringShape, text: &[u8], strict: bool) -> bool {
    // serde_json would take spaces around the quotes; the automaton does not.
    if text.len() < 2 || text[0] != b'"' || text[text.len() - 1] != b'"' {
        return false;
    }
    let Ok(decoded) = serde_json::from_slice::<String>(text) else {
        return false;
    };
    // serde_json refuses raw control bytes, bad UTF-8 and lone surrogates, as the automaton does.
    let canonical = strict || shape.pattern.is_some();
    if canonical && serde_json::to_string(&decoded).ok().as_deref().map(str::as_bytes) != Some(text) {
        return false;
    }
    let length = decoded.chars().count();
    if length < shape.min_len as usize || length > shape.max_len as usize {
        return false;
    }
    let Some(pattern) = shape.pattern else {
        return true;
    };
    let dfa = &arena.patterns[pattern as usize].dfa;
    let end = decoded.bytes().fold(0, |state, byte| dfa.step(state, byte));
    dfa.accepts(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::PatternCache;
    use crate::schema::SchemaOptions;
    use serde_json::{json, Value};
    use std::sync::Arc;

    /// Texts at the edges of the rules above, beside every value's spellings.
    const EDGES: &[&str] = &[
        "null",
        "true",
        "false",
        "nul",
        "truex",
        "-",
        "01",
        "1.",
        ".5",
        "+1",
        "-0",
        "-0.0",
        "0.10",
        "1E5",
        "1e+5",
        "1e-999",
        "1e-1000",
        "1e309",
        "1e308",
        "12e307",
        "1e99999",
        "1.000000000000000001",
        "1.0000000000000000001",
        "123456789012345678",
        "1234567890123456789",
        "12345678901234567890",
        "123456789012345678901",
        "0.123456789012345678901234",
        "0.1234567890123456789012345",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "2.50",
        "36.5",
        "3601",
        "\"\"",
        "\"a\"",
        "\"ab\"",
        "\"abcd\"",
        "\"héllo\"",
        "\"😀é\"",
        "\"\\n\"",
        "\"\\u001f\"",
        "\"\\/\"",
        "\"\\u0041\"",
        "\"\\u000B\"",
        "\"a b\"",
        " \"a\"",
        "\"a\" ",
        "\"\\ud800\"",
        "\"\\ud83d\\ude00\"",
        "\"2024-01-31\"",
        "\"2024-13-01\"",
        "\"x@y.com\"",
        "\"12:30:00Z\"",
        "\"foo\"",
        "\"bar\"",
        "\"aaa\"",
        "\"\\u0000\"",
        "\"💩💩\"",
    ];

    /// Scalars whose spellings join the corpus.
    fn values() -> Vec<Value> {
        let numbers = json!([
            0,
            1,
            -1,
            2,
            3,
            5,
            10,
            100,
            3600,
            1.5,
            -2.5,
            0.1,
            0.125,
            19.99,
            19.999,
            1e20,
            1e25,
            -1e25,
            1e300,
            1.7976931348623157e308,
            1e-7,
            1.2345678901234567e-10,
            5e-324,
            9223372036854775807i64,
            -9223372036854775808i64,
            12345678901234567890u64,
            2.0,
            1e18,
            1e19,
            0.5,
            4.5,
            7,
            -7,
            42,
            1.1
        ]);
        let mut values = numbers.as_array().cloned().unwrap_or_default();
        values.extend([json!(null), json!(true), json!(false), json!("a"), json!("é\n\"\\")]);
        values
    }

    /// Every text the check is asked about: the edges, every value's
    /// spellings, and every literal `arena` holds.
    fn corpus(arena: &SchemaArena, extra: &[Value]) -> Vec<Vec<u8>> {
        let mut texts: Vec<Vec<u8>> = EDGES.iter().map(|t| t.as_bytes().to_vec()).collect();
        for value in values().iter().chain(extra) {
            texts.extend(
                super::super::values::spellings(value)
                    .into_iter()
                    .map(String::into_bytes),
            );
        }
        texts.extend(arena.tries.iter().flat_map(|trie| trie.strings().iter().cloned()));
        texts.sort();
        texts.dedup();
        texts
    }

    /// Every node of `arena` against every text: the check and the automaton agree.
    fn agree_on_every_node(arena: &SchemaArena, extra: &[Value], what: &str) -> usize {
        let texts = corpus(arena, extra);
        let mut compared = 0;
        for node in 0..arena.nodes.len() as NodeId {
            for text in &texts {
                let automaton = crate::json::accepts(arena, None, node, text);
                let check = accepts_literal(arena, node, text);
                assert_eq!(
                    check,
                    automaton,
                    "{what}: node {node} ({:?}) and {:?}: the check says {check}, the automaton {automaton}",
                    arena.nodes[node as usize],
                    String::from_utf8_lossy(text)
                );
                compared += 1;
            }
        }
        compared
    }

    fn compiled(schema: &Value) -> Option<SchemaArena> {
        let mut arena = SchemaArena::new(SchemaOptions::EXACT, Arc::new(PatternCache::default()));
        arena.compile_value("schema", schema).ok().map(|_| arena)
    }

    #[test]
    fn agrees_with_the_automaton_on_a_table_of_shapes() {
        let schemas = json!([
            {},
            {"type": "integer"},
            {"type": "integer", "minimum": 1, "maximum": 3600},
            {"type": "number", "maximum": 3},
            {"type": "number", "exclusiveMinimum": 1.1},
            {"type": "number", "multipleOf": 0.01},
            {"type": "number", "minimum": 1, "maximum": 1},
            {"type": "number", "minimum": 0, "maximum": 5},
            {"type": "string", "minLength": 2, "maxLength": 3},
            {"type": "string", "pattern": "^a+$"},
            {"type": "string", "pattern": "^a+$", "maxLength": 2},
            {"type": "string", "format": "date"},
            {"type": "string", "format": "email"},
            {"enum": [1, 2.5, "foo", null, true, 1e20]},
            {"enum": [1, "a"], "type": "integer"},
            {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            {"oneOf": [{"type": "number", "minimum": 2}, {"type": "integer"}]},
            {"oneOf": [{"enum": [1.0, 2, "bar"]}, {"type": "string"}]},
            {"oneOf": [{"type": "string"}, {"type": "string"}]},
            {"oneOf": [{"oneOf": [{"type": "integer"}, {"minimum": 3}]}, {"type": "number", "maximum": 4}]},
            {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "number", "multipleOf": 2}]},
            {"type": ["null", "boolean", "string"]},
            {"const": "foo"},
            {"const": 0},
            {"type": "array"},
            {"type": "object"}
        ]);
        let mut compared = 0;
        for schema in schemas.as_array().into_iter().flatten() {
            let arena = compiled(schema).unwrap_or_else(|| panic!("{schema} compiles"));
            compared += agree_on_every_node(&arena, &[], &schema.to_string());
        }
        assert!(compared > 10_000, "{compared} comparisons");
    }

    /// Scalars in a suite file's instances and schemas (enums, consts).
    fn scalars_in(value: &Value, out: &mut Vec<Value>) {
        match value {
            Value::Array(items) => items.iter().for_each(|v| scalars_in(v, out)),
            Value::Object(map) => map.values().for_each(|v| scalars_in(v, out)),
            scalar => out.push(scalar.clone()),
        }
    }

    #[test]
    fn agrees_with_the_automaton_on_every_shape_of_the_schema_suite() {
        let dir = tessera_fixtures::json_schema_suite();
        let files = [dir.clone(), dir.join("optional/format")]
            .into_iter()
            .flat_map(|d| std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())))
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|x| x == "json"));
        let (mut arenas, mut compared) = (0, 0);
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let groups: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for group in groups.as_array().into_iter().flatten() {
                let mut scalars = Vec::new();
                scalars_in(group, &mut scalars);
                let Some(arena) = compiled(&group["schema"]) else {
                    continue;
                };
                arenas += 1;
                let what = format!("{} / {}", path.display(), group["description"]);
                compared += agree_on_every_node(&arena, &scalars, &what);
            }
        }
        assert!(arenas > 150, "only {arenas} suite schemas compiled");
        println!("{arenas} suite schemas, {compared} node/literal pairs agree");
    }
}
