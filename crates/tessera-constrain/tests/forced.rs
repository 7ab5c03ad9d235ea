//! Grammar fast-forward: `ToolCallMatcher::forced_tokens` spells exactly the
//! bytes every continuation must start with (checked against the automaton
//! byte by byte), tokenizes them longest match first, holds back a trailing
//! token a longer one could extend, and forces nothing where the response
//! may end or branch.

use serde_json::json;
use std::sync::Arc;
use tessera_constrain::{
    CallFormat, CallMode, CompiledTools, Envelope, ToolCallMatcher, ToolChoice, ToolDef, Vocabulary,
};

pub(crate) fn vocabulary(extra: &[&str]) -> Vocabulary {
    let mut tokens: Vec<Vec<u8>> = (0..=254u8).map(|b| vec![b]).collect();
    let pieces = [
        "{\"",
        "\": \"",
        "\", \"",
        "arguments",
        "\": {\"",
        "city",
        "weather",
        "get_",
        "}}",
        "\n</tool_call>",
        "<tool_call>",
        "unit",
        "celsius",
        "fahrenheit",
    ];
    tokens.extend(pieces.iter().chain(extra).map(|p| p.as_bytes().to_vec()));
    let stop = tokens.len() as u32;
    tokens.push(vec![0xFF, b'e', b'o', b't']);
    Vocabulary::new(&tokens, &[stop])
}

pub(crate) fn tools() -> Arc<CompiledTools> {
    let weather = ToolDef {
        name: "get_weather".into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"], "additionalProperties": false}),
    };
    let time = ToolDef {
        name: "get_time".into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": {"tz": {"type": "string"}}, "additionalProperties": false}),
    };
    Arc::new(CompiledTools::compile(&[weather, time]).unwrap())
}

pub(crate) fn matcher(mode: CallMode, text: &str) -> ToolCallMatcher {
    let choice = ToolChoice {
        mode,
        allowed: None,
        parallel: false,
    };
    let mut matcher = ToolCallMatcher::new(tools(), &choice, &Envelope::new(CallFormat::Hermes)).unwrap();
    // A required call's opening is the prompt's (the prefill), not generated.
    let prefill = matcher.prefill().to_string();
    let generated = text.strip_prefix(prefill.as_str()).unwrap_or(text);
    assert!(matcher.advance_text(generated), "{text:?} is not a valid start");
    matcher
}

pub(crate) fn spelled(vocab: &Vocabulary, tokens: &[u32]) -> String {
    let bytes: Vec<u8> = tokens.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
    String::from_utf8(bytes).unwrap()
}

/// The forced text, checked: every byte of it is the only one the automaton
/// allows at its position.
fn forced(vocab: &Vocabulary, mode: CallMode, text: &str) -> String {
    let mut matcher = matcher(mode, text);
    let forced = spelled(vocab, &matcher.forced_tokens(vocab, 64));
    let mut at = text.to_string();
    for c in forced.chars() {
        let allowed: Vec<u8> = (0..=u8::MAX)
            .filter(|&b| {
                let mut probe = self::matcher(mode, &at);
                probe.advance_text(&String::from_utf8_lossy(&[b]))
            })
            .filter(|b| b.is_ascii())
            .collect();
        assert_eq!(allowed, [c as u8], "after {at:?} the automaton allows {allowed:?}");
        at.push(c);
    }
    forced
}

#[test]
fn the_call_frame_and_keys_are_forced_until_a_choice() {
    let vocab = vocabulary(&[]);
    // Both tools start with "get_"; then "w" or "t" is the model's choice.
    assert_eq!(forced(&vocab, CallMode::Auto, "<tool_call>\n{\"name\": \""), "get_");
    // A required call's prefill already holds the common "get_".
    assert_eq!(forced(&vocab, CallMode::Required, "<tool_call>\n{\"name\": \"get_"), "");
    // After the name, the frame up to the first key (either required key may come first).
    let named = "<tool_call>\n{\"name\": \"get_weather";
    for mode in [CallMode::Auto, CallMode::Required] {
        assert_eq!(forced(&vocab, mode, named), "\", \"arguments\": {\"", "{mode:?}");
    }
    // Inside an enum value once it is unambiguous, through the call's end.
    let in_enum = format!("{named}\", \"arguments\": {{\"city\": \"Paris\", \"unit\": \"f");
    for mode in [CallMode::Auto, CallMode::Required] {
        assert_eq!(
            forced(&vocab, mode, &in_enum),
            "ahrenheit\"}}\n</tool_call>",
            "{mode:?}"
        );
    }
}

#[test]
fn nothing_is_forced_where_the_response_may_end_or_branch() {
    let vocab = vocabulary(&[]);
    let mut free = matcher(CallMode::Auto, "Hello");
    assert!(free.forced_tokens(&vocab, 64).is_empty(), "free text");
    let mut in_string = matcher(
        CallMode::Required,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa",
    );
    assert!(in_string.forced_tokens(&vocab, 64).is_empty(), "inside a free string");
    let mut none = matcher(CallMode::None, "");
    assert!(none.forced_tokens(&vocab, 64).is_empty(), "mode none");
}

#[test]
fn a_trailing_token_a_longer_one_could_extend_is_held_back() {
    // `": {"city` extends the frame's last token `": {"` past the forced bytes
    // (the model may write the key in the same token): that token is held back.
    let vocab = vocabulary(&["\": {\"city"]);
    let named = "<tool_call>\n{\"name\": \"get_weather";
    assert_eq!(forced(&vocab, CallMode::Auto, named), "\", \"arguments");
    let mut m = matcher(CallMode::Auto, named);
    assert!(m.forced_tokens(&vocab, 0).is_empty(), "a zero limit drafts nothing");
    assert_eq!(m.forced_tokens(&vocab, 1).len(), 1, "the limit counts tokens");
}
