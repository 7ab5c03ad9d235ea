//! `file_read`, `file_write` and `todo_write`.
//!
//! Reads page through [`paging`](super::paging) with the
//! [`FILE_READ_MAX_LINES`] / [`FILE_READ_MAX_BYTES`] caps; writes go to
//! [`Jail::resolve_new`] paths, so new parent folders are only ever created
//! inside the workspace.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Write};
use std::path::Path;

use serde::Deserialize;
use serde_json::json;

use super::paging::{self, Labels, Limits};
use super::{count, hint, ToolError, FILE_READ_MAX_BYTES, FILE_READ_MAX_LINES};
use crate::jail::Jail;

/// Largest `file_write` content: 1 MB.
pub(crate) const WRITE_MAX_BYTES: usize = 1024 * 1024;
/// Largest `todo_write` content: 8 KB.
pub(crate) const TODO_MAX_BYTES: usize = 8 * 1024;
/// The harness's own folder in the workspace (transcript, results, shell logs).
pub const HARNESS_DIR: &str = ".tessera";
/// The task list `todo_write` rewrites, at the workspace root.
pub(crate) const TODO_FILE: &str = "todo.md";

/// `file_read` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    path: String,
    #[serde(default = "first_line")]
    start_line: usize,
}

fn first_line() -> usize {
    1
}

/// `file_write` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    path: String,
    content: String,
    #[serde(default)]
    append: bool,
}

/// `todo_write` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TodoArgs {
    content: String,
}

/// `file_read`: one page of a text file.
pub(crate) fn read(jail: &Jail, args: ReadArgs) -> Result<String, ToolError> {
    let path = jail.resolve("path", &args.path)?;
    let shown = jail.display(&path);
    if path.is_dir() {
        let call = hint("file_list", json!({ "path": shown }));
        return Err(ToolError(format!("{shown:?} is a folder: {call}")));
    }
    if !path.is_file() {
        return Err(ToolError(format!("{shown:?} is not a regular file")));
    }
    let file = File::open(&path).map_err(|e| io_error("cannot read", &shown, e))?;
    let limits = Limits {
        lines: FILE_READ_MAX_LINES,
        bytes: FILE_READ_MAX_BYTES,
    };
    let win = paging::window(BufReader::new(file), args.start_line, limits)
        .map_err(|e| io_error("cannot read", &shown, e))?
        .ok_or_else(|| ToolError(format!("{shown:?} is a binary file: file_read shows text only")))?;
    let labels = Labels {
        name: &shown,
        unit: "file",
    };
    paging::render(&labels, &win, |next| {
        hint("file_read", json!({ "path": shown, "start_line": next }))
    })
}

/// `file_write`: creates or replaces (or appends to) a file.
pub(crate) fn write(jail: &Jail, args: WriteArgs) -> Result<String, ToolError> {
    if args.content.len() > WRITE_MAX_BYTES {
        return Err(ToolError(format!(
            "content is {} bytes; file_write takes at most {WRITE_MAX_BYTES} bytes (1 MB): write the file in parts with \"append\": true",
            args.content.len()
        )));
    }
    let path = jail.resolve_new("path", &args.path)?;
    let shown = jail.display(&path);
    if shown == HARNESS_DIR || shown.starts_with(&format!("{HARNESS_DIR}/")) {
        return Err(ToolError(format!(
            "{shown:?} is inside {HARNESS_DIR}/, where the harness keeps its transcript and logs: write elsewhere"
        )));
    }
    store(&path, &shown, args.content.as_bytes(), args.append)?;
    let verb = if args.append { "appended" } else { "wrote" };
    Ok(format!("{verb} {} to {shown}", count(args.content.len(), "byte")))
}

/// `todo_write`: replaces `todo.md` at the workspace root.
pub(crate) fn todo_write(jail: &Jail, args: TodoArgs) -> Result<String, ToolError> {
    if args.content.len() > TODO_MAX_BYTES {
        return Err(ToolError(format!(
            "content is {} bytes; todo_write takes at most {TODO_MAX_BYTES} bytes (8 KB): keep the list short",
            args.content.len()
        )));
    }
    let path = jail.resolve_new("path", TODO_FILE)?;
    store(&path, TODO_FILE, args.content.as_bytes(), false)?;
    Ok(format!(
        "{TODO_FILE} updated ({})",
        count(args.content.lines().count(), "line")
    ))
}

/// Writes `bytes` to a jailed path, creating its parent folders.
fn store(path: &Path, shown: &str, bytes: &[u8], append: bool) -> Result<(), ToolError> {
    if path.is_dir() {
        return Err(ToolError(format!("{shown:?} is a folder: give a file path")));
    }
    if path.exists() && !path.is_file() {
        return Err(ToolError(format!("{shown:?} is not a regular file")));
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| io_error("cannot create the folder for", shown, e))?;
    }
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)
        .map_err(|e| io_error("cannot write", shown, e))?;
    file.write_all(bytes).map_err(|e| io_error("cannot write", shown, e))
}

/// An I/O failure on a workspace path, as an observation.
pub(crate) fn io_error(what: &str, shown: &str, e: std::io::Error) -> ToolError {
    ToolError(format!("{what} {shown:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Toolbox;
    use serde_json::Value;

    fn toolbox() -> (tempfile::TempDir, Toolbox) {
        let tmp = tempfile::tempdir().unwrap();
        let jail = Jail::new(tmp.path()).unwrap();
        (tmp, Toolbox::new(jail, false))
    }

    fn call(tools: &mut Toolbox, name: &str, args: Value) -> Result<String, ToolError> {
        tools.call(name, &args)
    }

    /// Lines "1".."n", one number per line.
    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("{i}\n")).collect()
    }

    #[test]
    fn reads_a_small_file_whole() {
        let (tmp, mut t) = toolbox();
        fs::write(tmp.path().join("notes.md"), "a\nb\nc\n").unwrap();
        let out = call(&mut t, "file_read", json!({"path": "notes.md"})).unwrap();
        assert_eq!(out, "notes.md: lines 1-3 of 3 (whole file)\na\nb\nc");
        let tail = call(&mut t, "file_read", json!({"path": "notes.md", "start_line": 3})).unwrap();
        assert_eq!(tail, "notes.md: lines 3-3 of 3\nc");
    }

    #[test]
    fn pages_at_the_line_cap() {
        let (tmp, mut t) = toolbox();
        fs::write(tmp.path().join("big.txt"), numbered(2500)).unwrap();
        let out = call(&mut t, "file_read", json!({"path": "big.txt"})).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "big.txt: lines 1-2000 of 2500");
        assert_eq!(lines[2000], "2000");
        assert_eq!(
            lines[2001],
            r#"more: call file_read with {"path":"big.txt","start_line":2001}"#
        );
        assert_eq!(lines.len(), 2002);
        let next = call(&mut t, "file_read", json!({"path": "big.txt", "start_line": 2001})).unwrap();
        assert!(
            next.starts_with("big.txt: lines 2001-2500 of 2500\n2001\n"),
            "{}",
            &next[..40]
        );
        assert!(next.ends_with("\n2500"));
    }

    #[test]
    fn exactly_the_line_cap_is_whole() {
        let (tmp, mut t) = toolbox();
        fs::write(tmp.path().join("n.txt"), numbered(FILE_READ_MAX_LINES)).unwrap();
        let out = call(&mut t, "file_read", json!({"path": "n.txt"})).unwrap();
        assert!(out.starts_with("n.txt: lines 1-2000 of 2000 (whole file)\n"));
        assert!(!out.contains("more:"));
    }

    #[test]
    fn long_lines_hit_the_byte_cap_first() {
        // 100 lines of 1023 chars + newline = 1024 bytes each: 50 lines fill 50 KB.
        let (tmp, mut t) = toolbox();
        let line = format!("{}\n", "x".repeat(1023));
        fs::write(tmp.path().join("wide.txt"), line.repeat(100)).unwrap();
        let out = call(&mut t, "file_read", json!({"path": "wide.txt"})).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "wide.txt: lines 1-50 of 100");
        assert_eq!(lines.len(), 52);
        assert_eq!(
            lines[51],
            r#"more: call file_read with {"path":"wide.txt","start_line":51}"#
        );
    }

    #[test]
    fn a_line_over_the_byte_cap_is_cut_between_chars() {
        // 30,000 × "é" (2 bytes) = 60,000 bytes; 51,200 bytes hold 25,600 chars.
        let (tmp, mut t) = toolbox();
        fs::write(tmp.path().join("e.txt"), format!("{}\nnext\n", "é".repeat(30_000))).unwrap();
        let out = call(&mut t, "file_read", json!({"path": "e.txt"})).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "e.txt: lines 1-1 of 2");
        assert_eq!(lines[1].chars().count(), 25_600);
        assert!(lines[1].chars().all(|c| c == 'é'));
        assert_eq!(lines[2], "[line 1 cut: showed 51200 of its 60000 bytes]");
        assert_eq!(lines[3], r#"more: call file_read with {"path":"e.txt","start_line":2}"#);
        // A 3-byte char straddling the cap is left out whole: 51,200 = 3 × 17,066 + 2.
        fs::write(tmp.path().join("euro.txt"), "€".repeat(20_000)).unwrap();
        let out = call(&mut t, "file_read", json!({"path": "euro.txt"})).unwrap();
        assert_eq!(out.lines().nth(1).unwrap().chars().count(), 17_066);
    }

    #[test]
    fn read_refusals_are_explained() {
        let (tmp, mut t) = toolbox();
        fs::write(tmp.path().join("n.md"), "a\nb\n").unwrap();
        fs::write(tmp.path().join("b.bin"), b"ab\0cd").unwrap();
        fs::create_dir(tmp.path().join("docs")).unwrap();
        let past = call(&mut t, "file_read", json!({"path": "n.md", "start_line": 5})).unwrap_err();
        assert_eq!(past.0, "start_line 5 is past the end: n.md has 2 lines");
        let bin = call(&mut t, "file_read", json!({"path": "b.bin"})).unwrap_err();
        assert!(bin.0.contains("binary"), "{bin}");
        let dir = call(&mut t, "file_read", json!({"path": "docs"})).unwrap_err();
        assert_eq!(dir.0, r#""docs" is a folder: call file_list with {"path":"docs"}"#);
        let out = call(&mut t, "file_read", json!({"path": "../etc/passwd"})).unwrap_err();
        assert!(out.0.contains("leaves the workspace"), "{out}");
        let missing = call(&mut t, "file_read", json!({})).unwrap_err();
        assert_eq!(missing.0, "invalid arguments for file_read: missing field `path`");
    }

    #[test]
    fn writes_appends_and_creates_parents() {
        let (tmp, mut t) = toolbox();
        let out = call(&mut t, "file_write", json!({"path": "a/b/out.txt", "content": "hello"})).unwrap();
        assert_eq!(out, "wrote 5 bytes to a/b/out.txt");
        let out = call(
            &mut t,
            "file_write",
            json!({"path": "a/b/out.txt", "content": "!\n", "append": true}),
        )
        .unwrap();
        assert_eq!(out, "appended 2 bytes to a/b/out.txt");
        assert_eq!(fs::read_to_string(tmp.path().join("a/b/out.txt")).unwrap(), "hello!\n");
        call(&mut t, "file_write", json!({"path": "a/b/out.txt", "content": "x"})).unwrap();
        assert_eq!(fs::read_to_string(tmp.path().join("a/b/out.txt")).unwrap(), "x");
    }

    #[test]
    fn write_refusals() {
        let (tmp, mut t) = toolbox();
        let big = "x".repeat(WRITE_MAX_BYTES + 1);
        let err = call(&mut t, "file_write", json!({"path": "big.txt", "content": big})).unwrap_err();
        assert!(
            err.0
                .starts_with("content is 1048577 bytes; file_write takes at most 1048576 bytes"),
            "{err}"
        );
        assert!(!tmp.path().join("big.txt").exists());
        let err = call(&mut t, "file_write", json!({"path": ".", "content": "x"})).unwrap_err();
        assert_eq!(err.0, "\".\" is a folder: give a file path");
        let err = call(&mut t, "file_write", json!({"path": "../x.txt", "content": "x"})).unwrap_err();
        assert!(err.0.contains("leaves the workspace"), "{err}");
        assert!(!tmp.path().parent().unwrap().join("x.txt").exists());
    }

    #[cfg(unix)]
    #[test]
    fn writes_through_a_symlinked_folder_out_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let (tmp, mut t) = toolbox();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("out")).unwrap();
        let err = call(&mut t, "file_write", json!({"path": "out/new/x.txt", "content": "x"})).unwrap_err();
        assert!(err.0.contains("outside the workspace"), "{err}");
        assert!(!outside.path().join("new").exists());
    }

    #[test]
    fn todo_write_rewrites_todo_md() {
        let (tmp, mut t) = toolbox();
        let out = call(&mut t, "todo_write", json!({"content": "- [ ] a\n- [ ] b\n"})).unwrap();
        assert_eq!(out, "todo.md updated (2 lines)");
        call(&mut t, "todo_write", json!({"content": "- [x] a"})).unwrap();
        assert_eq!(fs::read_to_string(tmp.path().join("todo.md")).unwrap(), "- [x] a");
        let big = "x".repeat(TODO_MAX_BYTES + 1);
        let err = call(&mut t, "todo_write", json!({"content": big})).unwrap_err();
        assert!(err.0.contains("at most 8192 bytes"), "{err}");
    }
}
