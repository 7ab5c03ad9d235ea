//! The planner behind `create_plan`: a separate model request at temperature
//! 0 with its own prompt, whose answer must be `{"mode":"simple"}` or
//! `{"mode":"complex","plan":[2–6 steps]}`. The answer is validated, retried
//! with the validation error when it fails, and formatted by [`format_plan`],
//! the one function that turns a plan into the text the agent sees.

use crate::tools::Family;
use serde_json::{json, Value};
use tessera_api::openai::wire::ResponseFormat;
use tessera_api::openai::{ChatCompletionRequest, Message};

/// Fewest steps a complex plan has.
pub const MIN_STEPS: usize = 2;
/// Most steps a complex plan has.
pub const MAX_STEPS: usize = 6;
/// Longest step, in characters.
pub const MAX_STEP_CHARS: usize = 300;
/// Planner requests before giving up on a plan.
pub const MAX_ATTEMPTS: usize = 3;

/// The planner's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// One or two calls do it: no plan.
    Simple,
    /// Steps to take in order, each with the tool family it needs.
    Complex(Vec<PlanStep>),
}

/// One step of a complex plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanStep {
    /// What to do, as the planner wrote it.
    pub text: String,
    /// The family whose tools do it.
    pub family: Family,
    /// The one tool of that family the step's verb names, if it names one
    /// ("read" → `file_read`, "find" → `file_search`, …).
    pub tool: Option<&'static str>,
}

impl PlanStep {
    /// A step from its text, its family and tool read from its words.
    pub fn new(text: &str, allow_shell: bool) -> Self {
        let family = step_family(text, allow_shell);
        Self {
            text: text.to_string(),
            family,
            tool: step_tool(text, family),
        }
    }
}

/// Parse and validate the planner's answer; the error says what is wrong in
/// words the retry prompt can show the model.
pub fn parse_plan(answer: &str, allow_shell: bool) -> Result<Plan, String> {
    let value: Value =
        serde_json::from_str(answer.trim()).map_err(|e| format!("the answer is not valid JSON ({e})"))?;
    let object = value.as_object().ok_or("the answer must be a JSON object")?;
    if let Some(key) = object.keys().find(|k| *k != "mode" && *k != "plan") {
        return Err(format!("unexpected key `{key}` (only `mode` and `plan`)"));
    }
    match (object.get("mode").and_then(Value::as_str), object.get("plan")) {
        (Some("simple"), None) => Ok(Plan::Simple),
        (Some("simple"), Some(_)) => Err("mode `simple` takes no `plan`".into()),
        (Some("complex"), Some(plan)) => complex_steps(plan, allow_shell).map(Plan::Complex),
        (Some("complex"), None) => Err("mode `complex` needs a `plan` list".into()),
        (Some(other), _) => Err(format!("mode must be `simple` or `complex`, not `{other}`")),
        (None, _) => Err("missing string field `mode`".into()),
    }
}

fn complex_steps(plan: &Value, allow_shell: bool) -> Result<Vec<PlanStep>, String> {
    let steps = plan.as_array().ok_or("`plan` must be a list of strings")?;
    if !(MIN_STEPS..=MAX_STEPS).contains(&steps.len()) {
        return Err(format!(
            "`plan` has {} steps; a complex plan has {MIN_STEPS} to {MAX_STEPS} (use mode `simple` for less)",
            steps.len()
        ));
    }
    steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let text = step.as_str().map(str::trim).unwrap_or_default();
            if text.is_empty() {
                return Err(format!("plan[{i}] must be a non-empty string"));
            }
            if text.chars().count() > MAX_STEP_CHARS {
                return Err(format!("plan[{i}] is longer than {MAX_STEP_CHARS} characters"));
            }
            Ok(PlanStep::new(text, allow_shell))
        })
        .collect()
}

/// The family a step needs, from its words: commands → shell (when allowed),
/// web pages and links → browser, everything else → files.
pub fn step_family(step: &str, allow_shell: bool) -> Family {
    let lower = step.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).collect();
    let has = |list: &[&str]| list.iter().any(|w| words.contains(w));
    if allow_shell && has(&["run", "execute", "command", "shell", "compile", "install", "test"]) {
        Family::Shell
    } else if has(&[
        "browse", "browser", "page", "link", "links", "url", "website", "html", "follow",
    ]) {
        Family::Browser
    } else {
        Family::File
    }
}

/// Verbs that name one tool, tried on a step's words in order.
const VERBS: &[(&[&str], &str)] = &[
    (
        &["write", "save", "copy", "create", "put", "append", "store"],
        "file_write",
    ),
    (&["search", "find", "grep", "locate", "which"], "file_search"),
    (&["list", "explore"], "file_list"),
    (&["follow", "click"], "browser_follow"),
    (&["open", "visit", "browse"], "browser_open"),
    (&["read", "view", "look", "check", "inspect", "get"], "file_read"),
    (&["run", "execute", "compile", "install", "test"], "shell_exec"),
];

/// The first verb of `step` that names a tool of `family` (`read` on a
/// browser step opens the page).
pub fn step_tool(step: &str, family: Family) -> Option<&'static str> {
    let lower = step.to_lowercase();
    for word in lower.split(|c: char| !c.is_alphanumeric()) {
        for (verbs, tool) in VERBS {
            if !verbs.contains(&word) {
                continue;
            }
            let tool = match (family, *tool) {
                (Family::Browser, "file_read") => "browser_open",
                (Family::Browser, "file_search") => "browser_find",
                (_, tool) => tool,
            };
            if Family::of(tool) == Some(family) {
                return Some(tool);
            }
        }
    }
    None
}

/// The planner's request: its own system prompt, the task, temperature 0, and
/// the answer held to the contract's shape by a JSON schema (servers that do
/// not enforce it are caught by [`parse_plan`]). `retry` is the last
/// attempt's answer and what was wrong with it.
pub fn planner_request(task: &str, goal: &str, retry: Option<(&str, &str)>) -> ChatCompletionRequest {
    let mut user = format!("Task: {task}\nGoal: {goal}");
    if let Some((answer, error)) = retry {
        user.push_str(&format!(
            "\n\nYour last answer was {answer}\nIt was rejected: {error}. Answer again."
        ));
    }
    ChatCompletionRequest {
        temperature: Some(0.0),
        max_tokens: Some(256),
        response_format: Some(ResponseFormat::json_schema("plan", plan_schema())),
        ..ChatCompletionRequest::new(vec![Message::system(PLANNER_PROMPT), Message::user(user)])
    }
}

const PLANNER_PROMPT: &str = "You plan tasks for an agent that works on files in a folder. \
Answer with JSON only. If one tool call finishes the task, answer {\"mode\":\"simple\"}. \
Otherwise answer {\"mode\":\"complex\",\"plan\":[...]} with 2 to 6 short steps, each one action \
that names its file: read a file, write a file, search files, open a page. \
Example: for \"Read a.txt and copy its title to b.txt\" answer \
{\"mode\":\"complex\",\"plan\":[\"Read a.txt\",\"Write the title to b.txt\"]}";

fn plan_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["simple", "complex"]},
            "plan": {"type": "array", "items": {"type": "string"}, "minItems": MIN_STEPS, "maxItems": MAX_STEPS},
        },
        "required": ["mode"],
        "additionalProperties": false,
    })
}

/// The text the agent sees for a plan (the `create_plan` result, and any
/// path that forces a plan): the steps with their families, then an "execute
/// now" block naming the tools for each kind of step.
pub fn format_plan(plan: &Plan, allow_shell: bool) -> String {
    let mut text = match plan {
        Plan::Simple => "Plan: simple, no steps needed.\n".to_string(),
        Plan::Complex(steps) => {
            let mut text = format!("Plan: {} steps.\n", steps.len());
            for (i, step) in steps.iter().enumerate() {
                let kind = match step.tool {
                    Some(tool) => format!("use {tool}"),
                    None => format!("{} step", family_label(step.family)),
                };
                text.push_str(&format!("{}. {} ({kind})\n", i + 1, step.text));
            }
            text
        }
    };
    text.push_str("Execute now, one tool call per turn:\n");
    let tools = |family: Family| family.tool_names().join(", ");
    text.push_str(&format!("- file steps: {}\n", tools(Family::File)));
    text.push_str(&format!("- browser steps: {}\n", tools(Family::Browser)));
    if allow_shell {
        text.push_str(&format!("- shell steps: {}\n", tools(Family::Shell)));
    } else {
        text.push_str("- shell steps: not allowed in this run\n");
    }
    if matches!(plan, Plan::Complex(_)) {
        text.push_str("- when a step is done: tick it in todo.md with todo_write (`- [x] <step>`)\n");
    }
    text.push_str("- when the task is done: finish, with a one-line summary");
    text
}

fn family_label(family: Family) -> &'static str {
    match family {
        Family::File => "file",
        Family::Shell => "shell",
        Family::Browser => "browser",
        Family::Todo => "todo",
        Family::Plan => "plan",
        Family::Finish => "finish",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(answer: &str, expect: Result<&[&str], &str>) {
        let got = parse_plan(answer, false);
        match (got, expect) {
            (Ok(Plan::Simple), Ok(steps)) => assert!(steps.is_empty(), "{answer}: got simple"),
            (Ok(Plan::Complex(got)), Ok(steps)) => {
                let got: Vec<&str> = got.iter().map(|s| s.text.as_str()).collect();
                assert_eq!(got, steps, "{answer}");
            }
            (Err(error), Err(part)) => assert!(error.contains(part), "{answer}: error `{error}` lacks `{part}`"),
            (got, expect) => panic!("{answer}: got {got:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn contract_accepts_and_rejects() {
        check(r#"{"mode":"simple"}"#, Ok(&[]));
        check(
            r#" {"mode": "complex", "plan": ["Read notes.md", "Write out.txt"]} "#,
            Ok(&["Read notes.md", "Write out.txt"]),
        );
        check(
            r#"{"mode":"complex","plan":["a","b","c","d","e","f"]}"#,
            Ok(&["a", "b", "c", "d", "e", "f"]),
        );
        check(r#"{"mode":"complex","plan":["only one"]}"#, Err("has 1 steps"));
        check(
            r#"{"mode":"complex","plan":["a","b","c","d","e","f","g"]}"#,
            Err("has 7 steps"),
        );
        check(r#"{"mode":"complex","plan":[]}"#, Err("has 0 steps"));
        check(r#"{"mode":"complex"}"#, Err("needs a `plan`"));
        check(r#"{"mode":"complex","plan":["a", 3]}"#, Err("plan[1]"));
        check(r#"{"mode":"complex","plan":["a", "  "]}"#, Err("plan[1]"));
        check(r#"{"mode":"complex","plan":"a, b"}"#, Err("list of strings"));
        check(r#"{"mode":"simple","plan":["a","b"]}"#, Err("takes no"));
        check(r#"{"mode":"easy"}"#, Err("not `easy`"));
        check(r#"{"plan":["a","b"]}"#, Err("missing string field `mode`"));
        check(r#"{"mode":"simple","why":"x"}"#, Err("unexpected key `why`"));
        check(r#"["simple"]"#, Err("JSON object"));
        check(r#"{"mode":"simple""#, Err("not valid JSON"));
        check("", Err("not valid JSON"));
        let long = format!(
            r#"{{"mode":"complex","plan":["{}","b"]}}"#,
            "x".repeat(MAX_STEP_CHARS + 1)
        );
        check(&long, Err("longer than"));
    }

    #[test]
    fn steps_get_families() {
        assert_eq!(step_family("Read notes.md", false), Family::File);
        assert_eq!(
            step_family("Open the docs page and follow the link", false),
            Family::Browser
        );
        assert_eq!(step_family("Run the tests", true), Family::Shell);
        assert_eq!(
            step_family("Run the tests", false),
            Family::File,
            "shell steps fall back to files when shell is off"
        );
    }

    #[test]
    fn verbs_name_one_tool_of_the_family() {
        let tool = |text: &str| PlanStep::new(text, true).tool;
        assert_eq!(tool("Read notes.md"), Some("file_read"));
        assert_eq!(tool("Write its first line to out.txt"), Some("file_write"));
        assert_eq!(tool("Find which file in docs/ mentions kiwi"), Some("file_search"));
        assert_eq!(tool("List the folder"), Some("file_list"));
        assert_eq!(tool("Open the docs page"), Some("browser_open"));
        assert_eq!(tool("Follow the first link"), Some("browser_follow"));
        assert_eq!(tool("Run the tests"), Some("shell_exec"));
        assert_eq!(tool("Think about it"), None);
        assert_eq!(
            PlanStep::new("Run the tests", false).tool,
            None,
            "no shell tool on a file step"
        );
    }

    #[test]
    fn format_names_each_step_family_and_the_tools() {
        let plan = parse_plan(
            r#"{"mode":"complex","plan":["Read notes.md","Open docs/index.html"]}"#,
            false,
        )
        .unwrap();
        let text = format_plan(&plan, false);
        assert!(
            text.starts_with(
                "Plan: 2 steps.\n1. Read notes.md (use file_read)\n2. Open docs/index.html (use browser_open)\n"
            ),
            "{text}"
        );
        let plan = parse_plan(r#"{"mode":"complex","plan":["Think hard","Answer"]}"#, false).unwrap();
        assert!(format_plan(&plan, false).starts_with("Plan: 2 steps.\n1. Think hard (file step)\n"));
        assert!(text.contains("Execute now"));
        assert!(text.contains("file_read, file_write"));
        assert!(text.contains("shell steps: not allowed"));
        assert!(format_plan(&Plan::Simple, true).contains("shell_exec, shell_view"));
    }

    #[test]
    fn retry_prompt_carries_the_error() {
        let body = planner_request("t", "g", Some(("{\"mode\":\"x\"}", "mode must be …")));
        let body = serde_json::to_value(body).unwrap();
        let user = body["messages"][1]["content"].as_str().unwrap();
        assert!(user.contains("rejected: mode must be …"));
        assert_eq!(body["temperature"], 0.0);
        assert_eq!(
            body["response_format"]["json_schema"]["schema"]["properties"]["plan"]["minItems"],
            MIN_STEPS
        );
    }
}
