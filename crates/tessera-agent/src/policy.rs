//! Which tools the model may call at each step. The tool list in the prompt
//! never changes (that would break the cached prefix); this state machine
//! picks the allowed set and sends it as `tool_choice`, and the engine's masks
//! enforce it. The harness checks it again, for servers that do not mask.
//!
//! ```text
//! Plan ──create_plan──▶ Act                        (simple plan)
//!                  └──▶ Step 1 ▶ … ▶ Step n ▶ Act  (complex plan)
//! ```
//! A run starts by planning (`create_plan` forced). There is no reply turn:
//! `tessera agent` runs one task with no user to read an acknowledgement, and
//! a small model answered it with an empty message.
//!
//! What is allowed follows the run's work, not a step's words: the file tools
//! always, the shell when `--allow-shell`, the browser when the task or its
//! plan names pages, links or HTML (masked otherwise: a 1.5B model with
//! nothing left to do walked the tool list into the browser), `todo_write`,
//! and `finish` once the run has acted (masked before: a 1.5B model called it
//! first thing). A plan step no longer narrows this by the family its words
//! suggest: with Qwen2.5-Coder-1.5B that blocked the work itself (a browsing
//! step masked the `file_write` of the answer it had just found; a step
//! "search files in logs" masked the shell the task asked for).
//!
//! A plan step ends when the model ticks it (or a later step) in `todo.md`,
//! not when some call succeeds (a search that found nothing achieved
//! nothing); a model that never ticks is moved on after [`STEP_CALLS`] calls,
//! the step left open. While a plan step is open, and until the run has
//! changed the workspace, a call is required; after that the model may answer
//! in words (or end its turn), and that ends the run like `finish` (a 1.5B
//! model held to a call after its work was done walked the tool list, calling
//! each tool in turn).

use crate::planner::{step_family, Plan, PlanStep};
use crate::tools::Family;
use tessera_api::openai::{ToolChoiceMode, ToolChoiceSpec};

/// Calls a plan step may take without being ticked before the harness moves
/// on (a small model can get stuck on one step, or never tick).
pub const STEP_CALLS: usize = 6;
/// Tokens for a tool call (room for a file's content in `file_write`).
pub const CALL_TOKENS: usize = 512;
/// `todo_write` calls in a row after which it is masked until another tool
/// is called (a 1.5B model rewrote the same todo until the step limit).
pub const TODO_STREAK: usize = 2;
/// Failures in a row of one tool after which it is masked for a turn (a
/// 1.5B model called `browser_open` on a missing file nine times).
pub const FAILURE_STREAK: usize = 2;

/// Why the policy left a plan step its model had not ticked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepLeft {
    /// A call in the next step's family succeeded: that step's work began.
    NextStepBegun,
    /// [`STEP_CALLS`] calls were made in it.
    OutOfCalls,
}

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Make a plan.
    Plan,
    /// Step `index` of the plan.
    Step {
        /// The step, from 0.
        index: usize,
        /// Calls made in it so far.
        calls: usize,
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
    /// The task or its plan names pages, links or HTML: the browser is allowed.
    browse: bool,
    /// A tool that acts on the workspace or reads it (not the plan, the todo
    /// or `finish`) has succeeded.
    acted: bool,
    /// A call that changes the workspace (`file_write`, `shell_exec`) has succeeded.
    changed: bool,
    /// `todo_write` calls in a row.
    todo_streak: usize,
    /// The last call's tool when it failed, and how many times in a row.
    failing: Option<(String, usize)>,
    /// Tools whose calls repeated earlier ones exactly since the last new
    /// call: masked until the model makes a call it has not made before.
    resting: Vec<String>,
}

impl Policy {
    /// A run of `task` starts with its plan.
    pub fn new(allow_shell: bool, task: &str) -> Self {
        Self {
            phase: Phase::Plan,
            steps: Vec::new(),
            allow_shell,
            browse: step_family(task, false) == Family::Browser,
            acted: false,
            changed: false,
            todo_streak: 0,
            failing: None,
            resting: Vec::new(),
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

    /// Whether a tool other than the plan's, the todo's or `finish` has succeeded.
    pub fn acted(&self) -> bool {
        self.acted
    }

    /// A short label for tables and the transcript.
    pub fn label(&self) -> String {
        match &self.phase {
            Phase::Plan => "plan".into(),
            Phase::Step { index, .. } => format!("step {}/{}", index + 1, self.steps.len()),
            Phase::Act => "act".into(),
        }
    }

    /// Tool names the model may call now (`todo_write` aside after
    /// [`TODO_STREAK`] of them in a row; a tool that failed
    /// [`FAILURE_STREAK`] times in a row aside for a turn; tools that
    /// repeated earlier calls aside until a new call, while others remain).
    pub fn allowed(&self) -> Vec<&'static str> {
        let mut names = self.phase_tools();
        if self.todo_streak >= TODO_STREAK {
            names.retain(|&name| name != "todo_write");
        }
        if let Some((failing, times)) = &self.failing {
            if *times >= FAILURE_STREAK && names.len() > 1 {
                names.retain(|name| name != failing);
            }
        }
        let awake: Vec<&'static str> = names
            .iter()
            .copied()
            .filter(|name| !self.resting.iter().any(|r| r == name))
            .collect();
        match awake.is_empty() {
            true => names,
            false => awake,
        }
    }

    /// `name`'s call repeated an earlier call exactly (same arguments): mask
    /// it until the model makes a new call (a 1.5B model cycled through the
    /// same two or three calls until the step limit).
    pub fn rest(&mut self, name: &str) {
        if !self.resting.iter().any(|r| r == name) {
            self.resting.push(name.to_string());
        }
    }

    /// The model made a call it had not made before: every tool is awake again.
    pub fn wake(&mut self) {
        self.resting.clear();
    }

    fn phase_tools(&self) -> Vec<&'static str> {
        let families: Vec<Family> = match &self.phase {
            Phase::Plan => vec![Family::Plan],
            Phase::Step { .. } | Phase::Act => {
                let mut work = vec![Family::File];
                if self.allow_shell {
                    work.push(Family::Shell);
                }
                if self.browse {
                    work.push(Family::Browser);
                }
                work.push(Family::Todo);
                if self.acted {
                    work.push(Family::Finish);
                }
                work
            }
        };
        families
            .into_iter()
            .flat_map(|f| f.tool_names().iter().copied())
            .collect()
    }

    /// Whether the next answer must be a call: always while planning, while
    /// a plan step is open, and until the run has changed the workspace (a
    /// 1.5B model left free after a mere read ended its turn there).
    /// Otherwise an answer in words, or an empty end of turn, ends the run.
    pub fn call_required(&self) -> bool {
        !matches!(self.phase, Phase::Act) || !self.changed
    }

    /// `tool_choice` for the next request.
    pub fn tool_choice(&self) -> ToolChoiceSpec {
        match &self.phase {
            Phase::Plan => ToolChoiceSpec::named("create_plan"),
            _ => {
                let names = self.allowed().into_iter().map(str::to_string);
                let mode = match self.call_required() {
                    true => ToolChoiceMode::Required,
                    false => ToolChoiceMode::Auto,
                };
                ToolChoiceSpec::allowed(mode, names)
            }
        }
    }

    /// Most tokens the next answer may take.
    pub fn max_tokens(&self) -> usize {
        CALL_TOKENS
    }

    /// The planner answered.
    pub fn after_plan(&mut self, plan: &Plan) {
        if let Plan::Complex(steps) = plan {
            self.browse |= steps.iter().any(|s| s.family == Family::Browser);
        }
        match plan {
            Plan::Simple => {
                self.steps.clear();
                self.phase = Phase::Act;
            }
            Plan::Complex(steps) => {
                self.steps = steps.clone();
                self.phase = Phase::Step { index: 0, calls: 0 };
            }
        }
    }

    /// A call was made; `ok` when it succeeded. Returns the plan step the
    /// harness moved on from without a tick, and why: this call began the
    /// next step's work (a success in the next step's family, when that
    /// differs from this one's), or used up the step's [`STEP_CALLS`].
    pub fn after_call(&mut self, name: &str, ok: bool) -> Option<(usize, StepLeft)> {
        if ok && !matches!(name, "todo_write" | "create_plan" | "finish") {
            self.acted = true;
            self.changed |= matches!(name, "file_write" | "shell_exec");
        }
        self.todo_streak = match name {
            "todo_write" => self.todo_streak + 1,
            _ => 0,
        };
        self.failing = match (ok, self.failing.take()) {
            (true, _) => None,
            // Masked for one turn: after that turn the count starts again.
            (false, Some((last, times))) if last == name && times < FAILURE_STREAK => Some((last, times + 1)),
            (false, _) => Some((name.to_string(), 1)),
        };
        let Phase::Step { index, calls } = self.phase else {
            return None;
        };
        let next_family = self.steps.get(index + 1).map(|s| s.family);
        let began_next = ok
            && next_family.is_some_and(|family| family != self.steps[index].family && Family::of(name) == Some(family));
        if began_next {
            self.phase = Phase::Step {
                index: index + 1,
                calls: 1,
            };
            return Some((index, StepLeft::NextStepBegun));
        }
        let calls = calls + 1;
        if calls < STEP_CALLS {
            self.phase = Phase::Step { index, calls };
            return None;
        }
        self.phase = self.step_after(index, &[]);
        Some((index, StepLeft::OutOfCalls))
    }

    /// `todo.md` was rewritten; `ticked[i]` when plan step `i` is ticked in
    /// it. A tick on the current step or a later one ends every step up to
    /// the last tick (a model that ticked step 2 has left step 1 behind).
    /// Returns the steps that ended.
    pub fn after_todo(&mut self, ticked: &[bool]) -> Vec<usize> {
        let Phase::Step { index, .. } = self.phase else {
            return Vec::new();
        };
        let Some(last) = ticked.iter().rposition(|&t| t).filter(|&last| last >= index) else {
            return Vec::new();
        };
        self.phase = self.step_after(last, ticked);
        let next = match self.phase {
            Phase::Step { index, .. } => index,
            _ => self.steps.len(),
        };
        (index..next).collect()
    }

    /// The phase after step `index`: the next step not ticked, or acting.
    fn step_after(&self, index: usize, ticked: &[bool]) -> Phase {
        match (index + 1..self.steps.len()).find(|&i| !ticked.get(i).copied().unwrap_or(false)) {
            Some(next) => Phase::Step { index: next, calls: 0 },
            None => Phase::Act,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The choice as the JSON a server reads.
    fn sent(policy: &Policy) -> serde_json::Value {
        serde_json::to_value(policy.tool_choice()).unwrap()
    }

    fn step(text: &str, family: Family) -> PlanStep {
        PlanStep {
            text: text.into(),
            family,
            tool: None,
        }
    }

    #[test]
    fn plan_then_steps_then_act() {
        let mut policy = Policy::new(false, "Open the page and write its word to w.txt");
        assert_eq!(
            sent(&policy)["function"]["name"],
            "create_plan",
            "the run starts by planning"
        );
        policy.after_plan(&Plan::Complex(vec![
            step("open the page", Family::Browser),
            step("write it", Family::File),
        ]));
        assert_eq!(policy.label(), "step 1/2");
        assert_eq!(
            policy.allowed(),
            vec![
                "file_read",
                "file_write",
                "file_list",
                "file_search",
                "browser_open",
                "browser_find",
                "browser_follow",
                "todo_write"
            ],
            "the run's work: files, and the browser its task names; no finish before acting"
        );
        assert_eq!(sent(&policy)["allowed_tools"]["mode"], "required");
        assert_eq!(
            policy.after_call("browser_open", true),
            None,
            "a success does not end the step"
        );
        assert_eq!(policy.label(), "step 1/2");
        assert!(policy.allowed().contains(&"finish"), "the run has acted");
        assert!(policy.call_required(), "a plan step is open");
        assert_eq!(
            policy.after_todo(&[false, false]),
            Vec::<usize>::new(),
            "not ticked: it goes on"
        );
        assert_eq!(policy.after_todo(&[true, false]), vec![0], "ticked by the model: done");
        assert_eq!(policy.label(), "step 2/2");
        assert_eq!(policy.after_todo(&[true, true]), vec![1]);
        assert_eq!(policy.phase(), &Phase::Act);
        let act = policy.allowed();
        assert!(act.contains(&"finish") && act.contains(&"file_read"));
        assert!(!act.contains(&"shell_exec"), "shell stays masked without --allow-shell");
        assert!(!act.contains(&"create_plan"), "no second plan");
        assert!(policy.call_required(), "nothing in the workspace changed yet");
        policy.after_call("file_write", true);
        assert!(!policy.call_required(), "written, no step open: words may end the run");
        assert_eq!(sent(&policy)["allowed_tools"]["mode"], "auto");
    }

    #[test]
    fn a_step_never_masks_the_runs_work() {
        let mut policy = Policy::new(true, "Use the shell to count the logs and write the number to n.txt");
        policy.after_plan(&Plan::Complex(vec![
            PlanStep::new("Search files in the logs folder", true),
            PlanStep::new("Write the number to n.txt", true),
        ]));
        let allowed = policy.allowed();
        assert!(
            allowed.contains(&"shell_exec") && allowed.contains(&"file_write"),
            "{allowed:?}"
        );
        assert!(
            !allowed.contains(&"browser_open"),
            "nothing in the task or plan browses: {allowed:?}"
        );
    }

    #[test]
    fn steps_ticked_ahead_are_skipped_and_an_unticked_step_moves_on_after_its_calls() {
        let mut policy = Policy::new(true, "t");
        policy.after_plan(&Plan::Complex(vec![
            step("a", Family::File),
            step("b", Family::Shell),
            step("c", Family::File),
        ]));
        assert_eq!(
            policy.after_todo(&[false, true, false]),
            vec![0, 1],
            "ticking b leaves a behind too"
        );
        assert_eq!(policy.label(), "step 3/3");
        for _ in 1..STEP_CALLS {
            assert_eq!(policy.after_call("file_read", true), None);
        }
        assert_eq!(
            policy.after_call("file_read", false),
            Some((2, StepLeft::OutOfCalls)),
            "moved on, not ticked"
        );
        assert_eq!(policy.phase(), &Phase::Act);
    }

    #[test]
    fn finish_waits_until_the_run_has_acted() {
        let mut policy = Policy::new(false, "t");
        policy.after_plan(&Plan::Simple);
        assert!(policy.call_required(), "nothing done yet: a call is required");
        let finish = |policy: &Policy| policy.allowed().contains(&"finish");
        assert!(!finish(&policy), "nothing was done");
        policy.after_call("todo_write", true);
        assert!(!finish(&policy), "ticking the todo is not acting");
        policy.after_call("file_read", false);
        assert!(!finish(&policy) && !policy.acted(), "a failed call is not acting");
        policy.after_call("file_read", true);
        assert!(finish(&policy));
        assert!(policy.call_required(), "a read is acting, but not the end of the work");
        policy.after_call("shell_exec", true);
        assert!(!policy.call_required());
        assert_eq!(policy.max_tokens(), CALL_TOKENS);
    }

    #[test]
    fn the_todo_is_masked_after_rewrites_in_a_row_until_another_call() {
        let mut policy = Policy::new(false, "t");
        policy.after_plan(&Plan::Simple);
        policy.after_call("todo_write", true);
        assert!(policy.allowed().contains(&"todo_write"));
        policy.after_call("todo_write", true);
        assert!(!policy.allowed().contains(&"todo_write"), "two in a row: act now");
        policy.after_call("file_read", true);
        assert!(policy.allowed().contains(&"todo_write"));
    }

    #[test]
    fn a_tool_failing_twice_in_a_row_is_masked_for_a_turn() {
        let mut policy = Policy::new(false, "open the page");
        policy.after_plan(&Plan::Simple);
        policy.after_call("browser_open", false);
        assert!(policy.allowed().contains(&"browser_open"));
        policy.after_call("browser_open", false);
        assert!(!policy.allowed().contains(&"browser_open"), "two failures in a row");
        policy.after_call("file_write", true);
        assert!(policy.allowed().contains(&"browser_open"), "back once another call ran");
    }

    #[test]
    fn tools_repeating_calls_rest_until_a_new_call() {
        let mut policy = Policy::new(false, "t");
        policy.after_plan(&Plan::Simple);
        policy.rest("file_read");
        policy.rest("file_search");
        let allowed = policy.allowed();
        assert!(
            !allowed.contains(&"file_read") && !allowed.contains(&"file_search"),
            "a cycle of two is broken"
        );
        assert!(allowed.contains(&"file_write"));
        policy.wake();
        assert!(policy.allowed().contains(&"file_read"), "a new call wakes them");
        for name in policy.allowed() {
            policy.rest(name);
        }
        assert!(!policy.allowed().is_empty(), "never every tool");
    }

    #[test]
    fn beginning_the_next_steps_work_moves_the_policy_on() {
        let mut policy = Policy::new(false, "t");
        policy.after_plan(&Plan::Complex(vec![
            step("open the page", Family::Browser),
            step("write the word", Family::File),
            step("open another", Family::Browser),
        ]));
        assert!(
            policy.allowed().contains(&"file_write"),
            "the next step's work is allowed"
        );
        assert_eq!(policy.after_call("file_write", false), None, "a failure begins nothing");
        assert_eq!(
            policy.after_call("file_write", true),
            Some((0, StepLeft::NextStepBegun))
        );
        assert_eq!(policy.label(), "step 2/3");
        assert_eq!(
            policy.after_call("file_read", true),
            None,
            "the same family stays in its step"
        );
    }
}
