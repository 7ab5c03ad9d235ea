//! Planning inside a run: the planner sub-agent (`create_plan`), adopting
//! its plan as the todo file, and the todo recited after each result.

use super::*;

impl Agent<'_> {
    /// `create_plan`: ask the planner, at most [`MAX_ATTEMPTS`] times.
    pub(super) fn plan(&mut self, goal: &str) -> Result<String, AgentError> {
        let session = format!("{}-planner", self.config.session);
        let mut retry: Option<(String, String)> = None;
        for _ in 0..MAX_ATTEMPTS {
            let body = planner_request(
                &self.config.task,
                goal,
                retry.as_ref().map(|(a, e)| (a.as_str(), e.as_str())),
            );
            let turn = self.turns.len() + self.pending.len() + 2;
            let outcome = self.backend.chat(&body, &session)?;
            let parsed = parse_plan(&outcome.content, self.config.allow_shell);
            let verdict = CallRecord {
                name: "planner".into(),
                arguments: String::new(),
                ok: parsed.is_ok(),
                result: parsed.as_ref().err().cloned().unwrap_or_else(|| "valid".into()),
            };
            let choice = serde_json::to_value(&body.response_format).unwrap_or_default();
            self.pending.push(record(
                turn,
                RequestKind::Planner,
                "planner".into(),
                choice,
                &outcome,
                vec![verdict],
                false,
            ));
            match parsed {
                Ok(plan) => return Ok(self.adopt_plan(plan, None)),
                Err(error) => retry = Some((outcome.content.clone(), error)),
            }
        }
        let error = retry.map(|(_, e)| e).unwrap_or_default();
        Ok(self.adopt_plan(Plan::Simple, Some(error)))
    }

    /// Follow `plan`: the policy moves on, a complex plan seeds `todo.md`.
    pub(super) fn adopt_plan(&mut self, plan: Plan, failure: Option<String>) -> String {
        self.policy.after_plan(&plan);
        let mut text = String::new();
        if let Some(error) = failure {
            text.push_str(&format!(
                "The planner failed {MAX_ATTEMPTS} times (last error: {error}); going on without a plan.\n"
            ));
        }
        text.push_str(&format_plan(&plan, self.config.allow_shell));
        // A complex plan's checklist becomes todo.md, recited after every
        // result from now on and ticked by the model. A simple plan has none:
        // the task alone, recited, was copied into files by a 1.5B model.
        if let Plan::Complex(steps) = &plan {
            let todo: String = steps.iter().map(|s| format!("- [ ] {}\n", s.text)).collect();
            // A todo.md the user left in the workspace is theirs: never overwritten.
            if self.todo().is_none_or(|t| t.trim().is_empty()) {
                if let Err(error) = self.write_todo(&format!("# Plan\n{todo}")) {
                    text.push_str(&format!("\n(todo.md could not be written: {error})"));
                }
            }
        }
        let summary = match &plan {
            Plan::Simple => "plan: simple".to_string(),
            Plan::Complex(steps) => format!("plan: {} steps", steps.len()),
        };
        self.journal.record(summary);
        text
    }

    /// The model rewrote `todo.md`: plan steps it ticked (`- [x] <step>`)
    /// end, and the policy moves to the first one still open.
    pub(super) fn todo_rewritten(&mut self) {
        let Some(todo) = self.todo() else {
            return;
        };
        let ticked_lines: Vec<String> = todo
            .lines()
            .filter_map(|line| {
                let line = line.trim();
                line.strip_prefix("- [x]")
                    .or_else(|| line.strip_prefix("- [X]"))
                    .map(|rest| rest.trim().to_lowercase())
            })
            .collect();
        let ticked: Vec<bool> = self
            .policy
            .steps()
            .iter()
            .map(|step| ticked_lines.contains(&step.text.trim().to_lowercase()))
            .collect();
        for step in self.policy.after_todo(&ticked) {
            let text = self.policy.steps()[step].text.clone();
            self.journal.record(format!("step {} done: {text}", step + 1));
        }
    }

    /// Rewrite `todo.md`; a refusal (a link out of the workspace, say) is
    /// reported to the model, never fatal.
    pub(super) fn write_todo(&mut self, content: &str) -> Result<(), String> {
        self.toolbox
            .call("todo_write", &json!({"content": content}))
            .map(drop)
            .map_err(|e| e.0)
    }

    /// `todo.md` as it is now, for recitation (through the jail: a link out
    /// of the workspace is not read).
    pub(super) fn todo(&self) -> Option<String> {
        let path = self.toolbox.jail().resolve("todo", "todo.md").ok()?;
        if !path.is_file() {
            return None;
        }
        let text = std::fs::read_to_string(path).ok()?;
        Some(text.chars().take(TODO_RECITE_CHARS).collect())
    }
}
