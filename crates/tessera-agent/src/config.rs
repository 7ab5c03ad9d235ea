//! A run's settings, validated before the first request.

use crate::policy::CALL_TOKENS;
use crate::AgentError;

/// Default `--max-steps`.
pub const DEFAULT_MAX_STEPS: usize = 16;
/// Most `--max-steps`.
pub const MAX_STEPS_LIMIT: usize = 1_000;
/// Tokens kept free at the end of the window (the answer and the estimate's slack).
pub const DEFAULT_RESERVE_TOKENS: usize = 1_024;
/// Smallest context window a run accepts (the fixed prefix alone is ~1.5k tokens).
pub const MIN_CONTEXT_WINDOW: usize = 2_048;
/// Tokens assumed for the fixed prefix when checking that a window leaves
/// room for a reserve and an answer.
pub const PREFIX_TOKENS_ESTIMATE: usize = 1_024;
/// Longest task, in characters.
pub const MAX_TASK_CHARS: usize = 16_000;

/// How a run behaves.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// What the user asked.
    pub task: String,
    /// Most agent requests (planner requests are not counted).
    pub max_steps: usize,
    /// Let `shell_*` run (they are always listed, masked when off).
    pub allow_shell: bool,
    /// The model's context, in tokens.
    pub context_window: usize,
    /// Compact when a request would leave fewer free tokens than this.
    pub reserve_tokens: usize,
    /// Assistant turns kept verbatim after a compaction (at least 1).
    pub keep_turns: usize,
    /// Sampling temperature of agent turns (the planner always uses 0).
    pub temperature: f32,
    /// Base seed (each turn adds its number).
    pub seed: u64,
    /// Session id sent as `X-Session-Id`, so the server keeps this run's
    /// prefix warm between turns.
    pub session: String,
}

impl AgentConfig {
    /// Defaults for `task` in a `context_window`-token model.
    pub fn new(task: impl Into<String>, context_window: usize) -> Self {
        Self {
            task: task.into(),
            max_steps: DEFAULT_MAX_STEPS,
            allow_shell: false,
            context_window,
            reserve_tokens: DEFAULT_RESERVE_TOKENS,
            keep_turns: 2,
            temperature: 0.0,
            seed: 0,
            session: format!("agent-{}", std::process::id()),
        }
    }

    /// Every field within its limits, or an error naming it.
    pub fn validate(&self) -> Result<(), AgentError> {
        let fail = |field, reason: String| Err(AgentError::Config { field, reason });
        let task_chars = self.task.chars().count();
        if self.task.trim().is_empty() {
            return fail("task", "the task is empty".into());
        }
        if task_chars > MAX_TASK_CHARS {
            return fail(
                "task",
                format!("the task is {task_chars} characters; the limit is {MAX_TASK_CHARS}"),
            );
        }
        if !(1..=MAX_STEPS_LIMIT).contains(&self.max_steps) {
            return fail(
                "max_steps",
                format!("max_steps is {}; it must be 1 to {MAX_STEPS_LIMIT}", self.max_steps),
            );
        }
        if self.context_window < MIN_CONTEXT_WINDOW {
            return fail(
                "context_window",
                format!(
                    "{} tokens is below the minimum of {MIN_CONTEXT_WINDOW}",
                    self.context_window
                ),
            );
        }
        let needed = PREFIX_TOKENS_ESTIMATE + self.reserve_tokens + CALL_TOKENS;
        if self.context_window < needed {
            return fail(
                "reserve_tokens",
                format!(
                    "a {}-token window cannot hold the prefix (~{PREFIX_TOKENS_ESTIMATE}), the reserve ({}) \
                     and an answer ({CALL_TOKENS}); it needs {needed}",
                    self.context_window, self.reserve_tokens
                ),
            );
        }
        if !(0.0..=2.0).contains(&self.temperature) {
            return fail("temperature", format!("{} is outside [0, 2]", self.temperature));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_name_the_field() {
        let ok = AgentConfig::new("do it", 8192);
        assert!(ok.validate().is_ok());
        let cases: Vec<(AgentConfig, &str)> = vec![
            (AgentConfig::new("  ", 8192), "task"),
            (AgentConfig::new("x".repeat(MAX_TASK_CHARS + 1), 8192), "task"),
            (
                AgentConfig {
                    max_steps: 0,
                    ..ok.clone()
                },
                "max_steps",
            ),
            (AgentConfig::new("x", 1000), "context_window"),
            (
                AgentConfig {
                    reserve_tokens: 7000,
                    ..ok.clone()
                },
                "reserve_tokens",
            ),
            (
                AgentConfig {
                    temperature: 2.5,
                    ..ok.clone()
                },
                "temperature",
            ),
        ];
        for (config, field) in cases {
            match config.validate() {
                Err(AgentError::Config { field: got, .. }) => assert_eq!(got, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }
}
