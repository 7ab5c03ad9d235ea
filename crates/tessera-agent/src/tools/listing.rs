//! `file_list` and `file_search`: a sorted recursive walk of the workspace.
//!
//! The walk visits children in name order, skips hidden entries (names
//! starting with `.`) unless the walked path is itself hidden, and never
//! descends through a symlink: a link is listed when its target lies inside
//! the workspace and skipped otherwise. It stops after [`WALK_MAX`] entries.
//! O(entries) for a listing, O(bytes of searched files) for a search.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::json;

use super::{clip, count, hint, ToolError};
use crate::jail::Jail;

/// Most entries one `file_list` shows.
pub(crate) const LIST_MAX: usize = 200;
/// Most matches one `file_search` shows.
pub(crate) const SEARCH_MAX: usize = 50;
/// Files larger than this are not searched.
pub(crate) const SEARCH_FILE_MAX_BYTES: u64 = 1024 * 1024;
/// Chars of a matching line that are shown.
pub(crate) const LINE_MAX_CHARS: usize = 200;
/// The walk stops after this many entries.
pub(crate) const WALK_MAX: usize = 20_000;

/// `file_list` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {
    #[serde(default = "root")]
    path: String,
}

/// `file_search` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchArgs {
    query: String,
    #[serde(default = "root")]
    path: String,
}

fn root() -> String {
    ".".to_string()
}

/// One walked entry.
#[derive(Debug)]
struct Entry {
    /// Absolute path under the jail root (not canonicalized).
    path: PathBuf,
    /// A folder (or a link to a folder inside the workspace).
    is_dir: bool,
}

/// The entries under a folder, in name order, at most [`WALK_MAX`].
#[derive(Debug, Default)]
struct Walk {
    entries: Vec<Entry>,
    /// Whether the walk stopped at [`WALK_MAX`].
    stopped: bool,
}

impl Walk {
    fn under(jail: &Jail, start: &Path, include_hidden: bool) -> Walk {
        let mut walk = Walk::default();
        walk.visit(jail, start, include_hidden);
        walk
    }

    fn visit(&mut self, jail: &Jail, folder: &Path, include_hidden: bool) {
        let Ok(read) = fs::read_dir(folder) else {
            return;
        };
        let mut children: Vec<_> = read.filter_map(Result::ok).collect();
        children.sort_by_key(|c| c.file_name());
        for child in children {
            if self.entries.len() == WALK_MAX {
                self.stopped = true;
                return;
            }
            let hidden = child.file_name().to_string_lossy().starts_with('.');
            if hidden && !include_hidden {
                continue;
            }
            let Ok(kind) = child.file_type() else { continue };
            let path = child.path();
            if kind.is_symlink() {
                match path.canonicalize() {
                    Ok(target) if target.starts_with(jail.root()) => {
                        self.entries.push(Entry {
                            path,
                            is_dir: target.is_dir(),
                        });
                    }
                    _ => {}
                }
            } else if kind.is_dir() {
                self.entries.push(Entry {
                    path: path.clone(),
                    is_dir: true,
                });
                self.visit(jail, &path, include_hidden);
            } else {
                self.entries.push(Entry { path, is_dir: false });
            }
        }
    }
}

/// An empty path means the root for folder arguments.
fn folder_arg(path: &str) -> &str {
    if path.is_empty() {
        "."
    } else {
        path
    }
}

/// Whether any name of the workspace-relative `shown` path is hidden.
fn is_hidden(shown: &str) -> bool {
    shown.split('/').any(|name| name.starts_with('.') && name != ".")
}

/// `file_list`: a recursive, sorted listing.
pub(crate) fn list(jail: &Jail, args: ListArgs) -> Result<String, ToolError> {
    let start = jail.resolve("path", folder_arg(&args.path))?;
    let shown = jail.display(&start);
    if !start.is_dir() {
        return Ok(format!("{shown} is a file, not a folder: read it with file_read"));
    }
    let walk = Walk::under(jail, &start, is_hidden(&shown));
    let total = walk.entries.len();
    if total == 0 {
        return Ok(format!("{shown}: empty folder"));
    }
    let more = if walk.stopped { "more than " } else { "" };
    let mut out = if total > LIST_MAX || walk.stopped {
        format!("{shown}: first {LIST_MAX} of {more}{total} entries")
    } else {
        format!("{shown}: {}", count(total, "entry"))
    };
    for entry in walk.entries.iter().take(LIST_MAX) {
        out.push('\n');
        out.push_str(&jail.display(&entry.path));
        if entry.is_dir {
            out.push('/');
        }
    }
    if total > LIST_MAX || walk.stopped {
        let left = total.saturating_sub(LIST_MAX);
        let example = subfolder_example(jail, &walk);
        out.push_str(&format!("\n… {more}{left} more: list a subfolder, e.g. {example}"));
    }
    Ok(out)
}

/// A `file_list` call on the first subfolder listed, for the "more" hint.
fn subfolder_example(jail: &Jail, walk: &Walk) -> String {
    let folder = walk
        .entries
        .iter()
        .find(|e| e.is_dir)
        .map_or_else(|| "src".to_string(), |e| jail.display(&e.path));
    hint("file_list", json!({ "path": folder }))
}

/// `file_search`: case-insensitive substring search in text files.
pub(crate) fn search(jail: &Jail, args: SearchArgs) -> Result<String, ToolError> {
    if args.query.is_empty() {
        return Err(ToolError("query is empty: give the text to find".to_string()));
    }
    let start = jail.resolve("path", folder_arg(&args.path))?;
    let shown = jail.display(&start);
    let files: Vec<PathBuf> = if start.is_dir() {
        let walk = Walk::under(jail, &start, is_hidden(&shown));
        walk.entries.into_iter().filter(|e| !e.is_dir).map(|e| e.path).collect()
    } else {
        vec![start]
    };
    let needle = args.query.to_lowercase();
    let mut matches = Vec::new();
    let mut total = 0;
    for file in &files {
        let Some(text) = searchable_text(file) else { continue };
        for (i, line) in text.lines().enumerate() {
            if line.to_lowercase().contains(&needle) {
                total += 1;
                if matches.len() < SEARCH_MAX {
                    let at = jail.display(file);
                    matches.push(format!("{at}:{}: {}", i + 1, clip(line, LINE_MAX_CHARS)));
                }
            }
        }
    }
    let query = &args.query;
    if total == 0 {
        return Ok(format!("no match for {query:?} under {shown}"));
    }
    let mut out = if total > SEARCH_MAX {
        format!("first {SEARCH_MAX} of {total} matches for {query:?} under {shown}")
    } else {
        format!("{} for {query:?} under {shown}", count(total, "match"))
    };
    for m in &matches {
        out.push('\n');
        out.push_str(m);
    }
    if total > SEARCH_MAX {
        out.push_str(&format!(
            "\n… {} more: narrow the query or the path",
            total - SEARCH_MAX
        ));
    }
    Ok(out)
}

/// The text of a file worth searching: at most 1 MB, no NUL byte.
fn searchable_text(file: &Path) -> Option<String> {
    let meta = fs::metadata(file).ok()?;
    if !meta.is_file() || meta.len() > SEARCH_FILE_MAX_BYTES {
        return None;
    }
    let bytes = fs::read(file).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Toolbox;
    use serde_json::Value;

    /// ```text
    /// ws/
    ///   .git/config        (hidden)
    ///   .env               (hidden)
    ///   docs/a.md          "Alpha\nbeta ALPHA\n"
    ///   docs/sub/b.txt     "nothing here\n"
    ///   notes.md           "alpha notes\n"
    ///   bin.dat            "alpha\0"  (binary)
    /// ```
    fn fixture() -> (tempfile::TempDir, Toolbox) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path();
        fs::create_dir_all(ws.join(".git")).unwrap();
        fs::write(ws.join(".git/config"), "alpha").unwrap();
        fs::write(ws.join(".env"), "alpha").unwrap();
        fs::create_dir_all(ws.join("docs/sub")).unwrap();
        fs::write(ws.join("docs/a.md"), "Alpha\nbeta ALPHA\n").unwrap();
        fs::write(ws.join("docs/sub/b.txt"), "nothing here\n").unwrap();
        fs::write(ws.join("notes.md"), "alpha notes\n").unwrap();
        fs::write(ws.join("bin.dat"), b"alpha\0").unwrap();
        let jail = Jail::new(ws).unwrap();
        (tmp, Toolbox::new(jail, false))
    }

    fn call(t: &mut Toolbox, name: &str, args: Value) -> String {
        t.call(name, &args).unwrap()
    }

    #[test]
    fn lists_sorted_with_folders_marked_and_hidden_skipped() {
        let (_tmp, mut t) = fixture();
        let expect = "\
.: 6 entries
bin.dat
docs/
docs/a.md
docs/sub/
docs/sub/b.txt
notes.md";
        assert_eq!(call(&mut t, "file_list", json!({})), expect);
        assert_eq!(call(&mut t, "file_list", json!({"path": ""})), expect);
        assert_eq!(
            call(&mut t, "file_list", json!({"path": "docs/sub"})),
            "docs/sub: 1 entry\ndocs/sub/b.txt"
        );
    }

    #[test]
    fn a_hidden_folder_is_listed_when_asked_for() {
        let (_tmp, mut t) = fixture();
        assert_eq!(
            call(&mut t, "file_list", json!({"path": ".git"})),
            ".git: 1 entry\n.git/config"
        );
    }

    #[test]
    fn listing_odd_paths() {
        let (tmp, mut t) = fixture();
        fs::create_dir(tmp.path().join("empty")).unwrap();
        assert_eq!(
            call(&mut t, "file_list", json!({"path": "empty"})),
            "empty: empty folder"
        );
        assert!(call(&mut t, "file_list", json!({"path": "notes.md"})).contains("is a file"));
        assert!(t.call("file_list", &json!({"path": "../"})).is_err());
    }

    #[test]
    fn lists_at_most_the_cap_then_counts_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("d")).unwrap();
        for i in 0..250 {
            fs::write(tmp.path().join(format!("d/f{i:03}.txt")), "").unwrap();
        }
        let mut t = Toolbox::new(Jail::new(tmp.path()).unwrap(), false);
        let out = call(&mut t, "file_list", json!({}));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], ".: first 200 of 251 entries");
        assert_eq!(lines[1], "d/");
        assert_eq!(lines[200], "d/f198.txt");
        assert_eq!(
            lines[201],
            r#"… 51 more: list a subfolder, e.g. call file_list with {"path":"d"}"#
        );
        assert_eq!(lines.len(), 202);
    }

    #[cfg(unix)]
    #[test]
    fn links_out_are_not_listed_and_links_in_are_not_descended() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.txt"), "alpha").unwrap();
        let (tmp, mut t) = fixture();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("out")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("docs"), tmp.path().join("docs2")).unwrap();
        let out = call(&mut t, "file_list", json!({}));
        assert!(!out.contains("out"), "{out}");
        assert!(out.contains("\ndocs2/\nnotes.md"), "{out}");
        assert!(!call(&mut t, "file_search", json!({"query": "alpha"})).contains("secret"));
    }

    #[test]
    fn searches_case_insensitively_skipping_hidden_and_binary() {
        let (_tmp, mut t) = fixture();
        let expect = "\
3 matches for \"alpha\" under .
docs/a.md:1: Alpha
docs/a.md:2: beta ALPHA
notes.md:1: alpha notes";
        assert_eq!(call(&mut t, "file_search", json!({"query": "alpha"})), expect);
        let one = call(&mut t, "file_search", json!({"query": "NOTES", "path": "notes.md"}));
        assert_eq!(one, "1 match for \"NOTES\" under notes.md\nnotes.md:1: alpha notes");
    }

    #[test]
    fn search_without_match_is_not_an_error() {
        let (_tmp, mut t) = fixture();
        let out = call(&mut t, "file_search", json!({"query": "zeta", "path": "docs"}));
        assert_eq!(out, "no match for \"zeta\" under docs");
        let empty = t.call("file_search", &json!({"query": ""})).unwrap_err();
        assert!(empty.0.contains("query is empty"));
    }

    #[test]
    fn search_caps_matches_and_clips_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let body: String = (0..60).map(|i| format!("  hit {i}\n")).collect();
        fs::write(tmp.path().join("many.txt"), body).unwrap();
        fs::write(tmp.path().join("wide.txt"), format!("hit{}", "y".repeat(300))).unwrap();
        fs::write(tmp.path().join("huge.txt"), "hit\n".repeat(300_000)).unwrap();
        let mut t = Toolbox::new(Jail::new(tmp.path()).unwrap(), false);
        let out = call(&mut t, "file_search", json!({"query": "hit"}));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "first 50 of 61 matches for \"hit\" under .");
        assert_eq!(lines[1], "many.txt:1: hit 0");
        assert_eq!(lines[51], "… 11 more: narrow the query or the path");
        let wide = call(&mut t, "file_search", json!({"query": "hit", "path": "wide.txt"}));
        let shown = wide.lines().nth(1).unwrap().strip_prefix("wide.txt:1: ").unwrap();
        assert_eq!(shown.chars().count(), LINE_MAX_CHARS + 1);
        assert!(shown.ends_with('…'));
    }
}
