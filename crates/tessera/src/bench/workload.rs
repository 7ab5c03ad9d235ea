//! Deterministic prompts for the TTFT benchmarks: filler prose of a given token
//! length, and an agent transcript (a system prompt with ~20 tool schemas, then
//! turns that append a tool call and a tool result), rendered as ChatML.

use anyhow::Result;
use tessera_model::Tokenizer;

const WORDS: &[&str] = &[
    "the", "agent", "reads", "file", "config", "module", "returns", "error", "value", "request", "cache", "token",
    "block", "server", "client", "parses", "writes", "result", "schema", "field", "list", "path", "search", "browser",
    "shell", "command", "output", "plan", "step", "update", "check", "test", "build", "report", "memory", "index",
    "query", "answer", "context", "window", "prefix", "model", "layer",
];

/// `len` tokens of deterministic prose; `seed` makes different texts.
pub fn filler(tokenizer: &Tokenizer, seed: u64, len: usize) -> Result<Vec<u32>> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut text = String::new();
    let mut tokens = Vec::new();
    while tokens.len() < len {
        for i in 0..64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push_str(WORDS[(state % WORDS.len() as u64) as usize]);
            text.push_str(if i % 12 == 11 { ". " } else { " " });
        }
        tokens = tokenizer.encode(&text)?;
    }
    tokens.truncate(len);
    Ok(tokens)
}

/// One tool schema line, sorted keys (as the server will render them).
fn tool_schema(name: &str, description: &str, params: &[(&str, &str)]) -> String {
    let properties: Vec<String> = params
        .iter()
        .map(|(p, t)| format!("\"{p}\": {{\"description\": \"The {p}.\", \"type\": \"{t}\"}}"))
        .collect();
    let required: Vec<String> = params.iter().map(|(p, _)| format!("\"{p}\"")).collect();
    format!(
        "{{\"function\": {{\"description\": \"{description}\", \"name\": \"{name}\", \"parameters\": {{\"properties\": {{{}}}, \"required\": [{}], \"type\": \"object\"}}}}, \"type\": \"function\"}}",
        properties.join(", "),
        required.join(", ")
    )
}

/// A tool: name, description, (parameter, JSON type) pairs.
type ToolSpec = (&'static str, &'static str, &'static [(&'static str, &'static str)]);

const TOOLS: &[ToolSpec] = &[
    (
        "file_read",
        "Read a file of the workspace, at most 2000 lines per call.",
        &[("path", "string"), ("offset", "integer")],
    ),
    (
        "file_write",
        "Write a file of the workspace, replacing its content.",
        &[("path", "string"), ("content", "string")],
    ),
    (
        "file_list",
        "List the entries of a directory of the workspace.",
        &[("path", "string")],
    ),
    (
        "file_search",
        "Search the workspace for a regular expression.",
        &[("pattern", "string"), ("path", "string")],
    ),
    (
        "shell_exec",
        "Run a shell command in the workspace with a timeout.",
        &[("command", "string"), ("timeout", "integer")],
    ),
    (
        "shell_view",
        "Show the output of a running shell command.",
        &[("id", "string")],
    ),
    (
        "browser_open",
        "Open a local HTML or Markdown page.",
        &[("url", "string")],
    ),
    ("browser_find", "Find text on the open page.", &[("query", "string")]),
    (
        "browser_follow",
        "Follow a link of the open page.",
        &[("link", "integer")],
    ),
    (
        "todo_write",
        "Rewrite todo.md with the current plan.",
        &[("items", "string")],
    ),
    (
        "create_plan",
        "Ask the planner for a plan of 2 to 6 steps.",
        &[("goal", "string")],
    ),
    (
        "finish",
        "Finish the task with a final answer.",
        &[("answer", "string")],
    ),
    ("git_status", "Show the working tree status.", &[("path", "string")]),
    ("git_diff", "Show changes between commits.", &[("rev", "string")]),
    (
        "git_commit",
        "Record changes to the repository.",
        &[("message", "string")],
    ),
    (
        "http_get",
        "Fetch a page from the local docs server.",
        &[("url", "string")],
    ),
    (
        "calc_eval",
        "Evaluate an arithmetic expression.",
        &[("expression", "string")],
    ),
    (
        "memory_store",
        "Store a note for later turns.",
        &[("key", "string"), ("value", "string")],
    ),
    ("memory_recall", "Recall a stored note.", &[("key", "string")]),
    (
        "notify_user",
        "Send a short message to the user.",
        &[("message", "string")],
    ),
];

/// An agent transcript: the token prompt of each turn (each extends the previous).
pub struct Transcript {
    /// Prompt tokens per turn, turn 1 first.
    pub turns: Vec<Vec<u32>>,
    /// `replies[t]` = `turns[t]` followed by the assistant's tool call at that turn (the
    /// tokens a real agent loop would have decoded); `turns[t + 1]` starts with it.
    pub replies: Vec<Vec<u32>>,
}

/// A session: a ~`system_tokens` system prompt with the tool schemas (shared by
/// every session), a user task, then `turns` requests each appending a tool call
/// and a ~150-token tool result. `session` varies the task and results.
pub fn agent_transcript(tokenizer: &Tokenizer, session: u64, system_tokens: usize, turns: usize) -> Result<Transcript> {
    let tools: Vec<String> = TOOLS.iter().map(|(n, d, p)| tool_schema(n, d, p)).collect();
    let instructions = "You are a coding agent working offline in a local workspace. Call one tool per step. ";
    let header = format!(
        "<|im_start|>system\n{instructions}You may call these tools:\n<tools>\n{}\n</tools>\nTo call a tool, answer with <tool_call>\n{{\"arguments\": {{...}}, \"name\": \"...\"}}\n</tool_call>\n",
        tools.join("\n")
    );
    let mut system = tokenizer.encode(&header)?;
    let pad = system_tokens.saturating_sub(system.len() + 8);
    system.extend(filler(tokenizer, 7, pad)?); // the same guidance text for every session
    system.extend(tokenizer.encode("<|im_end|>\n")?);
    let task = format!("<|im_start|>user\nTask {session}: find why the build of module {session} fails and fix it.<|im_end|>\n<|im_start|>assistant\n");
    let mut prompt = system;
    prompt.extend(tokenizer.encode(&task)?);
    let mut out = vec![prompt.clone()];
    let mut replies = Vec::new();
    for turn in 1..turns {
        // The assistant's reply (what the model generates at this turn), then the tool's answer.
        let reply = format!(
            "<tool_call>\n{{\"arguments\": {{\"offset\": 0, \"path\": \"src/module_{session}_{turn}.rs\"}}, \"name\": \"file_read\"}}\n</tool_call>"
        );
        prompt.extend(tokenizer.encode(&reply)?);
        replies.push(prompt.clone());
        prompt.extend(tokenizer.encode("<|im_end|>\n<|im_start|>user\n<tool_response>\n")?);
        prompt.extend(filler(tokenizer, 1000 * session + turn as u64, 150)?);
        prompt.extend(tokenizer.encode("\n</tool_response><|im_end|>\n<|im_start|>assistant\n")?);
        out.push(prompt.clone());
    }
    Ok(Transcript { turns: out, replies })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> Tokenizer {
        let smollm2 = tessera_model::shipped_model("smollm2")
            .map(|m| m.file)
            .unwrap_or_default();
        let path = crate::model_files::models_dir().join(smollm2);
        assert!(
            path.is_file(),
            "the real model is missing at {}: run scripts/fetch-model.sh",
            path.display()
        );
        tessera_model::GgufSource::open(&path).unwrap().tokenizer().unwrap()
    }

    #[test]
    fn filler_has_the_requested_length_and_depends_on_the_seed() {
        let t = tokenizer();
        assert_eq!(filler(&t, 1, 300).unwrap().len(), 300);
        assert_ne!(filler(&t, 1, 50).unwrap(), filler(&t, 2, 50).unwrap());
        assert_eq!(filler(&t, 1, 50).unwrap(), filler(&t, 1, 50).unwrap());
    }

    #[test]
    fn transcripts_grow_append_only_and_sessions_share_the_system_prompt() {
        let t = tokenizer();
        let a = agent_transcript(&t, 1, 2048, 4).unwrap();
        let b = agent_transcript(&t, 2, 2048, 4).unwrap();
        for (t, reply) in a.replies.iter().enumerate() {
            assert!(reply.starts_with(&a.turns[t]) && a.turns[t + 1].starts_with(reply));
            assert!((20..60).contains(&(reply.len() - a.turns[t].len())), "a tool call");
        }
        for pair in a.turns.windows(2) {
            assert!(pair[1].starts_with(&pair[0]), "each turn extends the previous prompt");
            let added = pair[1].len() - pair[0].len();
            assert!(
                (180..=260).contains(&added),
                "a turn adds a call and a ~150-token result, got {added}"
            );
        }
        let shared = a.turns[0].iter().zip(&b.turns[0]).take_while(|(x, y)| x == y).count();
        assert!(
            (2040..2068).contains(&shared),
            "sessions share the ~2k system prompt, got {shared}"
        );
    }
}
