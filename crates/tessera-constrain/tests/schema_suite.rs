//! Conformance to the official JSON Schema Test Suite (draft 2020-12, from the
//! `jsonschema` 4.26.0 sdist, fetched by `scripts/fetch-schema-suite.sh`).
//!
//! For every test group, either the schema compiles and the automaton accepts
//! every valid instance and rejects every invalid one, or compiling fails with
//! an error naming the keyword and its path. Instances are fed byte by byte:
//! a valid one in the form the automaton generates (see [`canonical`]); an
//! invalid one in every form below (a form the automaton never writes is
//! still a form, and an invalid value must be refused in all of them).
//!
//! `format` is asserted (the format-assertion vocabulary): the top-level
//! `format.json`, which tests `format` as an annotation only, is replaced by
//! the suite's `optional/format/*.json` for the formats enforced.
//!
//! Prints a table per keyword file (enforced / refused / wrong) and writes it
//! to `$CARGO_TARGET_DIR/schema-suite.md`; fails if any group is wrong.

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use tessera_constrain::{SchemaOptions, ValueSchema, ENFORCED_FORMATS};

/// How an instance is spelled.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Form {
    /// A space after `:` and `,` (the automaton accepts one, never writes two).
    spaced: bool,
    /// Object keys in reverse order.
    reversed: bool,
    /// Integral numbers written with a fraction (`1.0`), as serde_json writes floats.
    float_integers: bool,
    /// Characters outside ASCII written as `\uXXXX` escapes.
    escaped_unicode: bool,
}

/// The automaton's own form: compact, keys sorted, integral numbers that fit
/// an i64 written without a fraction, other numbers as serde_json writes them
/// (shortest round trip), strings escaped as serde_json escapes them (only
/// `"`, `\` and control characters).
const CANONICAL: Form = Form {
    spaced: false,
    reversed: false,
    float_integers: false,
    escaped_unicode: false,
};

fn every_form() -> Vec<Form> {
    let mut forms = Vec::new();
    for bits in 0..16u8 {
        forms.push(Form {
            spaced: bits & 1 != 0,
            reversed: bits & 2 != 0,
            float_integers: bits & 4 != 0,
            escaped_unicode: bits & 8 != 0,
        });
    }
    forms
}

fn write_number(n: &serde_json::Number, form: Form, out: &mut String) {
    let integral = n.as_i64().map(|i| i as f64).or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
            .map(|f| f as i64 as f64)
    });
    match integral {
        Some(value) if form.float_integers => write!(out, "{value:.1}").unwrap(),
        Some(value) => write!(out, "{}", value as i64).unwrap(),
        None => out.push_str(&n.to_string()),
    }
}

fn write_string(s: &str, form: Form, out: &mut String) {
    let quoted = Value::String(s.to_string()).to_string();
    if !form.escaped_unicode {
        out.push_str(&quoted);
        return;
    }
    for c in quoted.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(out, "\\u{unit:04x}").unwrap();
            }
        }
    }
}

fn write_value(value: &Value, form: Form, out: &mut String) {
    let separator = if form.spaced { ", " } else { "," };
    match value {
        Value::Number(n) => write_number(n, form, out),
        Value::String(s) => write_string(s, form, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(separator);
                }
                write_value(item, form, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            let mut entries: Vec<_> = map.iter().collect();
            if form.reversed {
                entries.reverse();
            }
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(separator);
                }
                write_string(key, form, out);
                out.push_str(if form.spaced { ": " } else { ":" });
                write_value(item, form, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn spelled(value: &Value, form: Form) -> String {
    let mut out = String::new();
    write_value(value, form, &mut out);
    out
}

fn canonical(value: &Value) -> String {
    spelled(value, CANONICAL)
}

#[derive(Default)]
struct Tally {
    groups: usize,
    enforced: usize,
    refused: usize,
    wrong: usize,
}

/// One group: `None` when enforced exactly or refused well, else what went wrong.
fn check_group(group: &Value, tally: &mut Tally) -> Option<String> {
    let description = group["description"].as_str().unwrap_or("?");
    tally.groups += 1;
    let compiled = match ValueSchema::compile("suite", &group["schema"], SchemaOptions::EXACT) {
        Ok(compiled) => compiled,
        Err(error) => {
            let message = error.to_string();
            tally.refused += 1;
            // A refusal names where (a JSON pointer) and what.
            if !message.contains(" at /") {
                tally.wrong += 1;
                return Some(format!("{description}: refused without a path: {message}"));
            }
            return None;
        }
    };
    for test in group["tests"].as_array().into_iter().flatten() {
        let data = &test["data"];
        let valid = test["valid"].as_bool().unwrap_or(false);
        let what = test["description"].as_str().unwrap_or("?");
        let failure = if valid {
            let text = canonical(data);
            (!compiled.accepts(text.as_bytes())).then(|| format!("valid `{text}` rejected"))
        } else {
            every_form()
                .into_iter()
                .map(|form| spelled(data, form))
                .find(|text| compiled.accepts(text.as_bytes()))
                .map(|text| format!("invalid `{text}` accepted"))
        };
        if let Some(failure) = failure {
            tally.wrong += 1;
            return Some(format!("{description} / {what}: {failure}"));
        }
    }
    tally.enforced += 1;
    None
}

/// Optional files run too: ECMA-262 regex semantics (`\d` is ASCII, `\s`
/// is Unicode, ...) and patterns beyond the Basic Multilingual Plane.
const OPTIONAL_FILES: [&str; 2] = ["ecmascript-regex.json", "non-bmp-regex.json"];

fn run_suite(dir: &Path) -> (BTreeMap<String, Tally>, Vec<String>) {
    let mut table = BTreeMap::new();
    let mut failures = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 40,
        "the suite has {} files; expected the 46 of draft 2020-12",
        files.len()
    );
    files.retain(|path| path.file_stem().is_some_and(|stem| stem != "format"));
    for format in ENFORCED_FORMATS {
        files.push(dir.join("optional/format").join(format!("{format}.json")));
    }
    for optional in OPTIONAL_FILES {
        files.push(dir.join("optional").join(optional));
    }
    for path in files {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let name = if path.parent().is_some_and(|p| p.ends_with("format")) {
            format!("format: {stem}")
        } else if path.parent().is_some_and(|p| p.ends_with("optional")) {
            format!("optional: {stem}")
        } else {
            stem
        };
        let text = std::fs::read_to_string(&path).unwrap();
        let groups: Vec<Value> = serde_json::from_str(&text).unwrap();
        let tally: &mut Tally = table.entry(name.clone()).or_default();
        for group in &groups {
            if let Some(failure) = check_group(group, tally) {
                failures.push(format!("{name}: {failure}"));
            }
        }
    }
    (table, failures)
}

fn report(table: &BTreeMap<String, Tally>) -> String {
    let mut out = String::from("| keyword file | groups | enforced | refused | wrong |\n|---|---|---|---|---|\n");
    let mut total = Tally::default();
    for (name, t) in table {
        writeln!(
            out,
            "| {name} | {} | {} | {} | {} |",
            t.groups, t.enforced, t.refused, t.wrong
        )
        .unwrap();
        total.groups += t.groups;
        total.enforced += t.enforced;
        total.refused += t.refused;
        total.wrong += t.wrong;
    }
    writeln!(
        out,
        "| **all** | {} | {} | {} | {} |",
        total.groups, total.enforced, total.refused, total.wrong
    )
    .unwrap();
    out
}

#[test]
fn the_official_suite_is_enforced_exactly_or_refused_by_name() {
    let dir = tessera_fixtures::json_schema_suite();
    let (table, failures) = run_suite(&dir);
    let report = report(&table);
    println!("JSON Schema Test Suite, draft 2020-12:\n{report}");
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        let _ = std::fs::write(Path::new(&target).join("schema-suite.md"), &report);
    }
    assert!(
        failures.is_empty(),
        "{} group(s) wrong:\n{}\n{report}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_canonical_form_is_what_the_automaton_writes() {
    let value: Value = serde_json::from_str(r#"{"b": [1.0, 2.5, -0.0, 1e+300], "a": "é\n"}"#).unwrap();
    assert_eq!(canonical(&value), r#"{"a":"é\n","b":[1,2.5,0,1e+300]}"#);
    let all = Form {
        spaced: true,
        reversed: true,
        float_integers: true,
        escaped_unicode: true,
    };
    assert_eq!(
        spelled(&value, all),
        r#"{"b": [1.0, 2.5, 0.0, 1e+300], "a": "\u00e9\n"}"#
    );
}
