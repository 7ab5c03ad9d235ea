//! The automaton accepts exactly the valid calls: a hand-checked table of
//! arguments per schema (escapes, nesting, numbers, enums, required and
//! additional properties, array bounds, unions), plus the envelope, the name
//! trie and the modes.

use serde_json::{json, Value};
use std::sync::Arc;
use tessera_constrain::{
    AllowedTool, CallFormat, CallMode, CompiledTools, ConstrainError, Envelope, ResponseSchema, SchemaOptions,
    ToolCallMatcher, ToolChoice, ToolDef,
};

fn tool(name: &str, parameters: Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: String::new(),
        parameters,
    }
}

fn auto() -> ToolChoice {
    ToolChoice {
        mode: CallMode::Auto,
        allowed: None,
        parallel: false,
    }
}

fn hermes() -> Envelope {
    Envelope::new(CallFormat::Hermes)
}

/// Whether `text` is a complete, valid response under `choice`, in the Hermes envelope.
fn accepts(tools: &[ToolDef], choice: &ToolChoice, text: &str) -> bool {
    accepts_in(&hermes(), tools, choice, text)
}

/// Whether `text` is a complete, valid response under `choice`, in `envelope`.
fn accepts_in(envelope: &Envelope, tools: &[ToolDef], choice: &ToolChoice, text: &str) -> bool {
    let compiled = Arc::new(CompiledTools::compile(tools).unwrap());
    let mut matcher = ToolCallMatcher::new(compiled, choice, envelope).unwrap();
    let text = text.strip_prefix(matcher.prefill()).unwrap_or(text).to_string();
    matcher.advance_text(&text) && matcher.is_accepting()
}

/// `check(schema, [(arguments, valid)])`: each call of tool `t` with these arguments.
fn check(schema: Value, table: &[(&str, bool)]) {
    let tools = [tool("t", schema.clone())];
    for &(arguments, valid) in table {
        let text = format!("<tool_call>\n{{\"name\": \"t\", \"arguments\": {arguments}}}\n</tool_call>");
        assert_eq!(
            accepts(&tools, &auto(), &text),
            valid,
            "schema {schema}, arguments {arguments}"
        );
    }
}

#[test]
fn strings_and_escapes() {
    check(
        json!({"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"], "additionalProperties": false}),
        &[
            (r#"{"s": "plain"}"#, true),
            (r#"{"s":"no space"}"#, true),
            (r#"{"s": "quote \" backslash \\ slash \/ \b\f\n\r\t"}"#, true),
            (r#"{"s": "\u00e9\u20AC"}"#, true),
            (r#"{"s": "ünïcödé ✓"}"#, true),
            (r#"{"s": "\x"}"#, false),
            (r#"{"s": "\u12G4"}"#, false),
            ("{\"s\": \"raw\nnewline\"}", false),
            (r#"{"s": 1}"#, false),
            (r#"{}"#, false),
            (r#"{"s": "a", "s": "b"}"#, false),
            (r#"{"s": "a", "x": 1}"#, false),
            (r#"{"s":  "two spaces"}"#, false),
        ],
    );
}

#[test]
fn numbers_integers_booleans_null() {
    let schema = json!({"type": "object", "properties": {
        "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"}, "z": {"type": "null"}
    }, "additionalProperties": false});
    check(
        schema,
        &[
            (r#"{"i": 0}"#, true),
            (r#"{"i": -12}"#, true),
            (r#"{"i": 012}"#, false),
            (r#"{"i": 1.5}"#, false),
            (r#"{"i": -}"#, false),
            (r#"{"n": 3.25}"#, true),
            (r#"{"n": -0.5e-3}"#, true),
            (r#"{"n": 1E+9}"#, true),
            (r#"{"n": 1.}"#, false),
            (r#"{"n": .5}"#, false),
            (r#"{"n": 1e}"#, false),
            (r#"{"b": true, "z": null}"#, true),
            (r#"{"b": True}"#, false),
            (r#"{"z": nul}"#, false),
            (r#"{"i": 1, "n": 2, "b": false, "z": null}"#, true),
        ],
    );
}

#[test]
fn nesting_arrays_and_bounds() {
    let schema = json!({"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                  "required": ["x", "y"], "additionalProperties": false},
        "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
    }, "required": ["point"], "additionalProperties": false});
    check(
        schema,
        &[
            (r#"{"point": {"x": 1, "y": 2}}"#, true),
            (r#"{"point": {"y": 2, "x": 1}}"#, true),
            (r#"{"point": {"x": 1}}"#, false),
            (r#"{"tags": ["a"], "point": {"x": 1, "y": 2}}"#, true),
            (r#"{"tags": ["a", "b"], "point": {"x": 1, "y": 2}}"#, true),
            (r#"{"tags": ["a", "b", "c"], "point": {"x": 1, "y": 2}}"#, false),
            (r#"{"tags": [], "point": {"x": 1, "y": 2}}"#, false),
            (r#"{"tags": ["a",], "point": {"x": 1, "y": 2}}"#, false),
            (r#"{"matrix": [[1, 2], [], [3]], "point": {"x": 0, "y": 0}}"#, true),
            (r#"{"matrix": [[1, 2.5]], "point": {"x": 0, "y": 0}}"#, false),
            (r#"{"point": {"x": 1, "y": 2},}"#, false),
        ],
    );
}

#[test]
fn an_absent_additional_properties_closes_declared_objects_only() {
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
        &[
            (r#"{"a": 1}"#, true),
            (r#"{}"#, true),
            (r#"{"a": 1, "b": 2}"#, false),
            (r#"{"ab": 1}"#, false),
        ],
    );
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": true}),
        &[(r#"{"a": 1, "b": [null]}"#, true)],
    );
    check(
        json!({"type": "object"}),
        &[(r#"{"anything": {"goes": [1, "x"]}}"#, true), (r#"{}"#, true)],
    );
}

#[test]
fn enums_consts_unions_and_additional_properties() {
    let schema = json!({"type": "object", "properties": {
        "color": {"enum": ["red", "green", 10, 1]},
        "kind": {"const": "file"},
        "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "either": {"type": ["integer", "boolean"]},
    }, "additionalProperties": {"type": "integer"}});
    check(
        schema,
        &[
            (r#"{"color": "red"}"#, true),
            (r#"{"color": "blue"}"#, false),
            (r#"{"color": 10}"#, true),
            (r#"{"color": 1}"#, true),
            (r#"{"color": 100}"#, false),
            (r#"{"kind": "file"}"#, true),
            (r#"{"kind": "dir"}"#, false),
            (r#"{"maybe": null}"#, true),
            (r#"{"maybe": "x"}"#, true),
            (r#"{"maybe": 1}"#, false),
            (r#"{"either": 7, "other": 3}"#, true),
            (r#"{"either": true}"#, true),
            (r#"{"either": "x"}"#, false),
            (r#"{"other": "x"}"#, false),
            (r#"{"col": 1}"#, true),
        ],
    );
    // No schema keywords at all: any JSON object.
    check(
        json!({}),
        &[
            (r#"{"a": [1, {"b": null}], "c": "d"}"#, true),
            (r#"{}"#, true),
            (r#"[]"#, false),
        ],
    );
}

fn family_tools() -> Vec<ToolDef> {
    let object = json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
    ["browser_open", "browser_find", "shell_run", "file_read"]
        .iter()
        .map(|name| tool(name, object.clone()))
        .collect()
}

fn call(name: &str) -> String {
    format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {{\"q\": \"x\"}}}}\n</tool_call>")
}

#[test]
fn modes_names_and_families() {
    let tools = family_tools();
    let choice = |mode, allowed: Option<&[&str]>, parallel| ToolChoice {
        mode,
        allowed: allowed.map(|a| a.iter().map(|s| AllowedTool::parse(s)).collect()),
        parallel,
    };
    let auto = choice(CallMode::Auto, None, false);
    assert!(accepts(&tools, &auto, "Just text, no call."));
    assert!(accepts(&tools, &auto, &format!("Let me look.{}", call("shell_run"))));
    assert!(!accepts(&tools, &auto, &call("shell_exec")), "an unknown name");
    assert!(!accepts(
        &tools,
        &auto,
        &format!("{}{}", call("file_read"), call("file_read"))
    ));
    let parallel = choice(CallMode::Auto, None, true);
    assert!(accepts(
        &tools,
        &parallel,
        &format!("{}\n{}", call("file_read"), call("shell_run"))
    ));
    assert!(!accepts(
        &tools,
        &parallel,
        &format!("{}trailing text", call("file_read"))
    ));
    let none = choice(CallMode::None, None, false);
    assert!(accepts(&tools, &none, "I will not call <tool_ anything."));
    assert!(!accepts(&tools, &none, &call("file_read")));
    let required = choice(CallMode::Required, None, false);
    assert!(accepts(&tools, &required, &call("browser_find")));
    assert!(!accepts(&tools, &required, "text first"));
    let family = choice(CallMode::Required, Some(&["browser_*"]), false);
    assert!(accepts(&tools, &family, &call("browser_open")));
    assert!(!accepts(&tools, &family, &call("shell_run")));
    let compiled = Arc::new(CompiledTools::compile(&tools).unwrap());
    let matcher = ToolCallMatcher::new(compiled.clone(), &family, &hermes()).unwrap();
    assert_eq!(matcher.prefill(), "<tool_call>\n{\"name\": \"browser_");
    let listed = choice(CallMode::Required, Some(&["file_read", "shell_run"]), false);
    assert!(accepts(&tools, &listed, &call("file_read")));
    assert!(!accepts(&tools, &listed, &call("browser_open")));
    let missing = choice(CallMode::Required, Some(&["git_*"]), false);
    assert_eq!(
        ToolCallMatcher::new(compiled.clone(), &missing, &hermes()).err(),
        Some(ConstrainError::EmptyFamily("git_".into()))
    );
    let unknown = choice(CallMode::Required, Some(&["nope"]), false);
    assert_eq!(
        ToolCallMatcher::new(compiled, &unknown, &hermes()).err(),
        Some(ConstrainError::UnknownTool("nope".into()))
    );
}

#[test]
fn bad_tool_definitions_are_clear_errors() {
    let object = json!({"type": "object"});
    let compile = |tools: &[ToolDef]| CompiledTools::compile(tools).err().map(|e| e.to_string());
    assert_eq!(
        compile(&[tool("a", object.clone()), tool("a", object.clone())]),
        Some("tool name `a` is defined twice".into())
    );
    assert_eq!(
        compile(&[tool("", object.clone())]),
        Some("tools[0].name is empty".into())
    );
    assert!(compile(&[tool("has space", object.clone())])
        .unwrap()
        .contains("outside [A-Za-z0-9_.-]"));
    assert!(compile(&[tool("t", json!({"type": "strin"}))])
        .unwrap()
        .contains("unknown type `strin`"));
    assert!(compile(&[tool("t", json!({"type": "string"}))])
        .unwrap()
        .contains("must be an object schema"));
    // A required name that is not declared is any value, unless undeclared keys are forbidden.
    assert_eq!(
        compile(&[tool("t", json!({"type": "object", "required": ["x"]}))]),
        None
    );
    assert!(compile(&[tool(
        "t",
        json!({"type": "object", "required": ["x"], "additionalProperties": false})
    )])
    .unwrap()
    .contains("at /: the schema accepts no value"));
    assert!(
        compile(&[tool("t", json!({"type": "array", "minItems": 3, "maxItems": 1}))])
            .unwrap()
            .contains("accepts no value")
    );
    // Keywords the automaton cannot enforce are refused with their path, or (lenient) ignored with a warning each.
    let tools = [tool(
        "t",
        json!({"type": "object", "properties": {"s": {"type": "string", "not": {"maxLength": 3}}, "u": {"type": "string", "uniqueItems": true, "if": {}}}}),
    )];
    let refused = CompiledTools::compile(&tools).unwrap_err().to_string();
    assert!(
        refused.contains("at /properties/s/not: keyword `not` is not supported"),
        "{refused}"
    );
    let lenient = SchemaOptions {
        lenient: true,
        ..SchemaOptions::GENERATION
    };
    let compiled = CompiledTools::compile_with(&tools, lenient).unwrap();
    assert_eq!(compiled.warnings().len(), 3, "{:?}", compiled.warnings());
    assert!(
        compiled.warnings()[0].contains("/properties/s/not"),
        "{:?}",
        compiled.warnings()
    );
}

#[test]
fn a_vocabulary_without_stop_tokens_is_fine() {
    let words: Vec<Vec<u8>> = ["a", "b", "<tool_call>", "{"]
        .iter()
        .map(|w| w.as_bytes().to_vec())
        .collect();
    let vocab = tessera_constrain::Vocabulary::new(&words, &[]);
    let tools = Arc::new(CompiledTools::compile(&[tool("t", json!({}))]).unwrap());
    let mut matcher = ToolCallMatcher::new(tools, &auto(), &hermes()).unwrap();
    let mask = matcher.compute_mask(&vocab);
    assert_eq!(mask.to_vec(), vec![0, 1, 2, 3]);
}

#[test]
fn mistral_envelope_lists_calls_and_closes_the_list() {
    let tools = [tool("a", json!({})), tool("b_x", json!({"type": "object"}))];
    let mistral = Envelope::new(CallFormat::Mistral);
    let parallel = ToolChoice {
        parallel: true,
        ..auto()
    };
    let one = r#"Ok.[TOOL_CALLS][{"name": "a", "arguments": {}}]"#;
    let two = r#"[TOOL_CALLS][{"name": "a", "arguments": {"k": 1}}, {"name": "b_x", "arguments": {}}]"#;
    assert!(accepts_in(&mistral, &tools, &auto(), one));
    assert!(accepts_in(&mistral, &tools, &parallel, two));
    assert!(
        !accepts_in(&mistral, &tools, &auto(), two),
        "a second call needs parallel calls"
    );
    assert!(
        !accepts_in(&mistral, &tools, &auto(), &one[..one.len() - 1]),
        "the list must be closed"
    );
    assert!(!accepts_in(
        &mistral,
        &tools,
        &auto(),
        r#"[TOOL_CALLS][{"name": "c", "arguments": {}}]"#
    ));
    let required = ToolChoice {
        mode: CallMode::Required,
        ..auto()
    };
    let compiled = Arc::new(CompiledTools::compile(&tools).unwrap());
    let matcher = ToolCallMatcher::new(compiled, &required, &mistral).unwrap();
    assert_eq!(matcher.prefill(), "[TOOL_CALLS][{\"name\": \"");
}

#[test]
fn llama_envelope_is_one_bare_object_with_parameters() {
    let tools = [tool(
        "get",
        json!({"type": "object", "properties": {"id": {"type": "integer"}}}),
    )];
    let llama = Envelope::new(CallFormat::Llama3Json);
    assert!(accepts_in(
        &llama,
        &tools,
        &auto(),
        r#"{"name": "get", "parameters": {"id": 4}}"#
    ));
    assert!(!accepts_in(
        &llama,
        &tools,
        &auto(),
        r#"{"name": "get", "arguments": {"id": 4}}"#
    ));
    assert!(!accepts_in(
        &llama,
        &tools,
        &auto(),
        r#"{"name": "get", "parameters": {"id": "4"}}"#
    ));
    let parallel = ToolChoice {
        parallel: true,
        ..auto()
    };
    let twice = r#"{"name": "get", "parameters": {}}{"name": "get", "parameters": {}}"#;
    assert!(!accepts_in(&llama, &tools, &parallel, twice), "the form holds one call");
    assert!(accepts_in(&llama, &tools, &auto(), "Plain text {with braces}."));
}

#[test]
fn an_opener_that_is_a_special_token_is_read_as_that_token() {
    let mut words: Vec<Vec<u8>> = [
        "a",
        "[",
        "TOOL",
        "_CALLS",
        "]",
        "[{\"name\": \"",
        "t",
        "\", \"arguments\": {}}]",
    ]
    .iter()
    .map(|w| w.as_bytes().to_vec())
    .collect();
    words.push([&[tessera_constrain::SPECIAL_TOKEN_MARKER], &b"[TOOL_CALLS]"[..]].concat());
    let special = words.len() as u32 - 1;
    let vocab = tessera_constrain::Vocabulary::new(&words, &[]);
    let envelope = Envelope::for_vocabulary(CallFormat::Mistral, &vocab);
    let tools = Arc::new(CompiledTools::compile(&[tool("t", json!({}))]).unwrap());
    let mut matcher = ToolCallMatcher::new(tools.clone(), &auto(), &envelope).unwrap();
    assert!(matcher.compute_mask(&vocab).is_allowed(special));
    matcher.accept_token(&vocab, special).unwrap();
    for token in [5, 6, 7] {
        assert!(matcher.compute_mask(&vocab).is_allowed(token), "token {token}");
        matcher.accept_token(&vocab, token).unwrap();
    }
    assert!(matcher.is_accepting() && matcher.after_call());
    // Spelled as text, the opener is plain text here.
    let mut spelled = ToolCallMatcher::new(tools, &auto(), &envelope).unwrap();
    assert!(spelled.advance_text("[TOOL_CALLS]"));
    assert!(spelled.advance_text("[{\"name\": \"zzz"), "still free text");
}

#[test]
fn a_json_value_response_is_exactly_one_value_of_the_schema() {
    let schema = ResponseSchema::compile(
        &json!({"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}, "required": ["city"], "additionalProperties": false}),
        SchemaOptions::GENERATION,
    )
    .unwrap();
    let accepts = |text: &str| {
        let mut matcher = ToolCallMatcher::json_value(&schema);
        assert!(matcher.is_json_value() && matcher.prefill().is_empty());
        matcher.advance_text(text) && matcher.is_accepting()
    };
    assert!(accepts(r#"{"city": "Oslo", "n": 3}"#));
    assert!(accepts(r#"{"city":"Oslo"}"#));
    assert!(!accepts(r#"{"n": 3}"#), "city is required");
    assert!(!accepts(r#"Here: {"city": "Oslo"}"#), "no text around the value");
    assert!(!accepts(r#"{"city": "Oslo"} and more"#));
    assert!(!accepts(r#"{"city": "Os"#), "unfinished");
    let not_an_object = ResponseSchema::compile(&json!({"type": "string"}), SchemaOptions::GENERATION).unwrap_err();
    assert_eq!(
        not_an_object.to_string(),
        "invalid response schema at /: must be an object schema",
        "a response format is not named as a tool"
    );
}

#[test]
fn the_reported_bounds_and_patterns_hold() {
    // The values that went through before: past a maximum, against a pattern.
    check(
        json!({"type": "object", "properties": {"timeout_seconds": {"type": "integer", "maximum": 3600}, "max_results": {"type": "integer", "minimum": 1, "maximum": 500}}}),
        &[
            (r#"{"timeout_seconds": 3600}"#, true),
            (r#"{"timeout_seconds": 1000000}"#, false),
            (r#"{"max_results": 500}"#, true),
            (r#"{"max_results": 1000}"#, false),
            (r#"{"max_results": 0}"#, false),
        ],
    );
    check(
        json!({"type": "object", "properties": {"due": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}}, "required": ["due"]}),
        &[
            (r#"{"due": "2026-12-01"}"#, true),
            (r#"{"due": "todos"}"#, false),
            (r#"{"due": "2026-12-01x"}"#, false),
            (r#"{"due": "\u0032026-12-01"}"#, false),
        ],
    );
}

#[test]
fn formats_are_asserted_and_unknown_ones_refused() {
    check(
        json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"}, "n": {"type": "integer", "format": "int32"}}}),
        &[
            (r#"{"at": "2026-02-28T23:59:60+01:00"}"#, false),
            (r#"{"at": "2026-02-28T23:59:60-00:00"}"#, true),
            (r#"{"at": "2026-12-31T15:59:60-08:00"}"#, true),
            (r#"{"at": "2026-02-29T00:00:00Z"}"#, false),
            (r#"{"id": "2eb8aa08-aa98-11ea-b4aa-73b441d16380"}"#, true),
            (r#"{"id": "2eb8aa08"}"#, false),
            (r#"{"n": 2147483647}"#, true),
            (r#"{"n": 2147483648}"#, false),
        ],
    );
    let unknown = [tool(
        "t",
        json!({"type": "object", "properties": {"d": {"type": "string", "format": "duration"}}}),
    )];
    let error = CompiledTools::compile(&unknown).unwrap_err().to_string();
    assert!(error.contains("/properties/d/format"), "{error}");
}

#[test]
fn key_patterns_and_property_names_shape_the_keys() {
    check(
        json!({"type": "object", "properties": {"id": {"type": "integer"}}, "patternProperties": {"^x-": {"type": "string"}, "count$": {"type": "integer"}}, "propertyNames": {"maxLength": 8}, "additionalProperties": false}),
        &[
            (r#"{"id": 1, "x-a": "s", "a_count": 2}"#, true),
            (r#"{"x-count": 2}"#, false),
            (r#"{"x-a": 1}"#, false),
            (r#"{"other": 1}"#, false),
            (r#"{"x-toolong": "s"}"#, false),
        ],
    );
}

/// Where a response stands, as drafting reads it: free text is in no call,
/// the envelope and the arguments are, a string inside the arguments is a
/// JSON string, and a closed call is out of it again.
#[test]
fn a_response_says_whether_it_is_inside_a_call_or_a_string() {
    let tools = [tool(
        "t",
        json!({"type": "object", "properties": {"s": {"type": "string"}}}),
    )];
    let compiled = Arc::new(CompiledTools::compile(&tools).unwrap());
    let mut matcher = ToolCallMatcher::new(compiled, &auto(), &hermes()).unwrap();
    let steps = [
        ("Sure. ", false, false),
        ("<tool_call>\n{\"name\": \"", true, false),
        ("t\", \"arguments\": {\"s\": \"a", true, true),
        ("b\"", true, false),
        ("}}\n</tool_call>", false, false),
    ];
    for (text, in_call, in_string) in steps {
        assert!(matcher.advance_text(text), "{text:?}");
        assert_eq!(
            (matcher.in_call(), matcher.in_json_string()),
            (in_call, in_string),
            "after {text:?}"
        );
    }
    assert!(matcher.after_call());
}
