//! A recorded agent run for `bench decode`: tasks whose second turn writes a
//! file the first turn read (a copy, a one-line edit, a rename), as an agent
//! harness sends them: a system prompt, the task, the assistant's `file_read`
//! call and the tool's result. Each turn's request is built through the same
//! typed core as the server's (chat template, tools in the prompt, the
//! `tool_choice` constraint), so what the engine decodes is what an agent's
//! request makes it decode.

use crate::tool_args::choice_spec;
use anyhow::{anyhow, Result};
use tessera_api::openai::convert::{parse_choice, tool_defs};
use tessera_api::openai::ToolSpec;
use tessera_api::{chat_job, Api, ChatRequest, Endpoint, Message, PastArguments, PastCall};
use tessera_engine::GenerateRequest;

/// One replayed turn: its name and the engine request it makes.
pub struct AgentTurn {
    pub name: &'static str,
    pub request: GenerateRequest,
}

const SYSTEM: &str = "You are a coding agent working offline in a local workspace. Use the tools to \
read and write files; call one tool per step. When you write a file, write its whole content.";

const NOTES: &str = "# Release notes\n\n## 0.4.0\n- The parser accepts \"trailing\" commas in arrays.\n\
- Calls stream their arguments as they are generated.\n- `--max-draft` sets the longest draft.\n\n\
## 0.3.2\n- Fixed a crash when the cache directory was read-only.\n- The server answers 400, not 500, \
for a malformed tool schema.\n";

const CONFIG: &str = "[server]\nhost = \"127.0.0.1\"\nport = 8080\nworkers = 2\n\n[cache]\n\
directory = \"/var/cache/tessera\"\nmax_tokens = 65536\nsave_on_exit = true\n\n[log]\nlevel = \"warn\"\n\
file = \"/var/log/tessera.log\"\n";

const MATH: &str = "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    return a + b\n\n\n\
def mean(values):\n    if not values:\n        raise ValueError(\"mean of an empty list\")\n    \
return add(sum(values), 0) / len(values)\n\n\nif __name__ == \"__main__\":\n    print(add(2, 3), mean([1, 2, 3]))\n";

/// (name, task, file read, its content)
const TASKS: &[(&str, &str, &str, &str)] = &[
    (
        "copy",
        "Make a backup of NOTES.md: write its exact content to NOTES.bak.md.",
        "NOTES.md",
        NOTES,
    ),
    (
        "edit",
        "In config.toml, change the server port to 9090 and keep everything else as it is.",
        "config.toml",
        CONFIG,
    ),
    (
        "rename",
        "In math_utils.py, rename the function add to plus, its uses included.",
        "math_utils.py",
        MATH,
    ),
];

fn tools() -> Result<Vec<ToolSpec>> {
    let json = serde_json::json!([
        {"type": "function", "function": {"name": "file_read", "description": "Read a file of the workspace.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
        {"type": "function", "function": {"name": "file_write",
            "description": "Write a file of the workspace, replacing its whole content.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"]}}},
        {"type": "function", "function": {"name": "finish", "description": "Finish the task with a short answer.",
            "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}},
    ]);
    Ok(serde_json::from_value(json)?)
}

/// The second turn of every task (after the `file_read` call and its
/// result), under `tool_choice` `auto` as harnesses send it, greedy, at most
/// `max_tokens` tokens.
pub fn agent_turns(api: &Api, max_tokens: usize) -> Result<Vec<AgentTurn>> {
    let tools = tool_defs(&tools()?);
    let auto = parse_choice(&choice_spec("auto"), "tool_choice").map_err(|e| anyhow!("tool_choice auto: {e}"))?;
    TASKS
        .iter()
        .map(|&(name, task, path, content)| {
            let read = PastCall {
                id: Some(format!("call_{name}_1")),
                name: "file_read".into(),
                arguments: PastArguments::Text(serde_json::json!({ "path": path }).to_string()),
                field: "messages[2].tool_calls[0]".into(),
            };
            let messages = vec![
                Message::System(SYSTEM.into()),
                Message::User(task.into()),
                Message::Assistant {
                    text: String::new(),
                    calls: vec![read],
                },
                Message::Tool {
                    text: content.into(),
                    call_id: Some(format!("call_{name}_1")),
                    field: "messages[3].tool_call_id".into(),
                },
            ];
            let request = ChatRequest {
                max_tokens: Some(max_tokens as u64),
                sampling: super::decode::greedy(),
                ..ChatRequest::new(messages).with_tools(tools.clone(), Some(auto.clone()))
            };
            let job = chat_job(api, Endpoint::Cli, request).map_err(|e| anyhow!("building the {name} turn: {e}"))?;
            Ok(AgentTurn {
                name,
                request: job.request,
            })
        })
        .collect()
}
