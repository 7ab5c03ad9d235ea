//! The run's record: one JSON object per model request in
//! `<workspace>/.tessera/transcript.jsonl`, written as each request ends (a
//! crash loses nothing already answered), and the per-turn table printed at
//! the end.

use crate::jail::Jail;
use crate::tools::HARNESS_DIR;
use crate::AgentError;
use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use tessera_api::openai::FinishReason;

/// Which loop sent a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestKind {
    /// The agent's own turn.
    Agent,
    /// The planner behind `create_plan`.
    Planner,
}

/// One call and what came of it.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    /// Tool name.
    pub name: String,
    /// Arguments as the model wrote them.
    pub arguments: String,
    /// Whether the tool succeeded.
    pub ok: bool,
    /// The observation the model was given.
    pub result: String,
}

/// One model request.
#[derive(Debug, Clone, Serialize)]
pub struct TurnRecord {
    /// Request number in the run, from 1.
    pub turn: usize,
    /// Agent turn or planner request.
    pub kind: RequestKind,
    /// The policy phase (`reply`, `plan`, `step 1/3`, `act`; `planner`).
    pub phase: String,
    /// The `tool_choice` sent (the planner's: its response format).
    pub tool_choice: serde_json::Value,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: usize,
    /// `cached_tokens / prompt_tokens` (0 for an empty prompt).
    pub hit_rate: f64,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Time to the first delta, in milliseconds.
    pub ttft_ms: f64,
    /// Time to the end of the answer, in milliseconds.
    pub total_ms: f64,
    /// Why generation stopped (null when the server did not say).
    pub finish_reason: Option<FinishReason>,
    /// Free text of the answer.
    pub content: String,
    /// Calls and their results.
    pub calls: Vec<CallRecord>,
    /// Whether the history was compacted before this request.
    pub compacted: bool,
    /// Sampling temperature of the request.
    pub temperature: f32,
    /// Agent turns after the first (not right after a compaction or a reply
    /// cut by the token limit, which stays out of the history): the
    /// prompt tokens beyond the previous agent request's prompt and reply,
    /// which no cache can hold (the new observation and the template's
    /// wrapper). With the history replayed token for token, the turn's misses
    /// (`prompt_tokens - cached_tokens`) exceed this only by the previous
    /// sequence's last partial K/V block.
    pub new_tokens: Option<usize>,
}

/// Appends records to the transcript file.
pub struct Transcript {
    path: PathBuf,
    out: BufWriter<File>,
}

impl Transcript {
    /// Start `<workspace>/.tessera/transcript.jsonl` afresh (through the
    /// jail: a link that leads out of the workspace is refused, not followed).
    pub fn create(jail: &Jail) -> Result<Self, AgentError> {
        let refused = |reason: String| AgentError::Workspace {
            path: jail.root().to_path_buf(),
            reason,
        };
        let io = |what: String| move |source| AgentError::Io { what, source };
        let folder = jail.resolve_new("transcript", HARNESS_DIR).map_err(|e| refused(e.0))?;
        std::fs::create_dir_all(&folder).map_err(io(format!("creating {}", folder.display())))?;
        let relative = format!("{HARNESS_DIR}/transcript.jsonl");
        let path = jail.resolve_new("transcript", &relative).map_err(|e| refused(e.0))?;
        if path.exists() && !path.is_file() {
            return Err(refused(format!("{relative} is not a regular file")));
        }
        let file = File::create(&path).map_err(io(format!("creating {}", path.display())))?;
        Ok(Self {
            path,
            out: BufWriter::new(file),
        })
    }

    /// Where the transcript is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write one record and flush it.
    pub fn write(&mut self, record: &TurnRecord) -> Result<(), AgentError> {
        let line = serde_json::to_string(record).map_err(|e| AgentError::Io {
            what: format!("serializing a record for {}", self.path.display()),
            source: e.into(),
        })?;
        writeln!(self.out, "{line}")
            .and_then(|()| self.out.flush())
            .map_err(|source| AgentError::Io {
                what: format!("writing {}", self.path.display()),
                source,
            })
    }
}

/// Token-weighted share of prompt tokens served from the cache, over the
/// agent requests after the first (the first one is cold by construction;
/// the planner's requests have their own prompt and rate, see
/// [`planner_hit_rate`]).
pub fn hit_rate_from_turn_2(turns: &[TurnRecord]) -> Option<f64> {
    weighted(turns.iter().filter(|t| t.kind == RequestKind::Agent).skip(1))
}

/// Token-weighted cache hit rate of the planner's requests.
pub fn planner_hit_rate(turns: &[TurnRecord]) -> Option<f64> {
    weighted(turns.iter().filter(|t| t.kind == RequestKind::Planner))
}

fn weighted<'t>(turns: impl Iterator<Item = &'t TurnRecord>) -> Option<f64> {
    let (cached, prompt) = turns.fold((0, 0), |(c, p), t| (c + t.cached_tokens, p + t.prompt_tokens));
    (prompt > 0).then(|| cached as f64 / prompt as f64)
}

/// Over the agent turns that have [`TurnRecord::new_tokens`]: the prompt
/// tokens missed beyond each turn's new tokens, and the turns counted.
pub fn misses_beyond_new_tokens(turns: &[TurnRecord]) -> (usize, usize) {
    turns
        .iter()
        .filter_map(|t| Some(t.prompt_tokens - t.cached_tokens.min(t.prompt_tokens)).zip(t.new_tokens))
        .fold((0, 0), |(extra, n), (missed, new)| {
            (extra + missed.saturating_sub(new), n + 1)
        })
}

/// The per-turn table: prompt tokens, cached tokens, hit rate, TTFT, action.
pub fn table(turns: &[TurnRecord]) -> String {
    let mut text = format!(
        "{:>4}  {:<9} {:>7} {:>7} {:>5} {:>6} {:>9}  {}\n",
        "turn", "phase", "prompt", "cached", "new", "hit", "TTFT ms", "action"
    );
    for t in turns {
        let hit = match t.prompt_tokens {
            0 => "-".to_string(),
            p => format!("{:.1}%", 100.0 * t.cached_tokens as f64 / p as f64),
        };
        let new = t.new_tokens.map_or("-".to_string(), |n| n.to_string());
        text.push_str(&format!(
            "{:>4}  {:<9} {:>7} {:>7} {:>5} {:>6} {:>9.0}  {}\n",
            t.turn,
            t.phase,
            t.prompt_tokens,
            t.cached_tokens,
            new,
            hit,
            t.ttft_ms,
            action(t)
        ));
    }
    if let Some(rate) = hit_rate_from_turn_2(turns) {
        text.push_str(&format!(
            "cache hit rate from turn 2, token-weighted: {:.1}%\n",
            100.0 * rate
        ));
    }
    let (extra, counted) = misses_beyond_new_tokens(turns);
    if counted > 0 {
        text.push_str(&format!(
            "tokens missed beyond each turn's new ones: {extra} over {counted} turns\n"
        ));
    }
    if let Some(rate) = planner_hit_rate(turns) {
        text.push_str(&format!(
            "planner cache hit rate, token-weighted: {:.1}%\n",
            100.0 * rate
        ));
    }
    text
}

/// What a turn did, in a few words.
fn action(turn: &TurnRecord) -> String {
    if turn.calls.is_empty() {
        let text: String = turn.content.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() {
            return "ends its turn (no call)".into();
        }
        let short: String = text.chars().take(48).collect();
        return format!("says \"{short}{}\"", if text.chars().count() > 48 { "…" } else { "" });
    }
    turn.calls
        .iter()
        .map(|c| {
            let args: String = c.arguments.chars().take(48).collect();
            format!("{} {args}{}", c.name, if c.ok { "" } else { " → error" })
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(turn: usize, prompt: usize, cached: usize) -> TurnRecord {
        TurnRecord {
            turn,
            kind: RequestKind::Agent,
            phase: "act".into(),
            tool_choice: serde_json::json!("required"),
            prompt_tokens: prompt,
            cached_tokens: cached,
            hit_rate: cached as f64 / prompt as f64,
            completion_tokens: 3,
            ttft_ms: 12.0,
            total_ms: 30.0,
            finish_reason: Some(FinishReason::ToolCalls),
            content: String::new(),
            calls: vec![CallRecord {
                name: "file_read".into(),
                arguments: "{\"path\":\"a\"}".into(),
                ok: false,
                result: "error: no".into(),
            }],
            compacted: false,
            temperature: 0.0,
            new_tokens: None,
        }
    }

    #[test]
    fn hit_rate_skips_turn_1_and_weighs_by_tokens() {
        let turns = [record(1, 1000, 0), record(2, 1000, 900), record(3, 3000, 2900)];
        assert_eq!(hit_rate_from_turn_2(&turns), Some(3800.0 / 4000.0));
        assert_eq!(hit_rate_from_turn_2(&turns[..1]), None);
        let table = table(&turns);
        assert!(
            table.contains("96.7%") && table.contains("hit rate from turn 2, token-weighted: 95.0%"),
            "{table}"
        );
        assert!(table.contains("file_read {\"path\":\"a\"} → error"));
    }

    #[test]
    fn the_planner_is_reported_apart_and_misses_are_measured_against_new_tokens() {
        let planner = TurnRecord {
            kind: RequestKind::Planner,
            ..record(2, 150, 4)
        };
        let mut third = record(3, 1200, 1060);
        third.new_tokens = Some(130);
        let turns = [record(1, 1000, 0), planner, third];
        assert_eq!(
            hit_rate_from_turn_2(&turns),
            Some(1060.0 / 1200.0),
            "the planner's cold prompt is apart"
        );
        assert_eq!(planner_hit_rate(&turns), Some(4.0 / 150.0));
        assert_eq!(misses_beyond_new_tokens(&turns), (10, 1), "140 missed, 130 of them new");
        let table = table(&turns);
        assert!(
            table.contains("planner cache hit rate, token-weighted: 2.7%"),
            "{table}"
        );
        assert!(
            table.contains("tokens missed beyond each turn's new ones: 10 over 1 turns"),
            "{table}"
        );
    }

    #[test]
    fn transcript_lines_are_json() {
        let dir = tempfile::tempdir().unwrap();
        let mut transcript = Transcript::create(&Jail::new(dir.path()).unwrap()).unwrap();
        transcript.write(&record(1, 10, 0)).unwrap();
        transcript.write(&record(2, 12, 10)).unwrap();
        let text = std::fs::read_to_string(transcript.path()).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["cached_tokens"], 10);
        assert_eq!(lines[1]["hit_rate"], 10.0 / 12.0);
        assert_eq!(lines[1]["kind"], "agent");
        assert_eq!(lines[0]["calls"][0]["result"], "error: no");
    }
}
