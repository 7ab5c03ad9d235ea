//! The context the model sees, kept so that every request starts with the
//! previous request's exact messages:
//!
//! - the system prompt and tool list are fixed at the start of the run;
//! - messages are only appended (the one exception, compaction, is explicit
//!   and counted) and serialized deterministically;
//! - failed calls and their error text stay in;
//! - each observation ends with `todo.md`, and each answered turn with the
//!   task itself (`Now do the task: …`): recitation, so the goal is always the
//!   last thing the model read;
//! - an observation identical to an earlier one is worded slightly
//!   differently, so the model does not fall into a few-shot rut; the
//!   variation only ever touches the new message, never the cached prefix.

use crate::backend::ChatCall;
use std::collections::HashMap;
use tessera_api::openai::{ChatCompletionRequest, Message, Role, ToolCallSpec, ToolChoiceSpec, ToolSpec};

/// Notes that set a repeated observation apart, used in turn.
const REPEAT_NOTES: [&str; 3] = [
    "(same result as an earlier call)",
    "(unchanged from before)",
    "(identical to a previous result)",
];

/// Index of the first history message (after the system prompt and the task).
const HISTORY_START: usize = 2;

/// The append-only message list of one run.
#[derive(Debug, Clone)]
pub struct Context {
    messages: Vec<Message>,
    seen: HashMap<String, usize>,
    compactions: usize,
}

impl Context {
    /// A context holding the system prompt and the task.
    pub fn new(system: &str, task: &str) -> Self {
        Self {
            messages: vec![Message::system(system), Message::user(task)],
            seen: HashMap::new(),
            compactions: 0,
        }
    }

    /// Every message, in order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Times the history was compacted.
    pub fn compactions(&self) -> usize {
        self.compactions
    }

    /// The assistant's free-text reply.
    pub fn push_reply(&mut self, text: &str) {
        self.messages.push(Message::assistant(text));
    }

    /// The assistant's calls (with any text before them).
    pub fn push_calls(&mut self, content: &str, calls: &[ChatCall]) {
        let calls = calls
            .iter()
            .map(|c| ToolCallSpec::new(&c.id, &c.name, &c.arguments))
            .collect();
        self.messages.push(Message::assistant_calls(content, calls));
    }

    /// The result of `call`, worded apart if the same result came before, with
    /// `todo` recited after it when there is one.
    pub fn push_observation(&mut self, call: &ChatCall, result: &str, todo: Option<&str>) {
        let repeats = self.seen.entry(format!("{}\0{result}", call.name)).or_insert(0);
        let mut text = match *repeats {
            0 => result.to_string(),
            n => format!("{} {result}", REPEAT_NOTES[(n - 1) % REPEAT_NOTES.len()]),
        };
        *repeats += 1;
        if let Some(todo) = todo.map(str::trim_end).filter(|t| !t.trim().is_empty()) {
            text.push_str("\n\n[todo.md]\n");
            text.push_str(todo);
        }
        self.messages.push(Message::tool(&call.id, text));
    }

    /// The task again, as the user's words after the results: the last thing
    /// the model reads before its next call.
    pub fn push_task_reminder(&mut self, task: &str) {
        self.messages.push(Message::user(format!("Now do the task: {task}")));
    }

    /// A note from the harness (e.g. why no call was made).
    pub fn push_note(&mut self, text: &str) {
        self.messages.push(Message::user(format!("[harness] {text}")));
    }

    /// The chat request for the next turn.
    pub fn request(
        &self,
        tools: &[ToolSpec],
        tool_choice: &ToolChoiceSpec,
        max_tokens: usize,
        temperature: f32,
        seed: u64,
    ) -> ChatCompletionRequest {
        ChatCompletionRequest {
            tools: Some(tools.to_vec()),
            tool_choice: Some(tool_choice.clone()),
            parallel_tool_calls: Some(false),
            max_tokens: Some(max_tokens as u64),
            temperature: Some(temperature),
            seed: Some(seed),
            ..ChatCompletionRequest::new(self.messages.clone())
        }
    }

    /// Characters in messages from `index` on (to estimate tokens not yet
    /// counted by the server).
    pub fn chars_from(&self, index: usize) -> usize {
        (self.messages.iter().skip(index))
            .map(|m| serde_json::to_string(m).map_or(0, |text| text.len()))
            .sum()
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Never true: the system prompt and task are always there.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Replace the history before the last `keep_turns` (at least 1) assistant turns with
    /// `checkpoint`. A cut falls only before an assistant message, so a call
    /// and its results stay on the same side. Returns the number of messages
    /// dropped (0 when there is nothing older to drop).
    pub fn compact(&mut self, checkpoint: &str, keep_turns: usize) -> usize {
        let turn_starts: Vec<usize> = (HISTORY_START..self.messages.len())
            .filter(|&i| self.messages[i].role == Role::Assistant)
            .collect();
        let keep = keep_turns.max(1);
        if turn_starts.len() <= keep {
            return 0;
        }
        let cut = turn_starts[turn_starts.len() - keep];
        let dropped = cut - HISTORY_START;
        let tail = self.messages.split_off(cut);
        self.messages.truncate(HISTORY_START);
        self.messages.push(Message::user(checkpoint));
        self.messages.extend(tail);
        self.compactions += 1;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use tessera_api::openai::ToolChoiceMode;

    /// The messages as the JSON a server reads.
    fn sent(context: &Context) -> Vec<Value> {
        context
            .messages()
            .iter()
            .map(|m| serde_json::to_value(m).unwrap())
            .collect()
    }

    fn call(id: &str, name: &str) -> ChatCall {
        ChatCall {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        }
    }

    fn turn(context: &mut Context, id: &str, result: &str) {
        context.push_calls("", &[call(id, "file_read")]);
        context.push_observation(&call(id, "file_read"), result, None);
    }

    #[test]
    fn each_request_extends_the_previous_one() {
        let tools = vec![ToolSpec::function("finish", "", json!({"type": "object"}))];
        let auto = ToolChoiceSpec::mode(ToolChoiceMode::Auto);
        let mut context = Context::new("sys", "task");
        let request = |context: &Context| serde_json::to_value(context.request(&tools, &auto, 8, 0.0, 1)).unwrap();
        let mut previous = request(&context);
        for i in 0..5 {
            turn(&mut context, &format!("call_{i}"), &format!("result {i}"));
            let next = request(&context);
            let before = previous["messages"].as_array().unwrap();
            assert_eq!(&next["messages"].as_array().unwrap()[..before.len()], &before[..]);
            assert_eq!(next["tools"], previous["tools"], "the tool list never changes");
            previous = next;
        }
        assert_eq!(
            serde_json::to_string(&previous).unwrap(),
            serde_json::to_string(&request(&context)).unwrap(),
            "serialization is deterministic"
        );
    }

    #[test]
    fn repeated_observations_are_worded_apart_and_errors_stay() {
        let mut context = Context::new("sys", "task");
        for i in 0..5 {
            turn(&mut context, &format!("c{i}"), "error: no such file");
        }
        let sent = sent(&context);
        let texts: Vec<&str> = sent[2..]
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(texts[0], "error: no such file");
        assert_eq!(texts[1], "(same result as an earlier call) error: no such file");
        assert_eq!(texts[2], "(unchanged from before) error: no such file");
        assert_ne!(texts[1], texts[2]);
        assert_eq!(texts[4], texts[1], "the notes rotate deterministically");
        assert!(
            texts.iter().all(|t| t.ends_with("error: no such file")),
            "the error text itself stays"
        );
    }

    #[test]
    fn todo_is_recited_last() {
        let mut context = Context::new("sys", "task");
        context.push_calls("", &[call("a", "file_read")]);
        context.push_observation(&call("a", "file_read"), "hello", Some("- [ ] write out.txt\n"));
        let last = sent(&context).last().unwrap()["content"].as_str().unwrap().to_string();
        assert_eq!(last, "hello\n\n[todo.md]\n- [ ] write out.txt");
        context.push_calls("", &[call("b", "file_read")]);
        context.push_observation(&call("b", "file_read"), "x", Some("  \n"));
        assert_eq!(
            sent(&context).last().unwrap()["content"],
            "x",
            "an empty todo is not recited"
        );
    }

    #[test]
    fn compaction_keeps_calls_with_their_results() {
        let mut context = Context::new("sys", "task");
        context.push_reply("I will read it.");
        for i in 0..6 {
            turn(&mut context, &format!("c{i}"), &format!("r{i}"));
            if i == 2 {
                context.push_note("no call was made");
            }
        }
        let dropped = context.compact("CHECKPOINT", 2);
        let messages = sent(&context);
        assert_eq!(dropped, 1 + 2 * 4 + 1, "reply, four turns and the note");
        assert_eq!(messages[0]["content"], "sys");
        assert_eq!(messages[1]["content"], "task");
        assert_eq!(messages[2]["content"], "CHECKPOINT");
        assert_eq!(messages.len(), 3 + 4);
        assert_eq!(messages[3]["role"], "assistant");
        for pair in messages[3..].chunks(2) {
            assert_eq!(pair[0]["tool_calls"][0]["id"], pair[1]["tool_call_id"]);
        }
        assert_eq!(context.compactions(), 1);
        // A second compaction replaces the first checkpoint.
        turn(&mut context, "c6", "r6");
        context.compact("CHECKPOINT 2", 1);
        let messages = sent(&context);
        let contents: Vec<&Value> = messages.iter().map(|m| &m["content"]).collect();
        assert_eq!(contents[2], "CHECKPOINT 2");
        assert!(!contents.contains(&&json!("CHECKPOINT")));
        assert_eq!(context.messages().len(), 5);
        assert_eq!(Context::new("s", "t").compact("x", 2), 0, "nothing to drop");
    }
}
