//! What the run did, kept apart from the context so compaction can summarize
//! it: one line per decision and the files read or written.

use crate::checkpoint::FileTouch;
use serde_json::Value;

/// The run's decisions and file touches.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    decisions: Vec<String>,
    files: Vec<FileTouch>,
}

/// Longest excerpt of a result kept in a decision line.
const EXCERPT_CHARS: usize = 100;

impl Journal {
    /// Record a call at `turn` and its outcome.
    pub fn record_call(&mut self, turn: usize, name: &str, arguments: &Value, ok: bool, result: &str) {
        let first_line: String = result
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(EXCERPT_CHARS)
            .collect();
        let outcome = if ok { "ok" } else { "failed" };
        self.decisions
            .push(format!("turn {turn}: {name} {arguments} → {outcome}: {first_line}"));
        if !ok {
            return;
        }
        let path = arguments["path"].as_str();
        let touch = match (name, path) {
            ("file_read" | "browser_open", Some(path)) => Some((path.to_string(), "read")),
            ("file_write", Some(path)) => Some((path.to_string(), "written")),
            ("todo_write", _) => Some(("todo.md".to_string(), "written")),
            _ => None,
        };
        if let Some((path, how)) = touch {
            self.files.retain(|f| !(f.path == path && f.how == how));
            self.files.insert(0, FileTouch { path, how });
        }
    }

    /// Record a decision that is not a call (the plan, a skipped step).
    pub fn record(&mut self, text: String) {
        self.decisions.push(text);
    }

    /// Every decision, oldest first.
    pub fn decisions(&self) -> &[String] {
        &self.decisions
    }

    /// Files touched, most recent first.
    pub fn files(&self) -> &[FileTouch] {
        &self.files
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn files_are_most_recent_first_and_unique() {
        let mut journal = Journal::default();
        journal.record_call(
            1,
            "file_read",
            &json!({"path": "a.md"}),
            true,
            "a.md: lines 1-3 of 3\nx",
        );
        journal.record_call(2, "file_read", &json!({"path": "b.md"}), false, "error: no such file");
        journal.record_call(
            3,
            "file_write",
            &json!({"path": "out.txt", "content": "x"}),
            true,
            "wrote 1 bytes",
        );
        journal.record_call(4, "file_read", &json!({"path": "a.md"}), true, "again");
        let files: Vec<(&str, &str)> = journal.files().iter().map(|f| (f.path.as_str(), f.how)).collect();
        assert_eq!(
            files,
            vec![("a.md", "read"), ("out.txt", "written")],
            "failed reads are not files touched"
        );
        assert_eq!(
            journal.decisions()[0],
            "turn 1: file_read {\"path\":\"a.md\"} → ok: a.md: lines 1-3 of 3"
        );
        assert!(journal.decisions()[1].contains("→ failed: error: no such file"));
    }
}
