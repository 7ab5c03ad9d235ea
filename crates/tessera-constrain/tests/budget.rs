//! Budget-aware closing and the empty-mask property, driven by random
//! schemas (a generator over the keywords the compiler enforces) and random
//! token choices on a byte-level vocabulary with multi-byte pieces: at every
//! step the mask is non-empty, and whatever the budget (from the fewest
//! tokens a call needs up), the forced call the walk writes is complete. Each
//! mask is also checked against the automaton token by token (never wider).

use serde_json::{json, Value};
use std::sync::Arc;
use tessera_constrain::{
    CallFormat, CallMode, CompiledTools, Envelope, SchemaOptions, ToolCallMatcher, ToolChoice, ToolDef, ValueSchema,
    Vocabulary,
};

/// Every byte but 0xFF, common multi-byte pieces, and an end-of-turn token.
fn vocabulary() -> (Vocabulary, u32) {
    let mut tokens: Vec<Vec<u8>> = (0..=254u8).map(|b| vec![b]).collect();
    let pieces = [
        "{\"",
        "\":",
        "\": ",
        "\",",
        "\"}",
        "}}",
        "]}",
        "\"]",
        "[\"",
        "true",
        "false",
        "null",
        "<tool_call>",
        "</tool_call>",
        "\n</tool_call>",
        "{\"name\": \"",
        "\"arguments\": ",
        "name",
        "value",
        "2026",
        "-12-",
        "T10:",
        "00:00Z",
        "123",
        "0.5",
        "aaaa",
        "abc",
        "@example.com",
        "http://",
        "é",
        "😀",
        "\\n",
        "\\u00",
        "x-",
        "item",
        "000",
    ];
    tokens.extend(pieces.iter().map(|p| p.as_bytes().to_vec()));
    let stop = tokens.len() as u32;
    tokens.push(vec![0xFF, b'e', b'o', b't']);
    (Vocabulary::new(&tokens, &[stop]), stop)
}

/// xorshift, seeded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const PATTERNS: [&str; 5] = ["^[a-z]{2,5}$", "^[0-9]{4}-[0-9]{2}$", "x", "^(ab)+$", "^.{0,3}$"];
const FORMATS: [&str; 5] = ["date-time", "email", "uuid", "ipv4", "hostname"];

/// A random schema over the enforced keywords, `depth` levels at most.
fn schema(rng: &mut Rng, depth: u32) -> Value {
    let leaf = depth == 0 || rng.chance(40);
    match if leaf { rng.below(6) } else { 6 + rng.below(5) } {
        0 => {
            let mut s = json!({"type": "string"});
            if rng.chance(50) {
                s["minLength"] = json!(rng.below(4));
            }
            if rng.chance(40) {
                s["maxLength"] = json!(4 + rng.below(8));
            }
            if rng.chance(40) {
                s["pattern"] = json!(PATTERNS[rng.below(PATTERNS.len())]);
            } else if rng.chance(30) {
                s["format"] = json!(FORMATS[rng.below(FORMATS.len())]);
            }
            s
        }
        1 => {
            let mut s = json!({"type": if rng.chance(50) { "integer" } else { "number" }});
            if rng.chance(50) {
                s["minimum"] = json!(rng.below(50) as i64 - 20);
            }
            if rng.chance(50) {
                s["maximum"] = json!(30 + rng.below(5000));
            }
            if rng.chance(30) {
                s["multipleOf"] = [json!(2), json!(5), json!(0.5)][rng.below(3)].clone();
            }
            s
        }
        2 => {
            let values = [json!("red"), json!(7), json!(null), json!({"k": [1]})];
            json!({"enum": values[..1 + rng.below(4)]})
        }
        3 => {
            let values = [json!("fixed"), json!(42), json!(true)];
            json!({"const": values[rng.below(3)]})
        }
        4 => json!({"type": if rng.chance(50) { "boolean" } else { "null" }}),
        5 => json!({}),
        6 | 7 => object(rng, depth),
        8 => {
            let mut s = json!({"type": "array", "items": schema(rng, depth - 1)});
            if rng.chance(50) {
                s["minItems"] = json!(rng.below(3));
            }
            if rng.chance(50) {
                s["maxItems"] = json!(3 + rng.below(3));
            }
            if rng.chance(30) {
                s["prefixItems"] = json!([schema(rng, depth - 1)]);
            }
            s
        }
        9 => {
            // Overlapping `oneOf`s run as exclusive threads; disjoint ones as unions.
            let keyword = if rng.chance(50) { "anyOf" } else { "oneOf" };
            json!({keyword: [schema(rng, depth - 1), schema(rng, depth - 1)]})
        }
        _ => json!({"allOf": [{"type": "object", "properties": {"a": schema(rng, depth - 1)}}, {"required": ["a"]}]}),
    }
}

fn object(rng: &mut Rng, depth: u32) -> Value {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for i in 0..1 + rng.below(4) {
        let name = ["id", "title", "due", "tags", "x-extra", "long_property_name"][i + rng.below(2)];
        properties.insert(name.to_string(), schema(rng, depth - 1));
        if rng.chance(50) {
            required.push(name);
        }
    }
    let mut s = json!({"type": "object", "properties": properties, "required": required});
    match rng.below(4) {
        0 => s["additionalProperties"] = json!(false),
        1 => s["additionalProperties"] = schema(rng, 0),
        2 => s["patternProperties"] = json!({"^x-": {"type": "integer"}}),
        _ => {}
    }
    if rng.chance(20) {
        s["minProperties"] = json!(1 + rng.below(2));
    }
    if rng.chance(20) {
        s["maxProperties"] = json!(2 + rng.below(3));
    }
    if rng.chance(15) {
        s["propertyNames"] = json!({"maxLength": 18});
    }
    s
}

fn required(name: &str) -> ToolChoice {
    ToolChoice {
        mode: CallMode::Required,
        allowed: Some(vec![tessera_constrain::AllowedTool::Name(name.to_string())]),
        parallel: false,
    }
}

/// Tool `t` with these parameters, compiled.
fn compiled(parameters: Value) -> Arc<CompiledTools> {
    let tool = ToolDef {
        name: "t".into(),
        description: String::new(),
        parameters,
    };
    Arc::new(CompiledTools::compile(&[tool]).unwrap())
}

/// One random walk under `budget` tokens; returns the text its tokens wrote.
fn walk(
    tools: &Arc<CompiledTools>,
    vocab: &Vocabulary,
    stop: u32,
    budget: usize,
    rng: &mut Rng,
) -> Result<String, String> {
    let envelope = Envelope::new(CallFormat::Hermes);
    let mut matcher = ToolCallMatcher::new(tools.clone(), &required("t"), &envelope).map_err(|e| e.to_string())?;
    let mut text = Vec::new();
    for used in 0..budget {
        let mask = matcher.compute_mask_within(vocab, budget - used);
        let allowed = mask.to_vec();
        if allowed.is_empty() {
            return Err(format!("empty mask after {used} tokens: {matcher:?}"));
        }
        // Never wider than the automaton: each token allowed must be one its bytes can take.
        if let Some(&wrong) = allowed.iter().find(|&&t| !matcher.allows_token(vocab, t)) {
            return Err(format!(
                "token {wrong} is in the mask but not allowed after {used} tokens"
            ));
        }
        // Favour the end of turn where allowed, so walks also end before the budget.
        let token = match mask.is_allowed(stop) && rng.chance(30) {
            true => stop,
            false => allowed[rng.below(allowed.len())],
        };
        if token != stop {
            text.extend_from_slice(vocab.token_bytes(token));
        }
        matcher.accept_token(vocab, token).map_err(|e| e.to_string())?;
        if matcher.is_finished() {
            break;
        }
    }
    match matcher.is_accepting() {
        true => Ok(String::from_utf8_lossy(&text).into_owned()),
        false => Err(format!("the budget of {budget} ended inside the call")),
    }
}

#[test]
fn random_schemas_never_empty_the_mask_and_every_budget_ends_complete() {
    let (vocab, stop) = vocabulary();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut compiled, mut walks) = (0, 0);
    for round in 0..60 {
        let parameters = object(&mut rng, 3);
        let tool = ToolDef {
            name: "t".into(),
            description: String::new(),
            parameters: parameters.clone(),
        };
        let Ok(tools) = CompiledTools::compile(&[tool]) else {
            continue;
        };
        compiled += 1;
        let tools = Arc::new(tools);
        let envelope = Envelope::new(CallFormat::Hermes);
        let mut matcher = ToolCallMatcher::new(tools.clone(), &required("t"), &envelope).unwrap();
        let least = matcher
            .tokens_to_complete(&vocab)
            .unwrap_or_else(|| panic!("round {round}: no completion for {parameters}"));
        for budget in [least, least + 1, least + 3, least + 10, least + 40, 400] {
            walks += 1;
            if let Err(failure) = walk(&tools, &vocab, stop, budget, &mut rng) {
                panic!("round {round}, budget {budget} (least {least}): {failure}\nschema {parameters}");
            }
        }
    }
    assert!(compiled >= 40, "only {compiled} of 60 random schemas compiled");
    assert!(walks >= 240);
}

#[test]
fn the_plan_is_the_fewest_tokens_found_and_a_tight_budget_writes_it() {
    let (vocab, stop) = vocabulary();
    let tool = ToolDef {
        name: "t".into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": {"due": {"type": "string", "format": "date"}, "n": {"type": "integer", "minimum": 100}}, "required": ["due", "n"]}),
    };
    let tools = Arc::new(CompiledTools::compile(&[tool]).unwrap());
    let envelope = Envelope::new(CallFormat::Hermes);
    let mut matcher = ToolCallMatcher::new(tools.clone(), &required("t"), &envelope).unwrap();
    let least = matcher.tokens_to_complete(&vocab).unwrap();
    // With exactly that many tokens, every step keeps to a completion of the rest.
    let mut written = Vec::new();
    for used in 0..least {
        let mask = matcher.compute_mask_within(&vocab, least - used);
        assert!(mask.count() >= 1, "step {used}");
        assert!(!mask.is_allowed(stop), "step {used}: the call is not complete yet");
        let token = mask.to_vec()[0];
        written.extend_from_slice(vocab.token_bytes(token));
        matcher.accept_token(&vocab, token).unwrap();
    }
    assert!(matcher.is_accepting());
    let text = String::from_utf8(written).unwrap();
    let arguments = text
        .split_once("\"arguments\": ")
        .and_then(|(_, rest)| rest.strip_suffix("}\n</tool_call>"))
        .unwrap_or_else(|| panic!("not a complete call: {text}"));
    let value: Value = serde_json::from_str(arguments).unwrap();
    assert!(value["n"].as_i64().is_some_and(|n| n >= 100), "{text}");
    assert_eq!(value["due"].as_str().map(str::len), Some(10), "{text}");
}

/// A former failure: a required object whose shortest value needs a
/// searched key (`minProperties` past its declared ones) had no completion
/// from the enclosing object's keys, and the mask emptied under a budget.
#[test]
fn a_required_value_whose_keys_must_be_searched_still_completes() {
    let (vocab, stop) = vocabulary();
    let parameters = json!({"type": "object", "required": ["tags"], "properties": {
        "tags": {"type": "object", "required": ["tags"], "maxProperties": 3,
                 "patternProperties": {"^x-": {"type": "integer"}}, "propertyNames": {"maxLength": 18},
                 "properties": {"tags": {"type": "object", "required": ["title"], "minProperties": 2,
                                         "properties": {"title": {"enum": ["red", 7]}},
                                         "additionalProperties": {"enum": ["red", 7, null]}}}}}});
    let tools = compiled(parameters);
    let envelope = Envelope::new(CallFormat::Hermes);
    let mut matcher = ToolCallMatcher::new(tools.clone(), &required("t"), &envelope).unwrap();
    let least = matcher.tokens_to_complete(&vocab).expect("a completion from the start");
    for seed in 1..60u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        for budget in [least, least + 1, least + 6, least + 30] {
            if let Err(failure) = walk(&tools, &vocab, stop, budget, &mut rng) {
                panic!("seed {seed}, budget {budget}: {failure}");
            }
        }
    }
}

/// Alternatives that overlap (some value matches both).
fn overlapping_alternatives() -> Vec<[Value; 2]> {
    vec![
        [json!({"type": "integer"}), json!({"type": "number", "minimum": 2})],
        [
            json!({"type": "string", "maxLength": 4}),
            json!({"type": "string", "minLength": 2}),
        ],
        [
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]}),
            json!({"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"], "additionalProperties": true}),
        ],
        [json!({"type": "number"}), json!({})],
        [
            json!({"enum": ["red", 7, null]}),
            json!({"type": ["string", "integer"]}),
        ],
        [
            json!({"type": "array", "items": {"type": "integer"}}),
            json!({"type": "array", "maxItems": 2}),
        ],
        [
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            json!({"type": "string", "maxLength": 3}),
        ],
        [
            json!({"type": "number", "multipleOf": 0.5}),
            json!({"type": "integer", "maximum": 10}),
        ],
        [
            json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}),
            json!({"type": "number", "maximum": 5}),
        ],
    ]
}

/// The arguments of the one call in `text` (the Hermes envelope, from
/// wherever the walk's tokens began), as written.
fn call_arguments(text: &str) -> &str {
    let key = "\"arguments\":";
    let start = text.find(key).unwrap_or_else(|| panic!("no arguments in {text:?}")) + key.len();
    let rest = text[start..].trim_start();
    let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    match values.next() {
        Some(Ok(_)) => &rest[..values.byte_offset()],
        _ => panic!("no arguments in {text:?}"),
    }
}

#[test]
fn overlapping_one_of_writes_values_exactly_one_alternative_accepts() {
    let (vocab, stop) = vocabulary();
    let mut rng = Rng(0x0e0f_1a2b_3c4d_5e6f);
    for alternatives in overlapping_alternatives() {
        let parameters = json!({"type": "object", "properties": {"v": {"oneOf": alternatives}}, "required": ["v"]});
        let tool = ToolDef {
            name: "t".into(),
            description: String::new(),
            parameters: parameters.clone(),
        };
        let tools = Arc::new(CompiledTools::compile(&[tool]).unwrap_or_else(|e| panic!("{parameters}: {e}")));
        // Each alternative alone, read as JSON Schema reads it (its automaton is exact, by the
        // suite), judges the arguments as written.
        let judges: Vec<ValueSchema> = alternatives
            .iter()
            .map(|alternative| {
                let alone = json!({"type": "object", "properties": {"v": alternative}, "required": ["v"]});
                ValueSchema::compile("alt", &alone, SchemaOptions::EXACT).unwrap()
            })
            .collect();
        for budget in [20, 30, 60, 120] {
            for _ in 0..8 {
                let text = walk(&tools, &vocab, stop, budget, &mut rng)
                    .unwrap_or_else(|failure| panic!("{parameters}, budget {budget}: {failure}"));
                let arguments = call_arguments(&text);
                let matching = judges
                    .iter()
                    .filter(|judge| judge.accepts(arguments.as_bytes()))
                    .count();
                assert_eq!(
                    matching, 1,
                    "{parameters}: `{arguments}` matches {matching} alternatives"
                );
            }
        }
    }
}

/// A former dead end (review): an overlapping `oneOf` whose only values that
/// one alternative alone accepts nest deeper than either alternative's own
/// shortest value, reached near the depth limit through a recursion. The
/// object at depth 63 must not be opened where the `oneOf` could not close.
#[test]
fn a_one_of_near_the_depth_limit_keeps_a_way_out() {
    let (vocab, stop) = vocabulary();
    let arrays = json!({"oneOf": [
        {"type": "array", "items": {"type": "array"}},
        {"type": "array", "items": {"type": "array", "maxItems": 0}}
    ]});
    let parameters =
        json!({"type": "object", "required": ["x"], "properties": {"x": {"anyOf": [{"$ref": "#"}, arrays]}}});
    let tools = compiled(parameters);
    let envelope = Envelope::new(CallFormat::Hermes);
    let mut opened = 0;
    for depth in 55..=64 {
        let mut matcher = ToolCallMatcher::new(tools.clone(), &required("t"), &envelope).unwrap();
        // The prefill ends inside the only tool's name.
        let text = format!("\", \"arguments\": {}", "{\"x\": ".repeat(depth));
        if !matcher.advance_text(&text) {
            continue; // a depth the automaton does not open is fine; one it opens must complete
        }
        opened += 1;
        let mask = matcher.compute_mask(&vocab).to_vec();
        assert!(!mask.is_empty() && !mask.contains(&stop), "depth {depth}: {mask:?}");
        assert!(
            matcher.tokens_to_complete(&vocab).is_some(),
            "no completion at depth {depth}"
        );
    }
    assert!(opened >= 5, "only {opened} depths opened");
}
