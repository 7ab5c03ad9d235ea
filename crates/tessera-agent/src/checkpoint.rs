//! Compaction's structured checkpoint. Before the window fills, the harness
//! replaces old history with one message holding the goal, constraints,
//! decisions, open items, files touched and the next step. It is built from
//! the run's own journal (no model call, so nothing is lost to a small
//! model's summary), and every file it names can be re-attached by path.

/// What survives compaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// The user's task.
    pub goal: String,
    /// Rules the run works under.
    pub constraints: Vec<String>,
    /// What was decided and done, oldest first.
    pub decisions: Vec<String>,
    /// What is still to do.
    pub open_items: Vec<String>,
    /// Files read (re-attachable) and written, most recent first.
    pub files_touched: Vec<FileTouch>,
    /// What to do next.
    pub next_step: String,
}

/// A file the run read or wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileTouch {
    /// Workspace-relative path.
    pub path: String,
    /// `read` or `written`.
    pub how: &'static str,
}

/// Decisions kept in a checkpoint (the oldest are dropped first).
pub const MAX_DECISIONS: usize = 24;
/// Files listed in a checkpoint.
pub const MAX_FILES: usize = 16;

impl Checkpoint {
    /// The checkpoint as the message that replaces the compacted history.
    pub fn render(&self) -> String {
        let mut text = String::from("[checkpoint: earlier turns were compacted into this summary]\n");
        text.push_str(&format!("Goal: {}\n", self.goal));
        section(&mut text, "Constraints", self.constraints.iter());
        let skipped = self.decisions.len().saturating_sub(MAX_DECISIONS);
        let mut decisions: Vec<String> = Vec::new();
        if skipped > 0 {
            decisions.push(format!("({skipped} earlier decisions omitted)"));
        }
        decisions.extend(self.decisions.iter().skip(skipped).cloned());
        section(&mut text, "Decisions", decisions.iter());
        section(&mut text, "Open items", self.open_items.iter());
        let files = self.files_touched.iter().take(MAX_FILES).map(|f| match f.how {
            "read" => format!(
                "{} (read; re-attach with file_read {{\"path\":\"{}\"}})",
                f.path, f.path
            ),
            how => format!("{} ({how})", f.path),
        });
        section(&mut text, "Files touched", files);
        text.push_str(&format!("Next step: {}", self.next_step));
        text
    }
}

fn section<I: Iterator<Item = S>, S: AsRef<str>>(text: &mut String, title: &str, items: I) {
    text.push_str(title);
    text.push_str(":\n");
    let mut any = false;
    for item in items {
        any = true;
        text.push_str("- ");
        text.push_str(item.as_ref());
        text.push('\n');
    }
    if !any {
        text.push_str("- none\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_rendered() {
        let checkpoint = Checkpoint {
            goal: "copy the first line".into(),
            constraints: vec!["paths stay in the workspace".into()],
            decisions: (1..=30).map(|i| format!("turn {i}")).collect(),
            open_items: vec![],
            files_touched: vec![
                FileTouch {
                    path: "notes.md".into(),
                    how: "read",
                },
                FileTouch {
                    path: "out.txt".into(),
                    how: "written",
                },
            ],
            next_step: "write out.txt".into(),
        };
        let text = checkpoint.render();
        for field in [
            "Goal: copy",
            "Constraints:\n- paths",
            "Decisions:\n- (6 earlier",
            "Open items:\n- none",
            "Files touched:\n",
            "Next step: write out.txt",
        ] {
            assert!(text.contains(field), "missing {field:?} in\n{text}");
        }
        assert!(!text.contains("- turn 6\n") && text.contains("- turn 7\n") && text.contains("- turn 30\n"));
        assert!(text.contains("notes.md (read; re-attach with file_read {\"path\":\"notes.md\"})"));
        assert!(text.contains("out.txt (written)"));
    }
}
