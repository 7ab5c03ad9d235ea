//! Nesting depth: a schema whose containers nest up to `MAX_DEPTH` deep
//! compiles and its deepest values are accepted byte by byte to the end (no
//! state without a next byte); one container deeper is refused when it
//! compiles, naming the path where it crosses the limit (issue 18: a 40-deep
//! `required` chain used to fail mid-generation with an empty mask).

use serde_json::{json, Value};
use std::sync::Arc;
use tessera_constrain::{
    CallFormat, CallMode, CompiledTools, ConstrainError, Envelope, ResponseSchema, SchemaOptions, ToolCallMatcher,
    ToolChoice, ToolDef, MAX_DEPTH,
};

fn tool(parameters: Value) -> ToolDef {
    ToolDef {
        name: "t".into(),
        description: String::new(),
        parameters,
    }
}

/// `depth` objects nested through property `a` (required or not), the innermost empty.
fn objects(depth: u32, required: bool) -> Value {
    let mut schema = json!({"type": "object", "properties": {}});
    for _ in 1..depth {
        schema = json!({"type": "object", "properties": {"a": schema}});
        if required {
            schema["required"] = json!(["a"]);
        }
    }
    schema
}

/// The value of [`objects`] with every `a` present.
fn object_value(depth: u32) -> String {
    (1..depth).fold("{}".to_string(), |inner, _| format!("{{\"a\": {inner}}}"))
}

/// An object whose required `list` is `depth - 1` arrays nested, each with at least one item.
fn arrays(depth: u32) -> Value {
    let mut items = json!({"type": "integer"});
    for _ in 1..depth {
        items = json!({"type": "array", "items": items, "minItems": 1});
    }
    json!({"type": "object", "properties": {"list": items}, "required": ["list"]})
}

fn array_value(depth: u32) -> String {
    let list = (1..depth).fold("7".to_string(), |inner, _| format!("[{inner}]"));
    format!("{{\"list\": {list}}}")
}

/// Whether a `required` call of `t` with these arguments is accepted to the end.
fn call_accepted(schema: &Value, arguments: &str) -> bool {
    let compiled = Arc::new(CompiledTools::compile(&[tool(schema.clone())]).unwrap());
    let choice = ToolChoice {
        mode: CallMode::Required,
        allowed: None,
        parallel: false,
    };
    let mut matcher = ToolCallMatcher::new(compiled, &choice, &Envelope::new(CallFormat::Hermes)).unwrap();
    let text = format!("<tool_call>\n{{\"name\": \"t\", \"arguments\": {arguments}}}\n</tool_call>");
    let text = text.strip_prefix(matcher.prefill()).unwrap_or(&text).to_string();
    matcher.advance_text(&text) && matcher.is_accepting()
}

/// Whether a `response_format` value is accepted to the end.
fn value_accepted(schema: &Value, value: &str) -> bool {
    let compiled = ResponseSchema::compile(schema, SchemaOptions::GENERATION).unwrap();
    let mut matcher = ToolCallMatcher::json_value(&compiled);
    matcher.advance_text(value) && matcher.is_accepting()
}

/// The refusal's path, or a panic naming what compiled instead.
fn refusal_path(schema: Value) -> String {
    match CompiledTools::compile(&[tool(schema)]) {
        Err(ConstrainError::InvalidSchema { path, message, .. }) => {
            assert!(message.contains(&MAX_DEPTH.to_string()), "{message}");
            path
        }
        other => panic!("a schema deeper than {MAX_DEPTH} compiled: {other:?}"),
    }
}

#[test]
fn a_forty_deep_required_chain_is_a_complete_call() {
    assert!(call_accepted(&objects(40, true), &object_value(40)));
}

#[test]
fn values_as_deep_as_the_limit_complete_and_one_deeper_is_refused_with_its_path() {
    assert!(call_accepted(&objects(MAX_DEPTH, true), &object_value(MAX_DEPTH)));
    assert!(call_accepted(&objects(MAX_DEPTH, false), &object_value(MAX_DEPTH)));
    let crossing = "/properties/a".repeat(MAX_DEPTH as usize);
    assert_eq!(refusal_path(objects(MAX_DEPTH + 1, true)), crossing);
    // Optional nesting too: a model may write the optional key, and then must go on.
    assert_eq!(refusal_path(objects(MAX_DEPTH + 6, false)), crossing);
}

#[test]
fn nested_arrays_in_a_response_format_complete_or_are_refused() {
    assert!(value_accepted(&arrays(40), &array_value(40)));
    assert!(value_accepted(&arrays(MAX_DEPTH), &array_value(MAX_DEPTH)));
    let path = refusal_path(arrays(MAX_DEPTH + 1));
    // Container 65 (the root object, then 64 arrays) is the 64th array: `list` and 63 `items` down.
    assert_eq!(
        path,
        format!("/properties/list{}", "/items".repeat(MAX_DEPTH as usize - 1))
    );
}

/// A recursive schema (`$ref` to itself) nests as deep as a value can, and no
/// deeper: at the limit the only way on is to close; a recursion with no way
/// out is refused when it compiles.
#[test]
fn recursive_schemas_close_at_the_limit_and_endless_ones_are_refused() {
    use tessera_constrain::{SchemaOptions, ValueSchema};
    let tree = json!({"type": "object", "properties": {"child": {"$ref": "#"}}, "additionalProperties": false});
    let compiled = ValueSchema::compile("tree", &tree, SchemaOptions::EXACT).unwrap();
    let nested = |depth: u32| (1..depth).fold("{}".to_string(), |inner, _| format!("{{\"child\":{inner}}}"));
    assert!(compiled.accepts(nested(MAX_DEPTH).as_bytes()));
    assert!(
        !compiled.accepts(nested(MAX_DEPTH + 1).as_bytes()),
        "past the limit the key is not offered"
    );
    let endless = json!({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]});
    let refused = ValueSchema::compile("endless", &endless, SchemaOptions::EXACT).unwrap_err();
    assert!(refused.to_string().contains("never ends"), "{refused}");
    let list = json!({"type": "array", "items": {"$ref": "#"}});
    let lists = ValueSchema::compile("lists", &list, SchemaOptions::EXACT).unwrap();
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH as usize), "]".repeat(MAX_DEPTH as usize));
    assert!(lists.accepts(deep.as_bytes()));
    let deeper = format!(
        "{}{}",
        "[".repeat(MAX_DEPTH as usize + 1),
        "]".repeat(MAX_DEPTH as usize + 1)
    );
    assert!(!lists.accepts(deeper.as_bytes()));
}
