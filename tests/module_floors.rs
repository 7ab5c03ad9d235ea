//! The module floors inside a crate (ARCHITECTURE.md), checked from its
//! sources the way `architecture` checks crates from `cargo metadata`: each
//! module imports only from its own floor or below, names what it imports by
//! module path (never through the crate root's re-exports), and keeps no
//! process-wide cache. Imports are the `use` declarations and the inline
//! `crate::`/`super::` paths of each file, comments and `#[cfg(test)]`
//! modules left out (tests sit above every floor).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One crate's floors, lowest first. A unit is a module path (`json`,
/// `envelope::pieces`); a file belongs to the longest unit its module path
/// starts with, and every file must belong to one. Units on one floor may
/// import each other.
struct CrateFloors {
    src: &'static str,
    floors: &'static [&'static [&'static str]],
    /// Whether a static may not hold a cache (`OnceLock`, `LazyLock`, …).
    no_static_caches: bool,
}

const CONSTRAIN: CrateFloors = CrateFloors {
    src: "crates/tessera-constrain/src",
    floors: &[
        // Text and patterns.
        &["error", "vocab", "literal", "pattern"],
        // The JSON-Schema compiler: a description the automaton consumes.
        &["schema"],
        // The JSON automaton.
        &["json"],
        // The call envelope, file by file.
        &["envelope", "envelope::pieces"],
        &["envelope::bare"],
        &["envelope::format"],
        &["envelope::syntax"],
        &["envelope::stream"],
        &["envelope::output"],
        // The tool trie and the public surface.
        &["choice"],
        &["tools", "value"],
        &["call"],
        &["budget"],
        &["matcher"],
        &[""],
    ],
    no_static_caches: true,
};

const MODEL: CrateFloors = CrateFloors {
    src: "crates/tessera-model/src",
    floors: &[
        // Errors, the device names, SIMD and the worker pool.
        &["error", "device::spec", "simd", "parallel", "rope", "noise"],
        // The model's shape, text, and the quantized products.
        &["config", "tokenizer", "template", "matrix"],
        &["protect", "token_bytes", "kv_cache", "tensors"],
        // The forward pass: attention over the host pools, the batch plan, layers.
        &["attention"],
        &["batch", "layers"],
        // The two decoders.
        &["host", "device"],
        // Where they meet: the model and its K/V storage.
        &["cache", "model"],
        &["sequence", "kv_persist", "load"],
        // Loading: weights into a model, the two file readers, the catalogue.
        &["weights"],
        &["gguf", "safetensors"],
        &["shipped", "source"],
        &[""],
    ],
    // The worker pool and the exp table are process-wide by design.
    no_static_caches: false,
};

/// A violation, as the test reports it.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Finding {
    file: String,
    imported: String,
    why: &'static str,
}

/// The module path of `file` (relative to `src`, `/`-separated).
fn module_of(file: &str) -> Vec<String> {
    let mut segments: Vec<String> = file.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if matches!(segments.last().map(String::as_str), Some("mod" | "lib")) {
        segments.pop();
    }
    segments
}

/// `source` without comments, string and char literals (emptied), and
/// `#[cfg(test)]` items.
fn code_of(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &source[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |end| end + 2);
        } else if rest.starts_with("#[cfg(test)]") {
            i += cfg_test_item_len(rest);
        } else if let Some(len) = literal_len(rest) {
            out.push_str("\"\"");
            i += len;
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of the item `#[cfg(test)]` starts: through its block's closing
/// brace, or its `;`.
fn cfg_test_item_len(rest: &str) -> usize {
    let code = rest.find(['{', ';']).unwrap_or(rest.len());
    if rest[code..].starts_with(';') {
        return code + 1;
    }
    let mut depth = 0usize;
    let mut i = code;
    while i < rest.len() {
        let tail = &rest[i..];
        if let Some(len) = literal_len(tail) {
            i += len;
            continue;
        }
        match tail.as_bytes()[0] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += tail.chars().next().map_or(1, char::len_utf8);
    }
    rest.len()
}

/// The length of the string, raw string or char literal `rest` starts with.
fn literal_len(rest: &str) -> Option<usize> {
    let raw = rest.strip_prefix("br").or_else(|| rest.strip_prefix('r'));
    // `r"…"`, `r#"…"#` (not a raw identifier such as `r#type`).
    if let Some(after) = raw.filter(|after| after.trim_start_matches('#').starts_with('"')) {
        let hashes = after.len() - after.trim_start_matches('#').len();
        let closing = format!("\"{}", "#".repeat(hashes));
        let body = rest.len() - after.len() + hashes + 1;
        return Some(body + rest[body..].find(&closing)? + closing.len());
    }
    let text = rest.strip_prefix('b').unwrap_or(rest);
    let prefix = rest.len() - text.len();
    if text.starts_with('"') {
        let mut escaped = false;
        for (at, c) in text.char_indices().skip(1) {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => return Some(prefix + at + 1),
                _ => {}
            }
        }
        return Some(rest.len());
    }
    // A char literal (`'x'`, `'\n'`, `'\u{1F600}'`); `'a` alone is a lifetime.
    let first = text.strip_prefix('\'')?.chars().next()?;
    let close = match first {
        '\\' => 3 + text.get(3..)?.find('\'')?,
        _ => Some(1 + first.len_utf8()).filter(|&at| text[at..].starts_with('\''))?,
    };
    Some(prefix + close + 1)
}

/// Every path a `use` declaration in `code` names, groups expanded.
fn use_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let end = after.find(';').unwrap_or(after.len());
        let tree = after[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        let tree = ["::", "{", "}", ","].iter().fold(tree, |tree, mark| {
            tree.replace(&format!(" {mark}"), mark)
                .replace(&format!("{mark} "), mark)
        });
        expand(&tree, "", &mut paths);
        rest = &after[end..];
    }
    paths
}

/// Where `word` occurs in `text` as a whole word.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).map(|(at, _)| at).find(|&at| {
        let before = text[..at].chars().next_back().is_none_or(|c| !is_ident(c));
        let after = text[at + word.len()..].chars().next().is_none_or(|c| !is_ident(c));
        before && after
    })
}

/// A use tree (`a::{b, c::{d as e}}`) into its paths under `prefix`.
fn expand(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        out.push(format!("{prefix}{path}"));
        return;
    };
    let head = format!("{prefix}{}", &tree[..open]);
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut depth, mut start) = (0, 0);
    for (at, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&inner[start..at], &head, out);
                start = at + 1;
            }
            _ => {}
        }
    }
    if start < inner.len() {
        expand(&inner[start..], &head, out);
    }
}

/// `code` without its `use` declarations.
fn without_uses(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        rest = &rest[rest.find(';').map_or(rest.len(), |end| end + 1)..];
    }
    out.push_str(rest);
    out
}

/// The inline `crate::…` and `super::…` paths of `code` (outside `use`).
fn inline_paths(code: &str) -> Vec<String> {
    let code = &without_uses(code);
    let mut paths = Vec::new();
    for root in ["crate::", "super::"] {
        for (at, _) in code.match_indices(root) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            paths.push(path.trim_end_matches(':').to_string());
        }
    }
    paths
}

/// `path` as an absolute module path from the crate root, written in `module`;
/// `None` for a path outside the crate (std, another crate, a child module
/// named without `self::`, which stays inside the file's own unit).
fn resolve(path: &str, module: &[String]) -> Option<Vec<String>> {
    let mut segments = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut at: Vec<String> = match segments.peek().copied() {
        Some("crate") => Vec::new(),
        Some("super") | Some("self") => module.to_vec(),
        _ => return None,
    };
    if segments.peek() == Some(&"crate") {
        segments.next();
    }
    while let Some(&segment) = segments.peek() {
        match segment {
            "super" => {
                at.pop();
            }
            "self" => {}
            _ => break,
        }
        segments.next();
    }
    at.extend(segments.map(str::to_string));
    Some(at)
}

/// The unit `path` belongs to: the longest listed unit it starts with.
fn unit_of<'a>(floors: &[&[&'a str]], path: &[String]) -> Option<(&'a str, usize)> {
    let joined = path.join("::");
    floors
        .iter()
        .enumerate()
        .flat_map(|(floor, units)| units.iter().map(move |unit| (*unit, floor)))
        .filter(|(unit, _)| match unit.is_empty() {
            true => path.is_empty(),
            false => joined == *unit || joined.starts_with(&format!("{unit}::")),
        })
        .max_by_key(|(unit, _)| unit.len())
}

/// The crate's modules named at its root (what a `crate::x` path may start with).
fn root_modules(files: &[(String, String)]) -> BTreeSet<String> {
    files
        .iter()
        .filter_map(|(file, _)| module_of(file).first().cloned())
        .collect()
}

/// Every rule `files` (path under `src`, source) break.
fn check(rules: &CrateFloors, files: &[(String, String)]) -> Vec<Finding> {
    let roots = root_modules(files);
    // Test modules in files of their own sit above every floor, as inline ones do.
    let files: Vec<&(String, String)> = files
        .iter()
        .filter(|(file, _)| module_of(file).last().is_none_or(|m| m != "tests"))
        .collect();
    let mut findings = Vec::new();
    let mut same_floor = BTreeSet::new();
    for (file, source) in files.iter().copied() {
        findings.extend(file_findings(rules, &roots, file, source, &mut same_floor));
    }
    for (from, to, file, imported) in &same_floor {
        if same_floor
            .iter()
            .any(|(back_from, back_to, ..)| back_from == to && back_to == from)
        {
            findings.push(finding(file, imported, "a circle: the two units import each other"));
        }
    }
    findings.sort();
    findings
}

fn finding(file: &str, imported: &str, why: &'static str) -> Finding {
    Finding {
        file: file.to_string(),
        imported: imported.to_string(),
        why,
    }
}

/// The rules one file breaks; imports between two units of its floor go to `same_floor`.
fn file_findings(
    rules: &CrateFloors,
    roots: &BTreeSet<String>,
    file: &str,
    source: &str,
    same_floor: &mut BTreeSet<(&'static str, &'static str, String, String)>,
) -> Vec<Finding> {
    let module = module_of(file);
    let Some((own_unit, own_floor)) = unit_of(rules.floors, &module) else {
        return vec![finding(file, "", "the file belongs to no unit of the floors")];
    };
    let mut findings = Vec::new();
    let code = code_of(source);
    let caches = ["OnceLock<", "LazyLock<", "lazy_static!", "thread_local!"];
    let is_cache = |line: &str| line.contains("static") && caches.iter().any(|cache| line.contains(cache));
    if rules.no_static_caches && code.lines().any(is_cache) {
        findings.push(finding(file, "", "a process-wide cache (a static)"));
    }
    for path in use_paths(&code).into_iter().chain(inline_paths(&code)) {
        let Some(target) = resolve(&path, &module) else {
            continue;
        };
        let Some(first) = target.first() else { continue };
        if !roots.contains(first) {
            if !module.is_empty() {
                findings.push(finding(
                    file,
                    &path,
                    "imported through the crate root, not by module path",
                ));
            }
            continue;
        }
        let Some((unit, floor)) = unit_of(rules.floors, &target) else {
            continue;
        };
        let imported = target.join("::");
        if floor > own_floor {
            findings.push(finding(file, &imported, "imported from a higher floor"));
        }
        if floor == own_floor && unit != own_unit {
            same_floor.insert((own_unit, unit, file.to_string(), imported));
        }
    }
    findings
}

/// The `.rs` files under `dir`, at any depth.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            match path.is_dir() {
                true => walk(&path, out),
                false if path.extension().is_some_and(|e| e == "rs") => out.push(path),
                false => {}
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files
}

/// The `.rs` files under `dir`, as (path under `dir`, source).
fn sources(dir: &Path) -> Vec<(String, String)> {
    rust_files(dir)
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
            (relative, std::fs::read_to_string(&path).unwrap())
        })
        .collect()
}

fn crate_sources(rules: &CrateFloors) -> Vec<(String, String)> {
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rules.src))
}

#[test]
fn tessera_constrain_keeps_its_floors() {
    let files = crate_sources(&CONSTRAIN);
    assert!(files.len() > 30, "the sources were found: {}", files.len());
    assert_eq!(check(&CONSTRAIN, &files), Vec::new());
}

#[test]
fn tessera_model_keeps_its_floors() {
    let files = crate_sources(&MODEL);
    assert!(files.len() > 30, "the sources were found: {}", files.len());
    assert_eq!(check(&MODEL, &files), Vec::new());
}

#[test]
fn the_floors_check_fails_on_a_planted_break() {
    let mut files = crate_sources(&CONSTRAIN);
    let plant = |files: &mut Vec<(String, String)>, file: &str, line: &str| {
        let (_, source) = files.iter_mut().find(|(f, _)| f == file).unwrap();
        source.insert_str(0, line);
    };
    plant(&mut files, "schema/merge.rs", "use crate::json::accepts;\n");
    plant(&mut files, "json/machine.rs", "use crate::{Vocabulary, ToolDef};\n");
    plant(
        &mut files,
        "pattern/mod.rs",
        "static CACHE: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();\n",
    );
    plant(
        &mut files,
        "envelope/bare.rs",
        "fn f() { let _ = super::format::Envelope::new; }\n",
    );
    let findings = check(&CONSTRAIN, &files);
    let found: Vec<(&str, &str)> = findings.iter().map(|f| (f.file.as_str(), f.why)).collect();
    assert_eq!(
        found,
        [
            ("envelope/bare.rs", "imported from a higher floor"),
            ("json/machine.rs", "imported through the crate root, not by module path"),
            ("json/machine.rs", "imported through the crate root, not by module path"),
            ("pattern/mod.rs", "a process-wide cache (a static)"),
            ("schema/merge.rs", "imported from a higher floor"),
        ],
        "{findings:#?}"
    );
    // What the reader leaves out: comments, strings and test modules.
    let quiet = "// use crate::matcher::X;\nconst S: &str = \"crate::matcher\";\n#[cfg(test)]\nmod tests {\n    use crate::matcher::Y;\n}\n";
    assert!(use_paths(&code_of(quiet)).is_empty() && inline_paths(&code_of(quiet)).is_empty());
    // ...and what it keeps: code after a raw identifier, a char literal or a raw string.
    let kept = "let r#type = '{'; let s = r#\"}\"#; let x = crate::matcher::Z;";
    assert_eq!(inline_paths(&code_of(kept)), ["crate::matcher::Z"]);
}
