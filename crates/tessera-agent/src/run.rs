//! The agent loop: ask the model for one step under the current tool policy,
//! run the call, append the observation, repeat until `finish`, the step
//! limit, or a model that keeps failing to call.

use crate::backend::{Backend, ChatCall, ChatOutcome};
use crate::budget::{cap, result_budget, CHARS_PER_TOKEN};
use crate::checkpoint::Checkpoint;
use crate::config::AgentConfig;
use crate::context::Context;
use crate::journal::Journal;
use crate::planner::{format_plan, parse_plan, planner_request, Plan, MAX_ATTEMPTS};
use crate::policy::{Phase, Policy, StepLeft, STEP_CALLS};
use crate::tools::{check_arguments, definitions, Family, Toolbox, HARNESS_DIR};
use crate::transcript::{CallRecord, RequestKind, Transcript, TurnRecord};
use crate::AgentError;
use serde_json::{json, Value};
use std::fmt;
use std::path::PathBuf;
use tessera_api::openai::{FinishReason, ToolSpec};

/// The fixed system prompt (part of the cached prefix of every request).
pub const SYSTEM_PROMPT: &str = "You are Tessera's offline agent. You do the user's task inside a workspace \
folder by calling tools, one call per turn. Paths are relative to the workspace root. After each tool result \
you see todo.md, the task's checklist. When the task is done, call finish with a one-line summary.";

/// Temperature of a request that follows two identical calls in a row: a
/// greedy small model repeats itself forever otherwise.
pub const RUT_TEMPERATURE: f32 = 0.8;
/// Turns in a row without a call before the run gives up.
pub const MAX_MISSES: usize = 3;
/// Longest `todo.md` recited after an observation, in characters.
pub const TODO_RECITE_CHARS: usize = 2_000;

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The model called `finish`.
    Finished {
        /// Its summary.
        summary: String,
    },
    /// Once the run had acted, the model answered in words (or ended its
    /// turn, `text` empty) instead of calling a tool.
    Answered {
        /// The answer.
        text: String,
    },
    /// `--max-steps` agent requests were made.
    StepLimit {
        /// The limit.
        steps: usize,
    },
    /// The model answered without a call too many times in a row.
    NoCall {
        /// How many times.
        misses: usize,
    },
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Finished { summary } => write!(f, "finished: {summary}"),
            Self::Answered { text } if text.is_empty() => {
                write!(f, "finished: the model ended its turn without a call")
            }
            Self::Answered { text } => write!(f, "finished with an answer: {text}"),
            Self::StepLimit { steps } => write!(f, "stopped: the step limit ({steps}) was reached before finish"),
            Self::NoCall { misses } => write!(f, "stopped: the model made no tool call {misses} times in a row"),
        }
    }
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Why it ended.
    pub stop: StopReason,
    /// Every model request, in order.
    pub turns: Vec<TurnRecord>,
    /// The transcript file.
    pub transcript: PathBuf,
    /// Times the history was compacted.
    pub compactions: usize,
}

/// One run's state.
pub struct Agent<'a> {
    backend: &'a mut dyn Backend,
    toolbox: Toolbox,
    config: AgentConfig,
    context: Context,
    policy: Policy,
    journal: Journal,
    transcript: Transcript,
    tools: Vec<ToolSpec>,
    turns: Vec<TurnRecord>,
    /// Planner records of the current turn, written after the turn's own.
    pending: Vec<TurnRecord>,
    /// Every tool call run so far (name, arguments), to tell a repeat.
    made: Vec<(String, Value)>,
    /// Prompt plus completion tokens of the last agent request, and the
    /// number of messages they cover (for the compaction estimate).
    counted: (usize, usize),
    steps: usize,
}

/// Run `config.task` in the toolbox's workspace against `backend`;
/// `on_turn` sees each request's record as it is written.
pub fn run(
    backend: &mut dyn Backend,
    toolbox: Toolbox,
    config: AgentConfig,
    on_turn: &mut dyn FnMut(&TurnRecord),
) -> Result<RunReport, AgentError> {
    config.validate()?;
    let transcript = Transcript::create(toolbox.jail())?;
    let mut agent = Agent {
        backend,
        context: Context::new(SYSTEM_PROMPT, &config.task),
        policy: Policy::new(config.allow_shell, &config.task),
        journal: Journal::default(),
        transcript,
        tools: definitions(),
        turns: Vec::new(),
        pending: Vec::new(),
        made: Vec::new(),
        counted: (0, 0),
        steps: 0,
        toolbox,
        config,
    };
    let stop = agent.run_loop(on_turn)?;
    Ok(RunReport {
        stop,
        transcript: agent.transcript.path().to_path_buf(),
        compactions: agent.context.compactions(),
        turns: agent.turns,
    })
}

impl Agent<'_> {
    fn run_loop(&mut self, on_turn: &mut dyn FnMut(&TurnRecord)) -> Result<StopReason, AgentError> {
        let mut misses = 0;
        loop {
            if self.steps == self.config.max_steps {
                return Ok(StopReason::StepLimit { steps: self.steps });
            }
            let compacted = self.compact_if_needed();
            let phase = self.policy.label();
            let choice = self.policy.tool_choice();
            let call_required = self.policy.call_required();
            let seed = self.config.seed.wrapping_add(self.steps as u64);
            let temperature = match self.in_rut() {
                true => self.config.temperature.max(RUT_TEMPERATURE),
                false => self.config.temperature,
            };
            let body = self
                .context
                .request(&self.tools, &choice, self.policy.max_tokens(), temperature, seed);
            let messages_sent = self.context.len();
            let turn = self.next_turn();
            let outcome = self.backend.chat(&body, &self.config.session)?;
            self.steps += 1;
            self.counted = match outcome.prompt_tokens {
                // A server that reports no usage: estimate everything from characters.
                0 => (self.tools_tokens(), 0),
                prompt => (prompt + outcome.completion_tokens, messages_sent),
            };
            // Once the run has acted and no plan step is open, an answer
            // without a call (words, or the end of the turn) ends the run.
            let answered = outcome.calls.is_empty() && !call_required;
            let (calls, stop) = if answered {
                if !outcome.content.is_empty() {
                    self.context.push_reply(&outcome.content);
                }
                self.journal
                    .record("answered without a call after acting: the run ends".into());
                let text = outcome.content.trim().to_string();
                (Vec::new(), Some(StopReason::Answered { text }))
            } else if outcome.calls.is_empty() {
                misses = self.no_call(&outcome, misses);
                let stop = (misses >= MAX_MISSES).then_some(StopReason::NoCall { misses });
                (Vec::new(), stop)
            } else {
                misses = 0;
                self.calls(&outcome, turn)?
            };
            let choice = serde_json::to_value(&choice).unwrap_or_default();
            let mut record = record(turn, RequestKind::Agent, phase, choice, &outcome, calls, compacted);
            record.temperature = temperature;
            record.new_tokens = self.new_tokens(&record);
            self.write(record, on_turn)?;
            for planner in std::mem::take(&mut self.pending) {
                self.write(planner, on_turn)?;
            }
            if let Some(stop) = stop {
                return Ok(stop);
            }
        }
    }

    /// An agent request's prompt tokens beyond the previous agent request's
    /// prompt and reply (`None` for the first, after a compaction, after a
    /// reply cut by the token limit, whose cut call stays out of the history,
    /// or from a server that reports no usage).
    fn new_tokens(&self, record: &TurnRecord) -> Option<usize> {
        let previous = self.turns.iter().rev().find(|t| t.kind == RequestKind::Agent)?;
        let before = previous.prompt_tokens + previous.completion_tokens;
        let replayed = previous.finish_reason != Some(FinishReason::Length);
        (replayed && !record.compacted && record.prompt_tokens > 0 && before > 0)
            .then(|| record.prompt_tokens.saturating_sub(before))
    }

    fn next_turn(&self) -> usize {
        self.turns.len() + 1 // planner records of the last turn are already written
    }

    /// Whether the last two agent turns made the same calls.
    fn in_rut(&self) -> bool {
        let mut agent_turns = self.turns.iter().rev().filter(|t| t.kind == RequestKind::Agent);
        let signature = |t: &TurnRecord| -> Vec<(String, Option<Value>)> {
            t.calls
                .iter()
                .map(|c| (c.name.clone(), serde_json::from_str(&c.arguments).ok()))
                .collect()
        };
        match (agent_turns.next(), agent_turns.next()) {
            (Some(a), Some(b)) => !a.calls.is_empty() && signature(a) == signature(b),
            _ => false,
        }
    }

    fn write(&mut self, record: TurnRecord, on_turn: &mut dyn FnMut(&TurnRecord)) -> Result<(), AgentError> {
        self.transcript.write(&record)?;
        on_turn(&record);
        self.turns.push(record);
        Ok(())
    }

    /// An answer without a call: a miss.
    fn no_call(&mut self, outcome: &ChatOutcome, misses: usize) -> usize {
        if !outcome.content.is_empty() {
            self.context.push_reply(&outcome.content);
        }
        self.context.push_note(&format!(
            "no tool call was made (finish reason: {}); call one of: {}",
            finish_word(outcome.finish_reason),
            self.policy.allowed().join(", ")
        ));
        misses + 1
    }

    /// Run every call of an answer and append the results. A call whose
    /// arguments are not JSON (from a server that does not mask), or the last
    /// call of an answer cut by the token limit (a masking server closes it
    /// validly, but its arguments are where the budget ran out, not what the
    /// model meant: a file's content cut short), stays out of the history;
    /// after the other calls' results, a note tells the model what went wrong.
    fn calls(
        &mut self,
        outcome: &ChatOutcome,
        turn: usize,
    ) -> Result<(Vec<CallRecord>, Option<StopReason>), AgentError> {
        let cut = outcome.finish_reason == Some(FinishReason::Length);
        let last = outcome.calls.len().saturating_sub(1);
        let (mut complete, mut unreadable) = (Vec::new(), Vec::new());
        for (i, call) in outcome.calls.iter().enumerate() {
            let closed_by_budget = cut && i == last;
            match !closed_by_budget && is_finished_json(&call.arguments) {
                true => complete.push(call.clone()),
                false => unreadable.push(call.clone()),
            }
        }
        if !complete.is_empty() {
            self.context.push_calls(&outcome.content, &complete);
        } else if !outcome.content.is_empty() {
            self.context.push_reply(&outcome.content);
        }
        let mut records = Vec::new();
        let mut stop = None;
        for call in &complete {
            let CallOutcome {
                observation: result,
                ok,
                finished,
            } = self.call(call, turn)?;
            let result = self.within_budget(result, turn, &call.name);
            let todo = self.todo();
            self.context.push_observation(call, &result, todo.as_deref());
            records.push(CallRecord {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                ok,
                result,
            });
            if let Some(summary) = finished {
                stop = Some(StopReason::Finished { summary });
                break; // calls after `finish` in the same answer do not run
            }
        }
        if stop.is_none() {
            for call in unreadable {
                records.push(self.unreadable_call(call, outcome.finish_reason));
            }
            self.context.push_task_reminder(&self.config.task);
        }
        Ok((records, stop))
    }

    /// A call whose arguments are not JSON or were cut: a failed attempt and a note.
    fn unreadable_call(&mut self, call: ChatCall, finish_reason: Option<FinishReason>) -> CallRecord {
        let error = match finish_reason {
            Some(FinishReason::Length) => format!(
                "error: the call to `{}` was cut off by the token limit before its arguments were complete; \
                 call it again with shorter arguments",
                call.name
            ),
            _ => format!(
                "error: the arguments of the call to `{}` are not valid JSON; call it again",
                call.name
            ),
        };
        self.after_call(&call.name, false);
        self.context.push_note(&error);
        CallRecord {
            name: call.name,
            arguments: call.arguments,
            ok: false,
            result: error,
        }
    }

    /// Run one call under the policy.
    fn call(&mut self, call: &ChatCall, turn: usize) -> Result<CallOutcome, AgentError> {
        let arguments = match parse_arguments(&call.arguments) {
            Ok(arguments) => arguments,
            Err(error) => {
                self.after_call(&call.name, false);
                return Ok(CallOutcome::failed(format!("error: {error}")));
            }
        };
        let allowed = self.policy.allowed();
        if !allowed.contains(&call.name.as_str()) {
            let error = format!(
                "error: `{}` is not allowed in this step ({}); allowed now: {}",
                call.name,
                self.policy.label(),
                if allowed.is_empty() {
                    "none (answer in words)".to_string()
                } else {
                    allowed.join(", ")
                }
            );
            self.journal.record_call(turn, &call.name, &arguments, false, &error);
            self.after_call(&call.name, false);
            return Ok(CallOutcome::failed(error));
        }
        if let (true, Err(error)) = (
            matches!(call.name.as_str(), "finish" | "create_plan"),
            check_arguments(&call.name, &arguments),
        ) {
            let error = format!("error: {error}");
            self.journal.record_call(turn, &call.name, &arguments, false, &error);
            return Ok(CallOutcome::failed(error));
        }
        let outcome = match call.name.as_str() {
            "finish" => {
                let summary = arguments["summary"].as_str().unwrap_or("").trim().to_string();
                CallOutcome {
                    observation: format!("finished: {summary}"),
                    ok: true,
                    finished: Some(summary),
                }
            }
            "create_plan" => {
                let goal = arguments["goal"].as_str().unwrap_or("").to_string();
                CallOutcome::succeeded(self.plan(&goal)?)
            }
            name => match self.toolbox.call(name, &arguments) {
                Ok(text) => CallOutcome::succeeded(text),
                Err(error) => CallOutcome::failed(format!("error: {error}")),
            },
        };
        let ok = outcome.ok;
        self.journal
            .record_call(turn, &call.name, &arguments, ok, &outcome.observation);
        if !matches!(call.name.as_str(), "create_plan" | "finish") {
            self.after_call(&call.name, ok);
            let made = (call.name.clone(), arguments);
            match self.made.contains(&made) {
                true => self.policy.rest(&call.name),
                false => {
                    self.policy.wake();
                    self.made.push(made);
                }
            }
        }
        if call.name == "todo_write" && ok {
            self.todo_rewritten();
        }
        Ok(outcome)
    }

    /// The policy counts a call; a step left unticked past its calls is journaled.
    fn after_call(&mut self, name: &str, ok: bool) {
        if let Some((step, why)) = self.policy.after_call(name, ok) {
            let text = &self.policy.steps()[step].text;
            let why = match why {
                StepLeft::NextStepBegun => "the next step's work began".to_string(),
                StepLeft::OutOfCalls => format!("{STEP_CALLS} calls without a tick"),
            };
            self.journal
                .record(format!("step {} left open ({why}): {text}", step + 1));
        }
    }

    /// A result over budget keeps head and tail; the whole goes to a file.
    fn within_budget(&mut self, result: String, turn: usize, tool: &str) -> String {
        // The file is named after a known tool only: a name is model output.
        let tool = if Family::of(tool).is_some() { tool } else { "unknown" };
        let saved_as = format!("{HARNESS_DIR}/results/turn-{turn}-{tool}.txt");
        let Some(capped) = cap(&result, result_budget(self.config.context_window), &saved_as) else {
            return result;
        };
        match self.save(&saved_as, &result) {
            Ok(()) => capped,
            Err(error) => {
                let unsaved = cap(&result, result_budget(self.config.context_window), "(nowhere)").unwrap_or_default();
                format!("{unsaved}\n(the whole result could not be saved: {error})")
            }
        }
    }

    /// Write a harness file inside the workspace, through the jail.
    fn save(&self, relative: &str, text: &str) -> Result<(), String> {
        let path = self.toolbox.jail().resolve_new("result", relative).map_err(|e| e.0)?;
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(|e| e.to_string())?;
        }
        std::fs::write(&path, text).map_err(|e| e.to_string())
    }

    /// Before the window fills (window − reserve), compact the history into a
    /// checkpoint. Returns whether it did.
    fn compact_if_needed(&mut self) -> bool {
        let (counted_tokens, counted_messages) = self.counted;
        let unseen = self.context.chars_from(counted_messages) / CHARS_PER_TOKEN;
        let estimate = counted_tokens + unseen + self.policy.max_tokens();
        if estimate + self.config.reserve_tokens <= self.config.context_window {
            return false;
        }
        let checkpoint = self.checkpoint().render();
        if self.context.compact(&checkpoint, self.config.keep_turns) == 0 {
            return false;
        }
        // Unknown until the server counts again: estimate everything.
        self.counted = (self.tools_tokens(), 0);
        self.journal.record("history compacted into this checkpoint".into());
        true
    }

    /// The tool list's size in tokens, estimated from its characters.
    fn tools_tokens(&self) -> usize {
        (self.tools.iter())
            .map(|t| serde_json::to_string(t).map_or(0, |text| text.len()))
            .sum::<usize>()
            / CHARS_PER_TOKEN
    }

    fn checkpoint(&self) -> Checkpoint {
        let mut constraints = vec![
            "every path stays inside the workspace".to_string(),
            format!(
                "{} of {} steps left",
                self.config.max_steps - self.steps,
                self.config.max_steps
            ),
        ];
        if !self.config.allow_shell {
            constraints.push("shell tools are disabled".into());
        }
        let open_items: Vec<String> = self
            .todo()
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- [ ] ").map(str::to_string))
            .collect();
        let next_step = match self.policy.phase() {
            Phase::Step { index, .. } => format!("plan step {}: {}", index + 1, self.policy.steps()[*index].text),
            Phase::Plan => "make a plan".into(),
            Phase::Act => "continue the task, or call finish when it is done".into(),
        };
        Checkpoint {
            goal: self.config.task.clone(),
            constraints,
            decisions: self.journal.decisions().to_vec(),
            open_items,
            files_touched: self.journal.files().to_vec(),
            next_step,
        }
    }
}

/// Whether a call's arguments are finished JSON (an empty string counts as
/// `{}`, as OpenAI-compatible servers read it).
fn is_finished_json(arguments: &str) -> bool {
    arguments.trim().is_empty() || serde_json::from_str::<Value>(arguments).is_ok()
}

/// What one call came to.
struct CallOutcome {
    /// The text the model reads as the call's result.
    observation: String,
    /// Whether the call did what it was asked.
    ok: bool,
    /// `finish`'s summary: the run ends after this call.
    finished: Option<String>,
}

impl CallOutcome {
    fn succeeded(observation: String) -> Self {
        Self {
            observation,
            ok: true,
            finished: None,
        }
    }

    fn failed(observation: String) -> Self {
        Self {
            observation,
            ok: false,
            finished: None,
        }
    }
}

fn parse_arguments(text: &str) -> Result<Value, String> {
    let text = match text.trim() {
        "" => "{}",
        text => text,
    };
    match serde_json::from_str::<Value>(text) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err("the arguments must be a JSON object".into()),
        Err(error) => Err(format!("the arguments are not valid JSON ({error})")),
    }
}

/// The word a server sends for `reason` (`none` when it sent none).
fn finish_word(reason: Option<FinishReason>) -> String {
    reason
        .and_then(|reason| serde_json::to_value(reason).ok())
        .and_then(|word| word.as_str().map(str::to_string))
        .unwrap_or_else(|| "none".into())
}

fn record(
    turn: usize,
    kind: RequestKind,
    phase: String,
    tool_choice: Value,
    outcome: &ChatOutcome,
    calls: Vec<CallRecord>,
    compacted: bool,
) -> TurnRecord {
    TurnRecord {
        turn,
        kind,
        phase,
        tool_choice,
        prompt_tokens: outcome.prompt_tokens,
        cached_tokens: outcome.cached_tokens,
        hit_rate: match outcome.prompt_tokens {
            0 => 0.0,
            prompt => outcome.cached_tokens as f64 / prompt as f64,
        },
        completion_tokens: outcome.completion_tokens,
        ttft_ms: outcome.ttft.as_secs_f64() * 1e3,
        total_ms: outcome.total.as_secs_f64() * 1e3,
        finish_reason: outcome.finish_reason,
        content: outcome.content.clone(),
        calls,
        compacted,
        temperature: 0.0,
        new_tokens: None,
    }
}

mod plan;
#[cfg(test)]
mod tests;
