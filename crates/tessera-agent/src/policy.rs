//! Which tools the model may call at each step. The tool list in the prompt
//! never changes (that would break the cached prefix); this state machine
//! picks the allowed set and sends it as `tool_choice`, and the engine's masks
//! enforce it. The harness checks it again, for servers that do not mask.
//!
//! ```text
//! Reply ──reply──▶ Plan ──create_plan──▶ Act                  (simple plan)
//!                                   └──▶ Step 1 ▶ … ▶ Step n ▶ Act  (complex plan)
//! ```
//! Right after the user's message the agent must answer in words (`none`),
//! then plan (`create_plan` forced), then act: during a plan step only that
//! step's family (and `todo_write`), or only the one tool its verb names
//! ("read …" → `file_read`); afterwards every tool.

use crate::planner::{Plan, PlanStep};
use crate::tools::Family;
use serde_json::{json, Value};

/// Calls a plan step may take without a success in its family before the
/// harness moves on (a small model can get stuck on one step).
pub const STEP_ATTEMPTS: usize = 3;
/// Tokens for the reply right after the user's message.
pub const REPLY_TOKENS: usize = 64;
/// Tokens for a tool call (room for a file's content in `file_write`).
pub const CALL_TOKENS: usize = 512;

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Answer the user in words.
    Reply,
    /// Make a plan.
    Plan,
    /// Step `index` of the plan.
    Step {
        /// The step, from 0.
        index: usize,
        /// Calls made in it so far.
        attempts: usize,
    },
    /// Any tool, `finish` included.
    Act,
}

/// The per-step tool policy.
#[derive(Debug, Clone)]
pub struct Policy {
    phase: Phase,
    steps: Vec<PlanStep>,
    allow_shell: bool,
}

impl Policy {
    /// A run starts with a reply.
    pub fn new(allow_shell: bool) -> Self {
        Self {
            phase: Phase::Reply,
            steps: Vec::new(),
            allow_shell,
        }
    }

    /// The current phase.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// The plan's steps (empty for a simple plan).
    pub fn steps(&self) -> &[PlanStep] {
        &self.steps
    }

    /// A short label for tables and the transcript.
    pub fn label(&self) -> String {
        match &self.phase {
            Phase::Reply => "reply".into(),
            Phase::Plan => "plan".into(),
            Phase::Step { index, .. } => format!("step {}/{}", index + 1, self.steps.len()),
            Phase::Act => "act".into(),
        }
    }

    /// Tool names the model may call now.
    pub fn allowed(&self) -> Vec<&'static str> {
        let families: Vec<Family> = match &self.phase {
            Phase::Reply => vec![],
            Phase::Plan => vec![Family::Plan],
            Phase::Step { index, .. } => match self.steps[*index].tool {
                Some(tool) => return vec![tool],
                None => vec![self.steps[*index].family, Family::Todo],
            },
            Phase::Act => {
                let mut all = vec![Family::File, Family::Browser, Family::Todo, Family::Finish];
                if self.allow_shell {
                    all.insert(1, Family::Shell);
                }
                all
            }
        };
        families
            .into_iter()
            .flat_map(|f| f.tool_names().iter().copied())
            .collect()
    }

    /// `tool_choice` for the next request.
    pub fn tool_choice(&self) -> Value {
        match &self.phase {
            Phase::Reply => json!("none"),
            Phase::Plan => json!({"type": "function", "function": {"name": "create_plan"}}),
            _ => {
                let tools: Vec<Value> = self
                    .allowed()
                    .into_iter()
                    .map(|name| json!({"type": "function", "function": {"name": name}}))
                    .collect();
                json!({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": tools}})
            }
        }
    }

    /// Most tokens the next answer may take.
    pub fn max_tokens(&self) -> usize {
        match self.phase {
            Phase::Reply => REPLY_TOKENS,
            _ => CALL_TOKENS,
        }
    }

    /// The reply was given: plan next.
    pub fn after_reply(&mut self) {
        if self.phase == Phase::Reply {
            self.phase = Phase::Plan;
        }
    }

    /// The planner answered.
    pub fn after_plan(&mut self, plan: &Plan) {
        match plan {
            Plan::Simple => {
                self.steps.clear();
                self.phase = Phase::Act;
            }
            Plan::Complex(steps) => {
                self.steps = steps.clone();
                self.phase = Phase::Step { index: 0, attempts: 0 };
            }
        }
    }

    /// A call was made; `ok` when it succeeded. Returns the plan step this
    /// call ended, if any, and whether it was done (`false`: given up after
    /// [`STEP_ATTEMPTS`] calls).
    pub fn after_call(&mut self, name: &str, ok: bool) -> Option<(usize, bool)> {
        let Phase::Step { index, attempts } = self.phase else {
            return None;
        };
        let done = ok && Family::of(name) == Some(self.steps[index].family);
        let attempts = attempts + 1;
        if !done && attempts < STEP_ATTEMPTS {
            self.phase = Phase::Step { index, attempts };
            return None;
        }
        self.phase = if index + 1 < self.steps.len() {
            Phase::Step {
                index: index + 1,
                attempts: 0,
            }
        } else {
            Phase::Act
        };
        Some((index, done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(text: &str, family: Family) -> PlanStep {
        PlanStep {
            text: text.into(),
            family,
            tool: None,
        }
    }

    #[test]
    fn reply_then_plan_then_steps_then_act() {
        let mut policy = Policy::new(false);
        assert_eq!(
            policy.tool_choice(),
            json!("none"),
            "right after the user: words, no action"
        );
        assert!(policy.allowed().is_empty());
        policy.after_reply();
        assert_eq!(policy.tool_choice()["function"]["name"], "create_plan");
        policy.after_plan(&Plan::Complex(vec![
            step("open the page", Family::Browser),
            step("write it", Family::File),
        ]));
        assert_eq!(policy.label(), "step 1/2");
        assert_eq!(
            policy.allowed(),
            vec!["browser_open", "browser_find", "browser_follow", "todo_write"]
        );
        assert_eq!(policy.tool_choice()["allowed_tools"]["mode"], "required");
        assert_eq!(
            policy.after_call("todo_write", true),
            None,
            "another family does not end the step"
        );
        assert_eq!(
            policy.after_call("browser_open", false),
            None,
            "a failed call does not end it"
        );
        assert_eq!(policy.after_call("browser_open", true), Some((0, true)));
        assert_eq!(policy.label(), "step 2/2");
        assert_eq!(policy.after_call("file_write", true), Some((1, true)));
        assert_eq!(policy.phase(), &Phase::Act);
        let act = policy.allowed();
        assert!(act.contains(&"finish") && act.contains(&"file_read"));
        assert!(!act.contains(&"shell_exec"), "shell stays masked without --allow-shell");
        assert!(!act.contains(&"create_plan"), "no second plan");
    }

    #[test]
    fn a_step_whose_verb_names_a_tool_allows_only_that_tool() {
        let mut policy = Policy::new(false);
        policy.after_reply();
        let steps = vec![
            PlanStep::new("Read notes.md", false),
            PlanStep::new("Write out.txt", false),
        ];
        policy.after_plan(&Plan::Complex(steps));
        assert_eq!(policy.allowed(), vec!["file_read"]);
        assert_eq!(policy.after_call("file_read", true), Some((0, true)));
        assert_eq!(policy.allowed(), vec!["file_write"]);
    }

    #[test]
    fn a_stuck_step_is_given_up_after_its_attempts() {
        let mut policy = Policy::new(true);
        policy.after_reply();
        policy.after_plan(&Plan::Complex(vec![step("a", Family::File), step("b", Family::Shell)]));
        for _ in 1..STEP_ATTEMPTS {
            assert_eq!(policy.after_call("file_read", false), None);
        }
        assert_eq!(
            policy.after_call("file_read", false),
            Some((0, false)),
            "given up, not done"
        );
        assert_eq!(policy.allowed(), vec!["shell_exec", "shell_view", "todo_write"]);
    }

    #[test]
    fn simple_plans_act_at_once_with_shell_when_allowed() {
        let mut policy = Policy::new(true);
        policy.after_reply();
        policy.after_plan(&Plan::Simple);
        assert_eq!(policy.phase(), &Phase::Act);
        assert!(policy.allowed().contains(&"shell_exec"));
        assert_eq!(policy.max_tokens(), CALL_TOKENS);
    }
}
