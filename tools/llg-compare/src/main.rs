//! llguidance against Tessera's own automaton, on the same vocabulary
//! (SmolLM2's 49,152 tokens) and the same inputs:
//!
//! 1. The JSON Schema Test Suite (draft 2020-12, the groups Tessera's harness
//!    runs): per engine, groups enforced exactly (the schema compiles, every
//!    valid instance is accepted and every invalid one refused), refused (the
//!    schema does not compile) and wrong (anything else). Instances are the
//!    compact serde_json text, tokenized greedily; an engine accepts one when it
//!    takes every token and may end there.
//! 2. Mask times along a tool call's arguments: every step's mask, p50/p99.
//!
//! Usage: llg-compare MODEL.gguf SUITE_DIR (see scripts/compare-llguidance.sh).

use anyhow::{anyhow, Context, Result};
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use tessera_constrain::{CompiledTools, SchemaOptions, ToolCallMatcher, ToolDef, ValueSchema, Vocabulary};
use toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};

#[derive(Default)]
struct Tally {
    groups: usize,
    enforced: usize,
    refused: usize,
    /// Groups where an invalid instance was accepted (the engine let a wrong value through).
    accepts_invalid: usize,
    /// Groups where only valid instances were refused (a narrower language, or another form).
    rejects_valid: usize,
    /// `file: group` of each wrong group.
    wrong: Vec<String>,
}

/// An engine's verdicts on a group's instances: `None` when it refused the schema.
struct Verdicts {
    accepted_invalid: bool,
    rejected_valid: bool,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (model, suite) = match args.as_slice() {
        [_, model, suite] => (Path::new(model), Path::new(suite)),
        _ => return Err(anyhow!("usage: llg-compare MODEL.gguf SUITE_DIR")),
    };
    let tokenizer = tessera_model::GgufSource::open(model)?.tokenizer()?;
    let bytes = tokenizer.token_bytes();
    let eos = *tokenizer.stop_ids().first().context("a stop token")?;
    let trie = TokTrie::from(&TokRxInfo::new(bytes.len() as u32, eos), &bytes);
    let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie.clone()));
    let factory = ParserFactory::new_simple(&env)?;
    let vocab = Vocabulary::new(&bytes, tokenizer.stop_ids());

    println!("## JSON Schema Test Suite (draft 2020-12), {} tokens\n", bytes.len());
    let (ours, theirs) = conformance(suite, &factory, &trie)?;
    println!("| engine | groups | enforced | refused | accepts an invalid instance | refuses only valid ones |");
    println!("|---|---|---|---|---|---|");
    for (name, t) in [("Tessera", &ours), ("llguidance 1.9.1", &theirs)] {
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            t.groups, t.enforced, t.refused, t.accepts_invalid, t.rejects_valid
        );
    }
    for (name, t) in [("Tessera", &ours), ("llguidance", &theirs)] {
        println!("\n{name} wrong: {}", t.wrong.join("; "));
    }
    println!("\n## Mask time along one call's arguments (every step)\n");
    masks(&factory, &trie, &vocab)?;
    Ok(())
}

/// Every group of the suite's top-level files (but `format.json`, which tests
/// `format` as an annotation) through both engines.
fn conformance(suite: &Path, factory: &ParserFactory, trie: &TokTrie) -> Result<(Tally, Tally)> {
    let mut files: Vec<_> = std::fs::read_dir(suite)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json") && p.file_stem().is_some_and(|s| s != "format"))
        .collect();
    files.sort();
    let (mut ours, mut theirs) = (Tally::default(), Tally::default());
    for path in files {
        let groups: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        for group in groups {
            let schema = &group["schema"];
            let tests: Vec<(String, bool)> = group["tests"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| (canonical(&t["data"]).to_string(), t["valid"].as_bool().unwrap_or(false)))
                .collect();
            let label = format!(
                "{}: {}",
                path.file_stem().unwrap_or_default().to_string_lossy(),
                group["description"].as_str().unwrap_or("")
            );
            tally(&mut ours, tessera_verdicts(schema, &tests), &label);
            tally(&mut theirs, llguidance_verdicts(factory, trie, schema, &tests), &label);
        }
    }
    Ok((ours, theirs))
}

/// The instance as Tessera's harness writes a valid one: integral numbers
/// that fit an i64 without a fraction (serde_json writes `1.0` otherwise).
fn canonical(value: &Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.as_i64().is_none() && n.as_u64().is_none() && f.fract() == 0.0 && f.abs() < 9.2e18 => {
                Value::from(f as i64)
            }
            _ => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), canonical(v))).collect()),
        _ => value.clone(),
    }
}

fn tally(t: &mut Tally, outcome: Option<Verdicts>, label: &str) {
    t.groups += 1;
    match outcome {
        None => t.refused += 1,
        Some(v) if v.accepted_invalid => {
            t.accepts_invalid += 1;
            t.wrong.push(label.to_string());
        }
        Some(v) if v.rejected_valid => {
            t.rejects_valid += 1;
            t.wrong.push(label.to_string());
        }
        Some(_) => t.enforced += 1,
    }
}

fn verdicts(tests: &[(String, bool)], mut accepts: impl FnMut(&str) -> bool) -> Verdicts {
    let mut v = Verdicts {
        accepted_invalid: false,
        rejected_valid: false,
    };
    for (text, valid) in tests {
        match (accepts(text), valid) {
            (true, false) => v.accepted_invalid = true,
            (false, true) => v.rejected_valid = true,
            _ => {}
        }
    }
    v
}

fn tessera_verdicts(schema: &Value, tests: &[(String, bool)]) -> Option<Verdicts> {
    let compiled = ValueSchema::compile("suite", schema, SchemaOptions::EXACT).ok()?;
    Some(verdicts(tests, |text| compiled.accepts(text.as_bytes())))
}

fn llguidance_verdicts(
    factory: &ParserFactory,
    trie: &TokTrie,
    schema: &Value,
    tests: &[(String, bool)],
) -> Option<Verdicts> {
    let parser = factory
        .create_parser(TopLevelGrammar::from_json_schema(schema.clone()))
        .ok()?;
    Some(verdicts(tests, |text| {
        let tokens = trie.greedy_tokenize(text.as_bytes());
        let mut matcher = Matcher::new(Ok(parser.deep_clone()));
        let taken = matcher.try_consume_tokens(&tokens).unwrap_or(0);
        taken == tokens.len() && matcher.is_accepting().unwrap_or(false)
    }))
}

/// A realistic tool schema and arguments; both engines' masks at every step.
fn masks(factory: &ParserFactory, trie: &TokTrie, vocab: &Vocabulary) -> Result<()> {
    let schema = serde_json::json!({"type": "object", "properties": {
        "path": {"type": "string", "minLength": 1},
        "due": {"type": "string", "format": "date"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 500},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
        "mode": {"enum": ["read", "write", "append"]}
    }, "required": ["path", "mode"], "additionalProperties": false});
    // In the schema's property order: llguidance writes properties in that order, Tessera in any.
    let arguments = r#"{"path":"src/notes/todo-list.md","due":"2026-12-01","limit":120,"tags":["work","urgent planning","q4"],"mode":"append"}"#;
    let tokens = trie.greedy_tokenize(arguments.as_bytes());

    let parser = factory
        .create_parser(TopLevelGrammar::from_json_schema(schema.clone()))
        .map_err(|e| anyhow!("llguidance: {e}"))?;
    let mut theirs = Matcher::new(Ok(parser));
    let mut llg_times = Vec::new();
    for &token in &tokens {
        let started = Instant::now();
        let mask = theirs.compute_mask()?;
        llg_times.push(started.elapsed().as_secs_f64() * 1e6);
        anyhow::ensure!(
            mask.is_allowed(token),
            "llguidance masks the text's own token {token} ({:?}) after {:?}",
            String::from_utf8_lossy(trie.token(token)),
            String::from_utf8_lossy(&tokens[..llg_times.len() - 1].iter().flat_map(|&t| trie.token(t).to_vec()).collect::<Vec<u8>>())
        );
        theirs.consume_token(token)?;
    }

    let tool = ToolDef {
        name: "response".into(),
        description: String::new(),
        parameters: schema,
    };
    let compiled = Arc::new(CompiledTools::compile(&[tool])?);
    let mut ours = ToolCallMatcher::json_value(compiled)?;
    let mut our_times = Vec::new();
    for &token in &tokens {
        let started = Instant::now();
        let mask = ours.compute_mask_within(vocab, 256);
        our_times.push(started.elapsed().as_secs_f64() * 1e6);
        anyhow::ensure!(mask.is_allowed(token), "Tessera masks the text's own token {token}");
        ours.accept_token(vocab, token)?;
    }
    println!("{} tokens of arguments: `{arguments}`\n", tokens.len());
    if std::env::var_os("LLG_COMPARE_STEPS").is_some() {
        for (i, &token) in tokens.iter().enumerate() {
            println!(
                "step {i:>2} {:>10?} Tessera {:>9.1} µs  llguidance {:>7.1} µs",
                String::from_utf8_lossy(trie.token(token)),
                our_times[i],
                llg_times[i]
            );
        }
    }
    println!("| engine | p50 µs | p99 µs | max µs | mean µs |\n|---|---|---|---|---|");
    for (name, times) in [("Tessera (budget-aware)", &mut our_times), ("llguidance 1.9.1", &mut llg_times)] {
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        println!("| {name} | {:.1} | {:.1} | {:.1} | {:.1} |", at(0.5), at(0.99), at(1.0), mean);
    }
    Ok(())
}
