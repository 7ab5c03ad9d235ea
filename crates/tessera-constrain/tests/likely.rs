//! Drafts from the constraint: `ToolCallMatcher::grammar_draft` spells the
//! forced bytes and, past them, a call's likely punctuation (JSON whitespace
//! as the response wrote it after the same separator, one space before it
//! showed). Every draft is a text the automaton allows, its forced count
//! agrees with `forced_tokens`, and nothing is drafted in free text or
//! inside a free string.

use super::forced::{matcher, spelled, vocabulary as forced_vocabulary};
use tessera_constrain::{CallMode, Vocabulary};

/// `forced.rs`'s vocabulary with a compact key separator and `name`.
fn vocabulary() -> Vocabulary {
    forced_vocabulary(&["\":\"", "name"])
}

/// The drafted text after `text`, checked: the automaton allows it there.
fn drafted(vocab: &Vocabulary, mode: CallMode, text: &str) -> String {
    let mut matcher = matcher(mode, text);
    let draft = matcher.grammar_draft(vocab, 64);
    let spelled = spelled(vocab, &draft.tokens);
    assert!(
        matcher.advance_text(&spelled),
        "after {text:?} the draft {spelled:?} is not allowed"
    );
    spelled
}

#[test]
fn a_bare_calls_frame_is_drafted_with_the_responses_own_spacing() {
    let vocab = vocabulary();
    // A bare call's head is free text until its arguments open: nothing is
    // forced there, but the frame is the likely continuation.
    let named = "{\"name\": \"get_weather";
    assert_eq!(drafted(&vocab, CallMode::Auto, named), "\", \"arguments\": {\"");
    // A compact colon in the head is kept in the head; the comma, not seen
    // yet, takes one space.
    let compact = "{\"name\":\"get_weather";
    assert_eq!(drafted(&vocab, CallMode::Auto, compact), "\", \"arguments\":{\"");
    // In the arguments the style is learned apart: compact after a key here,
    // then the next key's separator as written after the first value.
    let args = "{\"name\": \"get_weather\", \"arguments\": {\"unit\":\"celsius\", \"city";
    assert_eq!(drafted(&vocab, CallMode::Auto, args), "\":\"");
    let spaced = "{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\",\"city";
    assert_eq!(drafted(&vocab, CallMode::Auto, spaced), "\": \"");
    // After the first value, the only key left: the arguments' first comma
    // takes one space (the head's is not their style), the colon as learned.
    let first = "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"";
    assert_eq!(drafted(&vocab, CallMode::Auto, first), ", \"unit\":\"");
}

#[test]
fn forced_tokens_lead_the_draft_and_are_counted() {
    let vocab = vocabulary();
    // The Hermes envelope's frame is fixed: the draft is the forced run.
    let named = "<tool_call>\n{\"name\": \"get_weather";
    let mut forced = matcher(CallMode::Auto, named);
    let expected = forced.forced_tokens(&vocab, 64);
    let draft = matcher(CallMode::Auto, named).grammar_draft(&vocab, 64);
    assert_eq!((draft.forced_count(), &draft.tokens), (expected.len(), &expected));
    // Past the forced run, likely punctuation follows and is not counted.
    let key = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\"";
    let draft = matcher(CallMode::Auto, key).grammar_draft(&vocab, 64);
    assert_eq!(spelled(&vocab, &draft.tokens), ", \"city\": \"");
    // `,` ` ` `"` `city` `": "`: the spaces are choices, and a token with one is not forced.
    assert_eq!(draft.forced, [true, false, true, true, false]);
    // The limit caps the tokens and the count with them.
    let capped = matcher(CallMode::Auto, named).grammar_draft(&vocab, 1);
    assert_eq!((capped.tokens.len(), capped.forced), (1, vec![true]));
}

#[test]
fn nothing_is_drafted_in_free_text_a_free_string_or_at_a_choice() {
    let vocab = vocabulary();
    for (mode, text) in [
        (CallMode::Auto, "Hello"),
        (
            CallMode::Auto,
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa",
        ),
        (CallMode::Auto, "<tool_call>\n{\"name\": \"get_"),
        (CallMode::None, ""),
    ] {
        let draft = matcher(mode, text).grammar_draft(&vocab, 64);
        assert!(
            draft.tokens.is_empty(),
            "{text:?} drafted {:?}",
            spelled(&vocab, &draft.tokens)
        );
    }
}

#[test]
fn every_draft_along_a_call_is_allowed() {
    let vocab = vocabulary();
    let call = "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\", \"unit\":\"fahrenheit\"}}";
    for end in 0..=call.len() {
        drafted(&vocab, CallMode::Auto, &call[..end]);
        drafted(&vocab, CallMode::Auto, &format!("<tool_call>\n{}", &call[..end]));
    }
}

/// A bare call with both arguments written, its objects still open.
const ARGUMENTS: &str = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"";

/// Token ids spelling `text`: bytes 0-254 are tokens of their own, by value.
fn ids(text: &str) -> Vec<u32> {
    text.bytes().map(u32::from).collect()
}

#[test]
fn a_draft_is_cut_at_its_first_forbidden_token() {
    let vocab = vocabulary();
    let mut matcher = matcher(CallMode::Auto, ARGUMENTS);
    // `}}` closes the bare call; an `x` after it is neither a call nor the end.
    let draft = ids("}}x");
    assert_eq!(matcher.allowed_prefix(&vocab, &draft), 2);
    // The matcher is left where it was: the same draft gives the same answer.
    assert_eq!(matcher.allowed_prefix(&vocab, &draft), 2);
    // A key the schema does not declare is forbidden at once.
    let mut open = self::matcher(CallMode::Auto, "{\"name\": \"get_weather\", \"arguments\": {\"");
    assert_eq!(open.allowed_prefix(&vocab, &ids("city\": \"Rome")), 12);
    assert_eq!(open.allowed_prefix(&vocab, &ids("zone\"")), 0);
}

#[test]
fn a_draft_that_completes_a_call_is_cut_at_its_end() {
    let vocab = vocabulary();
    let mut bare = matcher(CallMode::Auto, ARGUMENTS);
    // A bare call ends at its last `}`: the whitespace after it is cut, and
    // the bytes up to it are tokenized again (`}}` is one token).
    let cut = bare.draft_to_call_end(&vocab, &ids("}}\n\n"), 8).unwrap();
    assert_eq!(spelled(&vocab, &cut), "}}");
    assert_eq!(cut.len(), 1);
    // No room left for end of turn after the cut, or no call completed: nothing.
    assert!(bare.draft_to_call_end(&vocab, &ids("}}"), 1).is_none());
    assert!(bare.draft_to_call_end(&vocab, &ids("}"), 8).is_none());
    // A Hermes call ends after its closer.
    let mut hermes = matcher(CallMode::Auto, &format!("<tool_call>\n{ARGUMENTS}"));
    let cut = hermes
        .draft_to_call_end(&vocab, &ids("}}\n</tool_call>\n"), 16)
        .unwrap();
    assert_eq!(spelled(&vocab, &cut), "}}\n</tool_call>");
    // Once a call is complete there is nothing to cut.
    let mut done = matcher(CallMode::Auto, &format!("{ARGUMENTS}}}}}"));
    assert!(done.draft_to_call_end(&vocab, &ids("\n"), 8).is_none());
}
