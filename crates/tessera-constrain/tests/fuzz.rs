//! Fuzzing the schema compiler and the JSON automaton (issue 21): random
//! keyword soup as schemas (valid, contradictory, ill-typed, deep) must
//! compile or be refused with an error, never panic; a compiled schema must
//! read any byte stream (random bytes, and valid values with bytes changed)
//! to an accept or a reject, never panic, and the generation matcher must
//! agree with the value checker on whole texts.
//!
//! `TESSERA_FUZZ_CASES` cases per target (default 48, what CI runs);
//! `scripts/fuzz.sh [minutes]` runs them long.

use proptest::prelude::*;
use serde_json::{json, Value};
use tessera_constrain::{ResponseSchema, SchemaOptions, ToolCallMatcher, ValueSchema};

fn cases() -> u32 {
    std::env::var("TESSERA_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(48)
}

const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "$ref",
    "$defs",
    "$anchor",
    "uniqueItems",
    "contains",
    "if",
    "then",
    "else",
    "dependentRequired",
];

/// Leaves a keyword may meet: type names, patterns, bounds of every size, references.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            "string", "integer", "number", "object", "array", "boolean", "null", "strin"
        ])
        .prop_map(|t| json!(t)),
        prop::sample::select(vec![
            "^[a-z]+$", "(a|b)*c", "[", "^$", "\\d{2,4}", "(?=x)", "a{99999}", "\\p{L}+", ".*"
        ])
        .prop_map(|p| json!(p)),
        prop::sample::select(vec!["date-time", "email", "uuid", "ipv4", "hostname", "nonsense"]).prop_map(|f| json!(f)),
        prop::sample::select(vec![
            "#",
            "#/$defs/a",
            "#/properties/x",
            "#/nope",
            "#anchor",
            "http://x/y"
        ])
        .prop_map(|r| json!(r)),
        any::<i64>().prop_map(|n| json!(n)),
        prop_oneof![Just(0.0), Just(-0.0), Just(1e-300), Just(1e300), Just(0.5), Just(-3.25)]
            .prop_map(|f: f64| json!(f)),
        any::<bool>().prop_map(|b| json!(b)),
        Just(Value::Null),
        "[a-z_]{0,8}".prop_map(|s| json!(s)),
    ]
}

/// A schema: objects of keywords (mostly real ones) over leaves, nested.
fn schema() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 48, 5, |inner| {
        let key = prop_oneof![
            8 => prop::sample::select(KEYWORDS.to_vec()).prop_map(str::to_string),
            1 => "[a-z]{1,6}",
        ];
        prop_oneof![
            4 => prop::collection::btree_map(key, inner.clone(), 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
            1 => prop::collection::vec(inner, 0..4).prop_map(Value::Array),
        ]
    })
}

/// Texts to read: random bytes as text, JSON-ish fragments, and deep nesting.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,60}",
        "[\\[\\]{}\",:0-9a-z. e+-]{0,80}",
        (1usize..300).prop_map(|n| "[".repeat(n) + &"]".repeat(n)),
        Just("{\"a\": 1e999999, \"b\": \"\\ud800\"}".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Any schema compiles or is refused; a compiled one reads any text
    /// without a panic, and the generation matcher agrees with the checker.
    #[test]
    fn random_schemas_and_texts_never_panic(schema in schema(), texts in prop::collection::vec(text(), 1..6)) {
        for options in [SchemaOptions::GENERATION, SchemaOptions { lenient: true, ..SchemaOptions::GENERATION }] {
            if let Ok(checker) = ValueSchema::compile("fuzz", &schema, options) {
                for text in &texts {
                    let _ = checker.accepts(text.as_bytes());
                }
            }
            if let Ok(response) = ResponseSchema::compile(&schema, options) {
                let checker = ValueSchema::compile("fuzz", &schema, options).ok();
                for text in &texts {
                    let mut matcher = ToolCallMatcher::json_value(&response);
                    let accepted = matcher.advance_text(text) && matcher.is_accepting();
                    if let (true, Some(checker)) = (accepted, &checker) {
                        prop_assert!(
                            checker.accepts(text.as_bytes()),
                            "the matcher accepted {:?}, which the checker refuses, under {}",
                            text,
                            schema
                        );
                    }
                }
            }
        }
    }
}

/// Found by the fuzz target: `minItems` near 2^63 made the compiler count
/// the shortest array item by item (a hang); nested minimums that multiply
/// past the limit are refused as well, naming why.
#[test]
fn huge_minimum_counts_are_refused_not_counted() {
    let huge = json!({"type": "array", "minItems": 9_000_000_000_000_000_000u64});
    let error = ValueSchema::compile("t", &huge, SchemaOptions::GENERATION).unwrap_err();
    assert!(error.to_string().contains("/minItems"), "{error}");
    assert!(
        error.to_string().contains("largest minItems supported (4096)"),
        "{error}"
    );
    let nested = json!({"type": "array", "minItems": 4096,
        "items": {"type": "array", "minItems": 4096, "items": {"type": "string", "minLength": 8}}});
    let error = ResponseSchema::compile(
        &json!({"type": "object", "properties": {"a": nested}, "required": ["a"]}),
        SchemaOptions::GENERATION,
    )
    .unwrap_err();
    assert!(error.to_string().contains("bytes at its shortest"), "{error}");
}
