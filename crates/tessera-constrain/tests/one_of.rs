//! Overlapping `oneOf` read exactly: a value is accepted only where exactly
//! one alternative accepts it, in one spelling per value; and the edge cases a
//! review found (ways out the search must see, open objects, escapes, numbers
//! past what the automaton writes).

use serde_json::{json, Value};
use std::sync::Arc;
use tessera_constrain::{CallFormat, CallMode, CompiledTools, Envelope, ToolCallMatcher, ToolChoice, ToolDef};

fn tool(name: &str, parameters: Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: String::new(),
        parameters,
    }
}

/// `check(schema, [(arguments, valid)])`: each call of tool `t` with these arguments.
fn check(schema: Value, table: &[(&str, bool)]) {
    let tools = Arc::new(CompiledTools::compile(&[tool("t", schema.clone())]).unwrap());
    let choice = ToolChoice {
        mode: CallMode::Auto,
        allowed: None,
        parallel: false,
    };
    for &(arguments, valid) in table {
        let text = format!("<tool_call>\n{{\"name\": \"t\", \"arguments\": {arguments}}}\n</tool_call>");
        let mut matcher = ToolCallMatcher::new(tools.clone(), &choice, &Envelope::new(CallFormat::Hermes)).unwrap();
        let accepted = matcher.advance_text(&text) && matcher.is_accepting();
        assert_eq!(accepted, valid, "schema {schema}, arguments {arguments}");
    }
}

#[test]
fn overlapping_one_of_takes_values_exactly_one_alternative_accepts() {
    // Integers under 2 (the first only) and non-integers from 2 (the second only).
    let v = |alternatives: Value| json!({"type": "object", "properties": {"v": {"oneOf": alternatives}}, "required": ["v"]});
    check(
        v(json!([{"type": "integer"}, {"type": "number", "minimum": 2}])),
        &[
            (r#"{"v": 1}"#, true),
            (r#"{"v": -7}"#, true),
            (r#"{"v": 2.5}"#, true),
            (r#"{"v": 3}"#, false),
            (r#"{"v": 1.5}"#, false),
            // One spelling per value inside an overlapping `oneOf`: 3.0 is 3, in both.
            (r#"{"v": 3.0}"#, false),
            (r#"{"v": 2.50}"#, false),
            (r#"{"v": 25e-1}"#, false),
            (r#"{"v": -0}"#, false),
            (r#"{"v": 0}"#, true),
        ],
    );
    check(
        v(json!([{"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^[a-z]+$"}])),
        &[
            (r#"{"v": "AB"}"#, true),
            (r#"{"v": "abcd"}"#, true),
            (r#"{"v": "abc"}"#, false),
            (r#"{"v": "ABCD"}"#, false),
            // `\u0061` is `a`: escapes only where JSON needs them.
            (r#"{"v": "\u0061bcd"}"#, false),
        ],
    );
    check(
        v(json!([{"enum": ["red", 7]}, {"type": "integer"}])),
        &[
            (r#"{"v": "red"}"#, true),
            (r#"{"v": 8}"#, true),
            (r#"{"v": 7}"#, false),
            (r#"{"v": 7.0}"#, false),
        ],
    );
    check(
        v(json!([{"type": "number"}, {}])),
        &[
            (r#"{"v": "text"}"#, true),
            (r#"{"v": [1]}"#, true),
            (r#"{"v": 1}"#, false),
        ],
    );
    // Nested: the inner `oneOf` decides first, then the outer counts it once.
    check(
        v(json!([{"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}, {"type": "string"}])),
        &[
            (r#"{"v": -1}"#, true),
            (r#"{"v": 0.5}"#, true),
            (r#"{"v": "s"}"#, true),
            (r#"{"v": 1}"#, false),
        ],
    );
}

#[test]
fn a_one_of_at_the_root_of_parameters_ends_with_the_object() {
    let schema = json!({"oneOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]},
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["b"]}
    ]});
    check(
        schema,
        &[
            (r#"{"a": 1}"#, true),
            (r#"{"b": "x"}"#, true),
            (r#"{"a": 1, "b": "x"}"#, false),
            (r#"{}"#, false),
        ],
    );
    let nothing = json!({"type": "object", "oneOf": [true, true]});
    let error = CompiledTools::compile(&[tool("t", nothing)]).unwrap_err().to_string();
    assert!(error.contains("exactly one alternative of a `oneOf`"), "{error}");
}

/// Former failures found in review: each compiles and keeps a way forward,
/// or is refused by name.
#[test]
fn overlapping_one_of_edge_cases_keep_a_way_forward_or_are_refused() {
    let v = |one_of: Value| json!({"type": "object", "properties": {"v": {"oneOf": one_of}}, "required": ["v"]});
    // The alternatives' own shortest completions match both ("b"); `c` is the way out.
    check(
        v(json!([{"enum": ["c", "b"]}, {"const": "b"}])),
        &[(r#"{"v": "c"}"#, true), (r#"{"v": "b"}"#, false)],
    );
    check(
        v(json!([{"enum": [27, 23]}, {"const": 23}])),
        &[(r#"{"v": 27}"#, true), (r#"{"v": 23}"#, false)],
    );
    // Declared objects stay open inside an overlapping `oneOf`: `{"a": 1, "b": "x"}` matches both.
    let a = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    let b = json!({"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]});
    check(
        v(json!([a, b])),
        &[
            (r#"{"v": {"a": 1}}"#, true),
            (r#"{"v": {"a": 1, "b": "x"}}"#, false),
            (r#"{"v": {"b": "x", "c": 0}}"#, true),
        ],
    );
    // Without `required`, the values only one matches are odd ones (`{"a": "x"}`): none is
    // found, and the schema is refused with how to tell the alternatives apart.
    let open = v(
        json!([{"type": "object", "properties": {"a": {"type": "integer"}}}, {"type": "object", "properties": {"b": {"type": "string"}}}]),
    );
    let error = CompiledTools::compile(&[tool("t", open)]).unwrap_err().to_string();
    assert!(error.contains("additionalProperties: false"), "{error}");
    // One spelling of a control character's escape.
    check(
        v(json!([{"const": "\u{b}"}, {"type": "string"}])),
        &[
            (r#"{"v": "\u000b"}"#, false),
            (r#"{"v": "\u000B"}"#, false),
            (r#"{"v": "x"}"#, true),
        ],
    );
    // A number past what the automaton writes cannot be excluded: refused, by name.
    let beyond = v(json!([{"type": "number", "minimum": 1e19}, {"type": "number"}]));
    let error = CompiledTools::compile(&[tool("t", beyond)]).unwrap_err().to_string();
    assert!(
        error.contains("minimum") && error.contains("cannot be excluded"),
        "{error}"
    );
    // A literal the integer automaton cannot spell still overlaps integers: run exclusively.
    check(
        v(json!([{"const": 1e20}, {"type": "integer"}])),
        &[
            (r#"{"v": 100000000000000000000}"#, false),
            (r#"{"v": 1e20}"#, false),
            (r#"{"v": 5}"#, true),
        ],
    );
}
