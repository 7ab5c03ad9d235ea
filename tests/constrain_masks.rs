//! Mask exactness on the real 49,152-token vocabulary: in every state along
//! valid calls (and random detours the mask allows), the trie-walk mask equals
//! a brute-force check of every token's bytes against the automaton.

use serde_json::json;
use std::sync::Arc;
use tessera_constrain::{
    CallFormat, CallMode, CompiledTools, Envelope, TokenMask, ToolCallMatcher, ToolChoice, ToolDef, Vocabulary,
};

fn vocabulary() -> Vocabulary {
    let tokenizer = &crate::common::model().tokenizer;
    Vocabulary::new(&tokenizer.token_bytes(), tokenizer.stop_ids())
}

fn tools() -> Arc<CompiledTools> {
    let def = |name: &str, parameters| ToolDef {
        name: name.into(),
        description: String::new(),
        parameters,
    };
    let tools = vec![
        def(
            "browser_open",
            json!({"type": "object", "properties": {"url": {"type": "string"}, "new_tab": {"type": "boolean"}}, "required": ["url"], "additionalProperties": false}),
        ),
        def(
            "browser_find",
            json!({"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"], "additionalProperties": true}),
        ),
        def(
            "shell_run",
            json!({"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}, "env": {"type": "array", "items": {"type": "string"}, "maxItems": 3}}, "required": ["command"], "additionalProperties": false}),
        ),
        def(
            "file_write",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "mode": {"enum": ["create", "append"]}, "meta": {"type": "object", "properties": {"tags": {"type": "array"}}}}, "required": ["path", "mode"], "additionalProperties": false}),
        ),
        def(
            "calendar_add",
            json!({"type": "object", "properties": {
                "due": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                "at": {"type": "string", "format": "date-time"},
                "title": {"type": "string", "minLength": 1, "maxLength": 40, "pattern": "^[A-Z]"},
                "labels": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "propertyNames": {"maxLength": 8}, "additionalProperties": {"type": "integer"}},
                "email": {"type": "string", "format": "email"}
            }, "required": ["due", "title"], "additionalProperties": false}),
        ),
    ];
    Arc::new(CompiledTools::compile(&tools).unwrap())
}

/// The trie-walk mask against every token's bytes, one by one.
fn mismatches(matcher: &mut ToolCallMatcher, vocab: &Vocabulary, mask: &TokenMask) -> Vec<u32> {
    (0..vocab.len() as u32)
        .filter(|&token| mask.is_allowed(token) != matcher.allows_token(vocab, token))
        .collect()
}

/// xorshift, seeded.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn hermes() -> Envelope {
    Envelope::new(CallFormat::Hermes)
}

/// [`walk_in`] the Hermes envelope (SmolLM2's).
fn walk(choice: ToolChoice, text: &str, seed: u64) -> usize {
    walk_in(&hermes(), choice, text, seed)
}

/// Follow `text` token by token (its own tokenization), checking the mask in every
/// state; every fifth step, check a random allowed detour's next state too.
fn walk_in(envelope: &Envelope, choice: ToolChoice, text: &str, seed: u64) -> usize {
    let vocab = vocabulary();
    let tokenizer = &crate::common::model().tokenizer;
    let mut matcher = ToolCallMatcher::new(tools(), &choice, envelope).unwrap();
    let body = text
        .strip_prefix(matcher.prefill())
        .expect("the text starts with the prefill");
    let mut rng = seed | 1;
    let mut checked = 0;
    let tokens = tokenizer.encode(body).unwrap();
    for (step, &token) in tokens.iter().enumerate() {
        let mask = matcher.compute_mask_uncached(&vocab);
        assert_eq!(
            mismatches(&mut matcher, &vocab, &mask),
            Vec::<u32>::new(),
            "step {step} of {text:?}"
        );
        assert_eq!(matcher.compute_mask(&vocab).to_vec(), mask.to_vec(), "the cached mask");
        assert!(
            mask.is_allowed(token),
            "step {step}: the valid text's token {token} is masked"
        );
        checked += 1;
        if step % 5 == 4 {
            let allowed = mask.to_vec();
            let detour = allowed[(next(&mut rng) % allowed.len() as u64) as usize];
            // Re-derive the same state, then take the detour and check its mask.
            let mut side = ToolCallMatcher::new(tools(), &choice, envelope).unwrap();
            for &t in &tokens[..step] {
                side.accept_token(&vocab, t).unwrap();
            }
            side.accept_token(&vocab, detour).unwrap();
            let side_mask = side.compute_mask(&vocab);
            assert_eq!(
                mismatches(&mut side, &vocab, &side_mask),
                Vec::<u32>::new(),
                "detour {detour} at {step}"
            );
            checked += 1;
        }
        matcher.accept_token(&vocab, token).unwrap();
    }
    assert!(matcher.is_accepting(), "the whole text is a valid response");
    checked
}

fn choice(mode: CallMode, allowed: Option<&[&str]>, parallel: bool) -> ToolChoice {
    ToolChoice {
        mode,
        allowed: allowed.map(|a| a.iter().map(|s| tessera_constrain::AllowedTool::parse(s)).collect()),
        parallel,
    }
}

#[test]
fn auto_mode_masks_are_exact() {
    let text = "Sure, I will open it.<tool_call>\n{\"name\": \"browser_open\", \"arguments\": {\"url\": \"https://example.com/?q=\\\"a\\\"\", \"new_tab\": true}}\n</tool_call>";
    assert!(walk(choice(CallMode::Auto, None, false), text, 1) > 40);
}

#[test]
fn required_and_family_masks_are_exact() {
    let text = "<tool_call>\n{\"name\": \"shell_run\", \"arguments\": {\"command\": \"ls -la\", \"env\": [\"A=1\", \"B=2\"], \"timeout\": -1.5e3}}\n</tool_call>\n<tool_call>\n{\"name\": \"file_write\", \"arguments\": {\"meta\": {\"tags\": [1, {\"x\": null}]}, \"mode\": \"append\", \"path\": \"notes.md\"}}\n</tool_call>";
    walk(choice(CallMode::Required, None, true), text, 2);
    let family = "<tool_call>\n{\"name\": \"browser_find\", \"arguments\": {\"query\": \"rust ownership\", \"limit\": 10, \"extra\": [true, false]}}\n</tool_call>";
    walk(choice(CallMode::Required, Some(&["browser_*"]), false), family, 3);
}

#[test]
fn pattern_format_and_key_pattern_masks_are_exact() {
    let text = "<tool_call>\n{\"name\": \"calendar_add\", \"arguments\": {\"due\": \"2026-12-01\", \"title\": \"Review \\\"Q4\\\"\", \"at\": \"2026-12-01T10:00:00Z\", \"labels\": {\"x-team\": \"infra\", \"prio\": 2}, \"email\": \"ops@example.com\"}}\n</tool_call>";
    walk(choice(CallMode::Required, Some(&["calendar_add"]), false), text, 4);
}

#[test]
fn template_defined_envelopes_have_exact_masks() {
    let mistral = Envelope::new(CallFormat::Mistral);
    let text = "Checking.[TOOL_CALLS][{\"name\": \"browser_find\", \"arguments\": {\"limit\": 3, \"query\": \"a\\nb\"}}, {\"name\": \"shell_run\", \"arguments\": {\"command\": \"ls\"}}]";
    walk_in(&mistral, choice(CallMode::Auto, None, true), text, 5);
    let required = "[TOOL_CALLS][{\"name\": \"browser_open\", \"arguments\": {\"url\": \"x\"}}]";
    walk_in(
        &mistral,
        choice(CallMode::Required, Some(&["browser_*"]), false),
        required,
        6,
    );
    let llama = Envelope::new(CallFormat::Llama3Json);
    let text = "{\"name\": \"file_write\", \"parameters\": {\"mode\": \"create\", \"path\": \"a.txt\"}}";
    walk_in(&llama, choice(CallMode::Auto, None, false), text, 7);
    walk_in(&llama, choice(CallMode::Required, None, false), text, 8);
}

#[test]
fn none_mode_masks_are_exact_and_never_complete_the_opener() {
    let text = "I cannot call tools here, not even <tool_call or <tool_ ones.";
    walk(choice(CallMode::None, None, false), text, 4);
    let vocab = vocabulary();
    let mut matcher = ToolCallMatcher::new(tools(), &choice(CallMode::None, None, false), &hermes()).unwrap();
    assert!(matcher.advance_text("<tool_call"));
    let mask = matcher.compute_mask(&vocab);
    let tokenizer = &crate::common::model().tokenizer;
    let close = tokenizer.encode(">").unwrap()[0];
    assert!(!mask.is_allowed(close), "`>` would complete the opener");
}

#[test]
fn a_flipped_bit_is_caught() {
    let vocab = vocabulary();
    let mut matcher = ToolCallMatcher::new(tools(), &choice(CallMode::Required, None, false), &hermes()).unwrap();
    let mask = matcher.compute_mask(&vocab);
    let allowed = mask.to_vec();
    assert!(!allowed.is_empty());
    // The same comparison the walks use, on a mask with one allowed token removed.
    let flipped = allowed[allowed.len() / 2];
    let wrong: Vec<u32> = (0..vocab.len() as u32)
        .filter(|&t| (mask.is_allowed(t) && t != flipped) != matcher.allows_token(&vocab, t))
        .collect();
    assert_eq!(wrong, vec![flipped]);
}

#[test]
fn bare_call_masks_are_exact() {
    let auto = || choice(CallMode::Auto, None, false);
    let bare = "{\"name\": \"browser_open\", \"arguments\": {\"url\": \"https://example.com\"}}";
    walk(auto(), bare, 9);
    let fenced = "\n```json\n{\n  \"name\": \"shell_run\",\n  \"arguments\": {\"command\": \"ls\"}}\n```";
    walk(auto(), fenced, 10);
    let answer = "{\"name\": \"browser_openers\", \"count\": 3}";
    walk(auto(), answer, 11);
}
