//! The tool table: one static [`Spec`] per tool is the single source of the
//! OpenAI definitions and of the argument checks, so a limit stated to the
//! model is the limit enforced.
//!
//! Arguments are checked against the spec first (unknown or missing fields,
//! JSON types, integer ranges), each failure naming the field, and only then
//! deserialized into the tool's typed argument struct. A `null` value for an
//! optional field counts as absent.

use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use tessera_api::openai::ToolSpec;

use super::ToolError;

/// The JSON type of a parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// A JSON string.
    Str,
    /// A JSON boolean.
    Bool,
    /// A non-negative JSON integer within `min..=max` (`max` unbounded when `None`).
    Int { min: u64, max: Option<u64> },
}

/// One parameter of a tool.
#[derive(Debug)]
pub(crate) struct Param {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) required: bool,
    pub(crate) description: &'static str,
}

/// One tool: its name, a one-sentence description and its parameters.
#[derive(Debug)]
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    pub(crate) description: &'static str,
    pub(crate) params: &'static [Param],
}

const fn param(name: &'static str, kind: Kind, required: bool, description: &'static str) -> Param {
    Param {
        name,
        kind,
        required,
        description,
    }
}

const PATH: Param = param("path", Kind::Str, true, "Path relative to the workspace root.");
const START_LINE: Param = param(
    "start_line",
    Kind::Int { min: 1, max: None },
    false,
    "First line to show, 1 or more.",
);

/// Every tool, in definition order (the order is part of the cached prompt).
pub(crate) const SPECS: &[Spec] = &[
    Spec {
        name: "file_read",
        description: "Read a text file of the workspace, one page of lines at a time.",
        params: &[PATH, START_LINE],
    },
    Spec {
        name: "file_write",
        description: "Create or replace a file; missing folders are created.",
        params: &[
            PATH,
            param("content", Kind::Str, true, "The text to write."),
            param("append", Kind::Bool, false, "Add to the end instead of replacing."),
        ],
    },
    Spec {
        name: "file_list",
        description: "List the files and folders under a folder, recursively.",
        params: &[param(
            "path",
            Kind::Str,
            false,
            "Folder to list; the workspace root if omitted.",
        )],
    },
    Spec {
        name: "file_search",
        description: "Find the lines that contain a text in files, ignoring case.",
        params: &[
            param("query", Kind::Str, true, "The text to find."),
            param(
                "path",
                Kind::Str,
                false,
                "File or folder to search; the workspace root if omitted.",
            ),
        ],
    },
    Spec {
        name: "shell_exec",
        description: "Run a shell command in the workspace root.",
        params: &[
            param("command", Kind::Str, true, "The command line, run with sh -c."),
            param(
                "timeout_secs",
                Kind::Int { min: 1, max: Some(300) },
                false,
                "Seconds before the command is killed, 1 to 300; 30 if omitted.",
            ),
        ],
    },
    Spec {
        name: "shell_view",
        description: "Show the full saved output of an earlier shell_exec run.",
        params: &[
            param(
                "id",
                Kind::Int { min: 1, max: None },
                true,
                "The run id given by shell_exec, 1 or more.",
            ),
            START_LINE,
        ],
    },
    Spec {
        name: "browser_open",
        description: "Open a local HTML, Markdown or text page as text with numbered links.",
        params: &[
            PATH,
            param(
                "start",
                Kind::Int { min: 0, max: None },
                false,
                "Character offset to start at, 0 or more.",
            ),
        ],
    },
    Spec {
        name: "browser_find",
        description: "Find the lines of the open page that contain a text, ignoring case.",
        params: &[param("text", Kind::Str, true, "The text to find.")],
    },
    Spec {
        name: "browser_follow",
        description: "Open link number n of the open page.",
        params: &[param(
            "link",
            Kind::Int { min: 1, max: None },
            true,
            "The link number shown as [n], 1 or more.",
        )],
    },
    Spec {
        name: "todo_write",
        description: "Replace todo.md with the updated task list.",
        params: &[param(
            "content",
            Kind::Str,
            true,
            "The whole new task list in Markdown.",
        )],
    },
    Spec {
        name: "create_plan",
        description: "Make a step-by-step plan for a goal before acting on it.",
        params: &[param("goal", Kind::Str, true, "What the plan must achieve.")],
    },
    Spec {
        name: "finish",
        description: "End the run and report the result.",
        params: &[param("summary", Kind::Str, true, "What was done and the answer.")],
    },
];

/// The spec of tool `name`.
pub(crate) fn spec(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.name == name)
}

/// The OpenAI definition of one tool.
pub(crate) fn definition(spec: &Spec) -> ToolSpec {
    let mut properties = Map::new();
    for p in spec.params {
        properties.insert(p.name.to_string(), param_schema(p));
    }
    let required: Vec<&str> = spec.params.iter().filter(|p| p.required).map(|p| p.name).collect();
    let parameters = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    ToolSpec::function(spec.name, spec.description, parameters)
}

fn param_schema(p: &Param) -> Value {
    match p.kind {
        Kind::Str => json!({"type": "string", "description": p.description}),
        Kind::Bool => json!({"type": "boolean", "description": p.description}),
        // Tessera's masks cannot enforce integer bounds, so the range is stated
        // in the description and checked here (`check_object`), not put in the
        // schema as `minimum`/`maximum` keywords the engine would ignore.
        Kind::Int { .. } => json!({"type": "integer", "description": p.description}),
    }
}

/// Checks `arguments` against the spec of `tool`, then deserializes them.
pub(crate) fn parse_args<T: DeserializeOwned>(tool: &str, arguments: &Value) -> Result<T, ToolError> {
    let invalid = |why: String| ToolError(format!("invalid arguments for {tool}: {why}"));
    let spec = spec(tool).ok_or_else(|| invalid("no such tool".to_string()))?;
    let object = match arguments {
        Value::Object(map) => map.clone(),
        Value::Null => Map::new(),
        other => return Err(invalid(format!("expected a JSON object, got {}", type_name(other)))),
    };
    let checked = check_object(spec, object).map_err(invalid)?;
    serde_json::from_value(Value::Object(checked)).map_err(|e| invalid(e.to_string()))
}

/// Field-level checks; drops `null` optional fields.
fn check_object(spec: &Spec, mut object: Map<String, Value>) -> Result<Map<String, Value>, String> {
    if let Some(unknown) = object
        .keys()
        .find(|k| !spec.params.iter().any(|p| p.name == k.as_str()))
    {
        let expected: Vec<String> = spec.params.iter().map(|p| format!("`{}`", p.name)).collect();
        return Err(format!("unknown field `{unknown}`, expected {}", expected.join(", ")));
    }
    for p in spec.params {
        match object.get(p.name) {
            None | Some(Value::Null) if p.required => return Err(format!("missing field `{}`", p.name)),
            None => {}
            Some(Value::Null) => {
                object.remove(p.name);
            }
            Some(value) => check_value(p, value)?,
        }
    }
    Ok(object)
}

fn check_value(p: &Param, value: &Value) -> Result<(), String> {
    let ok = match p.kind {
        Kind::Str => value.is_string(),
        Kind::Bool => value.is_boolean(),
        Kind::Int { min, max } => value.as_u64().is_some_and(|n| n >= min && max.is_none_or(|m| n <= m)),
    };
    if ok {
        return Ok(());
    }
    let expected = match p.kind {
        Kind::Str => "a string".to_string(),
        Kind::Bool => "true or false".to_string(),
        Kind::Int { min, max: Some(max) } => format!("an integer from {min} to {max}"),
        Kind::Int { min, max: None } => format!("an integer of at least {min}"),
    };
    Err(format!("field `{}` must be {expected}, got {value}", p.name))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Read {
        path: String,
        #[serde(default)]
        start_line: Option<usize>,
    }

    fn check(arguments: Value, expect: Result<Read, &str>) {
        let got = parse_args::<Read>("file_read", &arguments);
        match (got, expect) {
            (Ok(g), Ok(e)) => assert_eq!(g, e),
            (Err(g), Err(e)) => assert_eq!(g.0, format!("invalid arguments for file_read: {e}")),
            (g, e) => panic!("{arguments}: got {g:?}, expected {e:?}"),
        }
    }

    #[test]
    fn arguments_are_checked_field_by_field() {
        let read = |start_line| Read {
            path: "a.md".into(),
            start_line,
        };
        check(json!({"path": "a.md"}), Ok(read(None)));
        check(json!({"path": "a.md", "start_line": 3}), Ok(read(Some(3))));
        check(json!({"path": "a.md", "start_line": null}), Ok(read(None)));
        check(json!({}), Err("missing field `path`"));
        check(json!({"path": null}), Err("missing field `path`"));
        check(
            json!({"path": "a", "line": 1}),
            Err("unknown field `line`, expected `path`, `start_line`"),
        );
        check(
            json!({"path": "a", "start_line": 0}),
            Err("field `start_line` must be an integer of at least 1, got 0"),
        );
        check(
            json!({"path": "a", "start_line": "2"}),
            Err("field `start_line` must be an integer of at least 1, got \"2\""),
        );
        check(json!({"path": 5}), Err("field `path` must be a string, got 5"));
        check(json!([1]), Err("expected a JSON object, got an array"));
    }

    #[test]
    fn bounded_integers_name_both_limits() {
        let err = parse_args::<Value>("shell_exec", &json!({"command": "ls", "timeout_secs": 301})).unwrap_err();
        assert_eq!(
            err.0,
            "invalid arguments for shell_exec: field `timeout_secs` must be an integer from 1 to 300, got 301"
        );
    }

    #[test]
    fn definitions_state_the_limits() {
        let def = serde_json::to_value(definition(spec("shell_exec").unwrap())).unwrap();
        let timeout = &def["function"]["parameters"]["properties"]["timeout_secs"];
        assert!(timeout["description"].as_str().unwrap().contains("1 to 300"));
        assert!(
            timeout.get("minimum").is_none(),
            "bounds are checked by the harness, not left to masks"
        );
        assert_eq!(def["function"]["parameters"]["required"], json!(["command"]));
        let read = serde_json::to_value(definition(spec("file_read").unwrap())).unwrap();
        let start = &read["function"]["parameters"]["properties"]["start_line"];
        assert!(start["description"].as_str().unwrap().contains("1 or more"));
    }
}
