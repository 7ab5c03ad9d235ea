//! The dependency rules of ARCHITECTURE.md, checked against `cargo metadata`:
//! every workspace crate's normal dependencies are within its list, and the
//! crates that must never reach HTTP do not, not even through another crate.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::process::Command;

/// Each crate's allowed direct (normal, non-dev, non-build) dependencies.
const ALLOWED: &[(&str, &[&str])] = &[
    ("tessera-kv", &["thiserror"]),
    ("tessera-sample", &["thiserror"]),
    ("tessera-kernels", &["half", "thiserror"]),
    (
        "tessera-constrain",
        &["regex-automata", "serde_json", "thiserror", "toktrie", "tracing"],
    ),
    (
        "tessera-model",
        &[
            "candle-core",
            "candle-nn",
            "crc32fast",
            "half",
            "minijinja",
            "minijinja-contrib",
            "safetensors",
            "serde",
            "serde_json",
            "tessera-kernels",
            "tessera-kv",
            "thiserror",
            "tokenizers",
            "toktrie",
            "tracing",
        ],
    ),
    (
        "tessera-engine",
        &[
            "tessera-constrain",
            "tessera-kv",
            "tessera-model",
            "tessera-sample",
            "thiserror",
            "tokio",
            "tracing",
        ],
    ),
    (
        "tessera-api",
        &[
            "serde",
            "serde_json",
            "tessera-constrain",
            "tessera-engine",
            "tessera-model",
            "tessera-sample",
            "thiserror",
            "tracing",
        ],
    ),
    (
        "tessera-server",
        &[
            "axum",
            "bytes",
            "futures-util",
            "rmp",
            "serde",
            "serde_json",
            "serde_path_to_error",
            "tessera-engine",
            "tessera-api",
            "thiserror",
            "tokio",
            "tracing",
            "zeromq",
        ],
    ),
    (
        "tessera-agent",
        &[
            "serde",
            "serde_json",
            "tessera-engine",
            "tessera-api",
            "thiserror",
            "tracing",
            "ureq",
            "wait-timeout",
        ],
    ),
    (
        "tessera",
        &[
            "anyhow",
            "clap",
            "hf-hub",
            "indicatif",
            "plotters",
            "serde",
            "serde_json",
            "tessera-agent",
            "tessera-api",
            "tessera-engine",
            "tessera-kv",
            "tessera-model",
            "tessera-sample",
            "tessera-server",
            "tokio",
            "tracing",
            "tracing-subscriber",
        ],
    ),
    ("tessera-fixtures", &["tessera-model"]),
];

/// The crates of an HTTP server.
const HTTP_SERVER: &[&str] = &["axum", "axum-core", "hyper", "hyper-util", "tower", "http-body-util"];

/// Crates that must not reach an HTTP server crate, even transitively.
const WITHOUT_HTTP_SERVER: &[&str] = &[
    "tessera-kv",
    "tessera-sample",
    "tessera-kernels",
    "tessera-constrain",
    "tessera-model",
    "tessera-engine",
    "tessera-api",
    "tessera-agent",
];

/// `cargo metadata` for this machine's platform (other platforms' crates are
/// neither resolved nor downloaded).
fn metadata() -> Value {
    let rustc = Command::new("rustc").arg("-vV").output().expect("rustc runs");
    let version = String::from_utf8_lossy(&rustc.stdout);
    let host = version
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("rustc -vV names the host");
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            host,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

/// Whether a dependency entry of `cargo metadata` is a normal one.
fn is_normal(kind: &Value) -> bool {
    kind.is_null()
}

#[test]
fn each_crate_depends_only_on_what_architecture_md_allows() {
    let metadata = metadata();
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut checked = 0;
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        if !members.contains(package["id"].as_str().unwrap()) || name == "tessera-workspace" {
            continue;
        }
        let allowed = ALLOWED
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
            .map(|(_, allowed)| *allowed)
            .unwrap_or_else(|| panic!("{name} is a workspace crate missing from ALLOWED (and from ARCHITECTURE.md?)"));
        let used: BTreeSet<&str> = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|dep| is_normal(&dep["kind"]))
            .filter_map(|dep| dep["name"].as_str())
            .collect();
        let extra: Vec<&&str> = used.iter().filter(|dep| !allowed.contains(dep)).collect();
        assert!(
            extra.is_empty(),
            "{name} depends on {extra:?}, which ARCHITECTURE.md does not allow it"
        );
        checked += 1;
    }
    assert_eq!(checked, ALLOWED.len(), "every listed crate was found");
}

#[test]
fn only_the_server_and_the_binary_reach_an_http_server_crate() {
    let metadata = metadata();
    let names: HashMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let edges: HashMap<&str, Vec<&str>> = metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            let normal = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|dep| {
                    dep["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|k| is_normal(&k["kind"]))
                })
                .filter_map(|dep| dep["pkg"].as_str())
                .collect();
            (node["id"].as_str().unwrap(), normal)
        })
        .collect();
    let id_of = |name: &str| names.iter().find(|(_, n)| **n == name).map(|(id, _)| *id).unwrap();
    for root in WITHOUT_HTTP_SERVER {
        let mut seen = BTreeSet::new();
        let mut queue = VecDeque::from([id_of(root)]);
        while let Some(id) = queue.pop_front() {
            if !seen.insert(id) {
                continue;
            }
            let name = names[id];
            assert!(
                !HTTP_SERVER.contains(&name),
                "{root} reaches the HTTP server crate {name}"
            );
            queue.extend(edges.get(id).into_iter().flatten());
        }
    }
    let server = id_of("tessera-server");
    assert!(
        edges[server].iter().any(|id| names[id] == "axum"),
        "the check can fail: the server does reach axum"
    );
}

/// What only `tessera-api`'s core may do on the way to the engine: render a
/// prompt, tokenize one, build a constraint, submit a request, read a call
/// back out of generated text.
const CORE_ONLY: &[&str] = &[
    "GenerateRequest",
    ".submit(",
    "encode_prompt",
    "encode_protected",
    "tools_prompt",
    "Protected",
    ".template()",
    "ToolConstraint",
    "CompiledTools",
    "parse_response",
    "stream_parser",
    "tool_output",
];

/// The sources of the callers that must go through the core: the agent
/// crate, `tessera generate` and `tessera agent`.
fn core_callers() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = crate::module_floors::rust_files(&root.join("crates/tessera-agent/src"));
    files.extend(["generate.rs", "agent.rs", "tool_args.rs"].map(|f| root.join("crates/tessera/src").join(f)));
    files
}

/// The first use of a core-only name in `source`, if any.
fn core_only_use(source: &str) -> Option<&'static str> {
    CORE_ONLY.iter().copied().find(|name| source.contains(name))
}

#[test]
fn the_agent_and_generate_reach_the_engine_only_through_the_typed_core() {
    let files = core_callers();
    assert!(files.len() > 20, "the agent's sources were found: {files:?}");
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            core_only_use(&source),
            None,
            "{} goes around tessera-api's core",
            file.display()
        );
    }
    let planted = "let events = engine.submit(GenerateRequest::greedy(prompt, 8));";
    assert_eq!(core_only_use(planted), Some("GenerateRequest"), "the check can fail");
}
