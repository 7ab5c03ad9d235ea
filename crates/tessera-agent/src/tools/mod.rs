//! The tools the model can call, all jailed to the workspace.
//!
//! [`definitions`] is the fixed tool list of the prompt (same bytes on every
//! call, so the cached prefix never changes); [`Toolbox::call`] runs one call
//! and returns its observation text. A failed call is a [`ToolError`] whose
//! message goes back to the model; it never ends the run. Results are plain
//! text for a small model: a header line, then the content, then a hint that
//! names the exact next call when there is more to see.
//!
//! Families (`file_*`, `shell_*`, `browser_*`, `todo_write`, `create_plan`,
//! `finish`) are the unit the loop masks with tool choice; the loop itself
//! runs `create_plan` and `finish`.

mod browser;
mod files;
mod html;
mod listing;
mod markdown;
mod paging;
mod schema;
mod shell;

use serde_json::Value;
use tessera_api::openai::ToolSpec;

use crate::jail::Jail;

pub use files::HARNESS_DIR;

/// Check `arguments` against tool `name`'s schema (for the tools the loop
/// runs itself, `create_plan` and `finish`), naming the field at fault.
pub fn check_arguments(name: &str, arguments: &Value) -> Result<(), ToolError> {
    schema::parse_args::<Value>(name, arguments).map(drop)
}

/// A failed tool call: its message becomes the observation ("error: …") and
/// stays in the transcript.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

/// Tool families: a family is a name prefix, masked as a whole (e.g. `file_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// `file_read`, `file_write`, `file_list`, `file_search`.
    File,
    /// `shell_exec`, `shell_view`.
    Shell,
    /// `browser_open`, `browser_find`, `browser_follow`.
    Browser,
    /// `todo_write`.
    Todo,
    /// `create_plan`.
    Plan,
    /// `finish`.
    Finish,
}

impl Family {
    /// Every family, in the order of [`definitions`].
    pub const ALL: [Family; 6] = [
        Family::File,
        Family::Shell,
        Family::Browser,
        Family::Todo,
        Family::Plan,
        Family::Finish,
    ];

    /// The family of a known tool name; `None` for a name no tool has.
    pub fn of(tool_name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.tool_names().contains(&tool_name))
    }

    /// The tools of this family, in definition order.
    pub fn tool_names(self) -> &'static [&'static str] {
        match self {
            Family::File => &["file_read", "file_write", "file_list", "file_search"],
            Family::Shell => &["shell_exec", "shell_view"],
            Family::Browser => &["browser_open", "browser_find", "browser_follow"],
            Family::Todo => &["todo_write"],
            Family::Plan => &["create_plan"],
            Family::Finish => &["finish"],
        }
    }
}

/// Most lines one `file_read` page shows.
pub const FILE_READ_MAX_LINES: usize = 2000;
/// Most bytes one `file_read` page shows.
pub const FILE_READ_MAX_BYTES: usize = 50 * 1024;

/// Every tool's OpenAI definition,
/// `{"type":"function","function":{"name","description","parameters"}}`,
/// always the same order and bytes (the tool list is part of the cached
/// prompt prefix).
pub fn definitions() -> Vec<ToolSpec> {
    schema::SPECS.iter().map(schema::definition).collect()
}

/// Runs tool calls against one workspace; owns the state tools keep between
/// calls (the open browser page, the shell run counter).
#[derive(Debug)]
pub struct Toolbox {
    /// The workspace every path goes through.
    jail: Jail,
    /// Shell permission, default timeout and run ids.
    shell: shell::Shell,
    /// The current browser page.
    browser: browser::Browser,
}

impl Toolbox {
    /// A toolbox over `jail`; shell tools refuse to run unless `allow_shell`.
    pub fn new(jail: Jail, allow_shell: bool) -> Toolbox {
        let shell = shell::Shell::new(&jail, allow_shell);
        Toolbox {
            jail,
            shell,
            browser: browser::Browser::default(),
        }
    }

    /// The workspace.
    pub fn jail(&self) -> &Jail {
        &self.jail
    }

    /// Runs one of: file_read, file_write, file_list, file_search,
    /// shell_exec, shell_view, browser_open, browser_find, browser_follow,
    /// todo_write. `arguments` is the parsed JSON object. Any other name
    /// (create_plan, finish, unknown) is a [`ToolError`] saying the toolbox
    /// does not run it.
    pub fn call(&mut self, name: &str, arguments: &Value) -> Result<String, ToolError> {
        tracing::debug!(tool = name, %arguments, "tool call");
        let jail = &self.jail;
        use schema::parse_args as args;
        match name {
            "file_read" => files::read(jail, args(name, arguments)?),
            "file_write" => files::write(jail, args(name, arguments)?),
            "file_list" => listing::list(jail, args(name, arguments)?),
            "file_search" => listing::search(jail, args(name, arguments)?),
            "shell_exec" => self.shell.exec(jail, arguments),
            "shell_view" => self.shell.view(jail, arguments),
            "browser_open" => self.browser.open(jail, args(name, arguments)?),
            "browser_find" => self.browser.find(args(name, arguments)?),
            "browser_follow" => self.browser.follow(jail, args(name, arguments)?),
            "todo_write" => files::todo_write(jail, args(name, arguments)?),
            "create_plan" | "finish" => Err(ToolError(format!(
                "{name} is not run by the toolbox: the agent loop handles it"
            ))),
            _ => Err(ToolError(format!(
                "the toolbox does not run {name:?}: no tool has that name"
            ))),
        }
    }
}

/// `n` and a noun, plural unless `n == 1` ("1 line", "3 lines", "2 matches",
/// "2 entries"; nouns here never end in a vowel and `y`).
pub(crate) fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else if let Some(stem) = noun.strip_suffix('y') {
        format!("{n} {stem}ies")
    } else if ["s", "x", "ch", "sh"].iter().any(|end| noun.ends_with(end)) {
        format!("{n} {noun}es")
    } else {
        format!("{n} {noun}s")
    }
}

/// `text` trimmed and cut to at most `max` chars, marked with `…` when cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// A JSON object as compact text, for the "call X with {…}" hints.
pub(crate) fn hint(tool: &str, arguments: Value) -> String {
    format!("call {tool} with {arguments}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashSet;

    const NAMES: [&str; 12] = [
        "file_read",
        "file_write",
        "file_list",
        "file_search",
        "shell_exec",
        "shell_view",
        "browser_open",
        "browser_find",
        "browser_follow",
        "todo_write",
        "create_plan",
        "finish",
    ];

    fn name(def: &Value) -> &str {
        def["function"]["name"].as_str().unwrap()
    }

    /// The definitions as the JSON a server reads.
    fn sent() -> Vec<Value> {
        definitions().iter().map(|d| serde_json::to_value(d).unwrap()).collect()
    }

    #[test]
    fn definitions_list_twelve_unique_tools_in_order() {
        let defs = sent();
        let names: Vec<&str> = defs.iter().map(name).collect();
        assert_eq!(names, NAMES);
        assert_eq!(names.iter().collect::<HashSet<_>>().len(), 12);
    }

    #[test]
    fn every_schema_is_strict() {
        for def in sent() {
            assert_eq!(def["type"], "function");
            let f = &def["function"];
            assert!(!f["description"].as_str().unwrap().is_empty());
            let params = &f["parameters"];
            assert_eq!(params["type"], "object", "{}", name(&def));
            assert_eq!(params["additionalProperties"], false, "{}", name(&def));
            let props = params["properties"].as_object().unwrap();
            for required in params["required"].as_array().unwrap() {
                assert!(props.contains_key(required.as_str().unwrap()), "{}", name(&def));
            }
            for (key, prop) in props {
                assert!(prop["description"].is_string(), "{}.{key}", name(&def));
                if prop["type"] == "integer" {
                    let text = prop["description"].as_str().unwrap();
                    assert!(
                        text.contains(" or more") || text.contains(" to "),
                        "{}.{key} states its range",
                        name(&def)
                    );
                }
            }
        }
    }

    #[test]
    fn plan_and_finish_take_one_required_string() {
        let defs = sent();
        for (tool, field) in [("create_plan", "goal"), ("finish", "summary")] {
            let def = defs.iter().find(|d| name(d) == tool).unwrap();
            let params = &def["function"]["parameters"];
            assert_eq!(params["required"], json!([field]));
            assert_eq!(params["properties"][field]["type"], "string");
        }
    }

    #[test]
    fn definitions_are_byte_identical_across_calls() {
        let a = serde_json::to_string(&definitions()).unwrap();
        let b = serde_json::to_string(&definitions()).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn families_cover_the_names_in_order() {
        let all: Vec<&str> = Family::ALL
            .iter()
            .flat_map(|f| f.tool_names().iter().copied())
            .collect();
        assert_eq!(all, NAMES);
        assert_eq!(Family::of("file_search"), Some(Family::File));
        assert_eq!(Family::of("browser_follow"), Some(Family::Browser));
        assert_eq!(Family::of("todo_write"), Some(Family::Todo));
        assert_eq!(Family::of("create_plan"), Some(Family::Plan));
        assert_eq!(Family::of("finish"), Some(Family::Finish));
        assert_eq!(Family::of("file_delete"), None);
    }

    #[test]
    fn the_toolbox_refuses_loop_tools_and_unknown_names() {
        let tmp = tempfile::tempdir().unwrap();
        let mut tools = Toolbox::new(Jail::new(tmp.path()).unwrap(), false);
        let plan = tools.call("create_plan", &json!({"goal": "x"})).unwrap_err();
        assert!(plan.0.contains("not run by the toolbox"), "{plan}");
        let unknown = tools.call("rm_rf", &json!({})).unwrap_err();
        assert!(unknown.0.contains("does not run \"rm_rf\""), "{unknown}");
        let bad = tools.call("file_read", &json!({"path": "a", "x": 1})).unwrap_err();
        assert!(
            bad.0.starts_with("invalid arguments for file_read: unknown field `x`"),
            "{bad}"
        );
    }

    #[test]
    fn clip_and_count() {
        assert_eq!(clip("  abc  ", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc…");
        assert_eq!(clip("ééé", 2), "éé…");
        assert_eq!(count(1, "line"), "1 line");
        assert_eq!(count(0, "match"), "0 matches");
        assert_eq!(count(2, "entry"), "2 entries");
    }
}
