//! Bare calls (`auto` mode, Hermes family): the model's own call forms
//! without `<tool_call>` are calls only at the reply's start (or after a bare
//! call), only with an allowed name and an arguments object; JSON in an answer
//! stays text. The automaton, the whole-text parser and the streaming parser
//! split every response the same way.

use serde_json::json;
use std::sync::Arc;
use tessera_constrain::{
    CallFormat, CallMode, CallSyntax, CompiledTools, Envelope, StreamPiece, ToolCallMatcher, ToolChoice, ToolDef,
};

fn tools() -> Arc<CompiledTools> {
    let weather = ToolDef {
        name: "get_weather".into(),
        description: "Current weather in a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}),
    };
    let time = ToolDef {
        name: "get_time".into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": {"tz": {"type": "string"}}}),
    };
    Arc::new(CompiledTools::compile(&[weather, time]).unwrap())
}

fn choice(mode: CallMode, parallel: bool) -> ToolChoice {
    ToolChoice {
        mode,
        allowed: None,
        parallel,
    }
}

#[derive(Debug, PartialEq)]
enum Outcome {
    /// Accepted; ends after a call.
    Call,
    /// Accepted; free text.
    Text,
    /// Not a valid response.
    Rejected,
}

fn run(mode: CallMode, parallel: bool, text: &str) -> Outcome {
    let envelope = Envelope::new(CallFormat::Hermes);
    let mut matcher = ToolCallMatcher::new(tools(), &choice(mode, parallel), &envelope).unwrap();
    if !matcher.advance_text(text) || !matcher.is_accepting() {
        return Outcome::Rejected;
    }
    match (matcher.after_call(), matcher.in_free_text()) {
        (true, _) => Outcome::Call,
        (false, true) => Outcome::Text,
        (false, false) => Outcome::Rejected,
    }
}

const BARE: &str = r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#;
const FENCED: &str = "```json\n{\n    \"name\": \"get_weather\",\n    \"arguments\": {\"city\": \"Tokyo\"}}\n```";

/// Answers that hold JSON, as an answer would: none of them is a call.
const JSON_ANSWERS: [&str; 6] = [
    "{\"name\": \"Bob\", \"age\": 34}",
    "```json\n{\n  \"name\": \"get_weather\",\n  \"version\": \"1.0.0\"\n}\n```",
    "Here is an example call: {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
    "```json\n{\"name\": \"get_weather\", \"arguments\": \"Paris\"}\n```",
    "{\"name\": \"get_weatherman\", \"arguments\": {}}",
    "```python\nprint({\"name\": \"get_weather\"})\n```",
];

#[test]
fn the_models_bare_and_fenced_calls_are_calls_in_auto_mode() {
    assert_eq!(run(CallMode::Auto, false, BARE), Outcome::Call);
    assert_eq!(run(CallMode::Auto, false, &format!("\n\n{BARE}")), Outcome::Call);
    assert_eq!(run(CallMode::Auto, false, FENCED), Outcome::Call);
    let two = format!("{BARE}\n{{\"name\": \"get_time\", \"arguments\": {{}}}}");
    assert_eq!(run(CallMode::Auto, true, &two), Outcome::Call);
    assert_eq!(
        run(CallMode::Auto, false, &two),
        Outcome::Rejected,
        "a second call needs parallel calls"
    );
}

#[test]
fn json_in_an_answer_stays_text() {
    for answer in JSON_ANSWERS {
        assert_eq!(run(CallMode::Auto, false, answer), Outcome::Text, "{answer:?}");
    }
    assert_eq!(
        run(CallMode::None, false, BARE),
        Outcome::Text,
        "no bare calls in `none` mode"
    );
}

#[test]
fn once_the_arguments_begin_they_are_masked() {
    let bad = [
        r#"{"name": "get_weather", "arguments": {"town": "Paris"}}"#,
        r#"{"name": "get_weather", "arguments": {}}"#,
        r#"{"name": "get_weather", "arguments": {"city": 3}}"#,
    ];
    for text in bad {
        assert_eq!(run(CallMode::Auto, false, text), Outcome::Rejected, "{text}");
    }
    assert_eq!(
        run(CallMode::Auto, false, &format!("{BARE} Done.")),
        Outcome::Rejected,
        "after a call only another call or the end"
    );
}

/// (content, [(name, canonical arguments)]) as the whole-text parser and the
/// streaming parser (in chunks of every size up to 9) read `text`.
fn parses(syntax: &CallSyntax, text: &str) -> (String, Vec<(String, String)>) {
    let whole = syntax.parse(text).unwrap();
    let expected: Vec<(String, String)> = whole
        .calls
        .iter()
        .map(|c| (c.name.clone(), c.arguments.clone()))
        .collect();
    for size in 1..=9 {
        let mut parser = syntax.stream_parser("");
        let mut pieces = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        for chunk in chars.chunks(size) {
            pieces.extend(parser.push(&chunk.iter().collect::<String>()));
        }
        pieces.extend(parser.finish());
        let (mut content, mut calls) = (String::new(), Vec::<(String, String)>::new());
        for piece in pieces {
            match piece {
                StreamPiece::Content(text) => content.push_str(&text),
                StreamPiece::CallStart { name, .. } => calls.push((name, String::new())),
                StreamPiece::Arguments { index, text } => calls[index].1.push_str(&text),
            }
        }
        let calls: Vec<(String, String)> = calls
            .into_iter()
            .map(|(name, args)| {
                (
                    name,
                    serde_json::from_str::<serde_json::Value>(&args).unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(content.trim(), whole.content, "content of {text:?} in chunks of {size}");
        assert_eq!(calls, expected, "calls of {text:?} in chunks of {size}");
    }
    (whole.content, expected)
}

#[test]
fn parsers_split_responses_as_the_automaton_does() {
    let syntax = CallSyntax::new(CallFormat::Hermes).with_bare_calls(["get_weather".into(), "get_time".into()]);
    let paris = vec![("get_weather".to_string(), r#"{"city":"Paris"}"#.to_string())];
    assert_eq!(parses(&syntax, BARE), (String::new(), paris.clone()));
    let (content, calls) = parses(&syntax, FENCED);
    assert_eq!((content.as_str(), calls[0].0.as_str()), ("", "get_weather"));
    let two = format!("{BARE}\n{{\"name\": \"get_time\", \"arguments\": {{}}}}");
    assert_eq!(parses(&syntax, &two).1.len(), 2);
    for answer in JSON_ANSWERS {
        assert_eq!(
            parses(&syntax, answer),
            (answer.trim().to_string(), vec![]),
            "{answer:?}"
        );
    }
    // Without bare calls (another mode) the same text is content.
    assert_eq!(parses(&CallSyntax::new(CallFormat::Hermes), BARE).1, vec![]);
    // The template's envelope still works alongside.
    let enveloped = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    assert_eq!(parses(&syntax, enveloped).1.len(), 1);
}

#[test]
fn a_matchers_syntax_reads_bare_calls_only_in_auto_mode() {
    let envelope = Envelope::new(CallFormat::Hermes);
    let syntax = |mode| {
        ToolCallMatcher::new(tools(), &choice(mode, false), &envelope)
            .unwrap()
            .call_syntax()
    };
    let auto = syntax(CallMode::Auto).unwrap();
    assert_eq!(auto.parse(BARE).unwrap().calls.len(), 1);
    assert_eq!(syntax(CallMode::Required).unwrap().parse(BARE).unwrap().calls.len(), 0);
    assert_eq!(syntax(CallMode::None), None);
}
