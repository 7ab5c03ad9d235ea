//! The workspace jail: every path a tool touches goes through here.
//!
//! A path from the model is checked as text first (not empty, no NUL byte,
//! relative, no `..`), then joined to the canonical root and canonicalized, so
//! a symlink anywhere on the way is followed and the result must still lie
//! under the root. For paths that do not exist yet ([`Jail::resolve_new`]) the
//! deepest existing ancestor is canonicalized instead and the missing tail,
//! made of plain names only, is appended to it.
//!
//! The checks are done when a tool call starts; a process that swaps a folder
//! for a symlink between the check and the use is out of scope (the model
//! runs tools one at a time and has no other way into the workspace).
//! Cost: one `canonicalize` (a few `lstat`s) per call.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use crate::tools::ToolError;
use crate::AgentError;

/// The fix suggested by every refusal.
const FIX: &str = "use a path relative to the workspace root such as \"notes.md\"";

/// A workspace folder that tool paths cannot leave.
#[derive(Debug, Clone)]
pub struct Jail {
    /// Canonical (absolute, symlink-free) workspace folder.
    root: PathBuf,
}

/// Names listed when a path is missing.
const NEARBY_ENTRIES: usize = 12;

impl Jail {
    /// Canonicalizes `root`; it must be an existing directory (else
    /// [`AgentError::Workspace`]).
    pub fn new(root: &Path) -> Result<Jail, AgentError> {
        let workspace = |reason: String| AgentError::Workspace {
            path: root.to_path_buf(),
            reason,
        };
        let canonical = root
            .canonicalize()
            .map_err(|e| workspace(format!("cannot be opened ({e})")))?;
        if !canonical.is_dir() {
            return Err(workspace("is not a folder".to_string()));
        }
        Ok(Jail { root: canonical })
    }

    /// The canonical workspace folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// An existing file or folder inside the workspace. `path` is
    /// workspace-relative; `field` names the argument in error messages.
    pub fn resolve(&self, field: &str, path: &str) -> Result<PathBuf, ToolError> {
        let names = check_text(field, path)?;
        let joined = names.iter().fold(self.root.clone(), |p, n| p.join(n));
        let canonical = joined.canonicalize().map_err(|e| {
            if joined.symlink_metadata().is_ok() {
                ToolError(format!("{field} {path:?} is a broken link ({e})"))
            } else {
                ToolError(format!("{field} {path:?} does not exist; {}", self.nearby(&names)))
            }
        })?;
        self.check_inside(field, path, canonical)
    }

    /// What the deepest existing folder on the way to a missing path holds,
    /// so the model can pick a real name: `the workspace root holds: a.md, docs/`.
    fn nearby(&self, names: &[&std::ffi::OsStr]) -> String {
        let mut folder = self.root.clone();
        let mut shown = String::from("the workspace root");
        for name in names {
            let Ok(next) = folder.join(name).canonicalize() else {
                break;
            };
            if !next.is_dir() || !next.starts_with(&self.root) {
                break;
            }
            folder = next;
            shown = format!("{:?}", self.display(&folder));
        }
        let mut entries: Vec<String> = std::fs::read_dir(&folder)
            .map(|dir| {
                dir.filter_map(Result::ok)
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let slash = if e.path().is_dir() { "/" } else { "" };
                        (!name.starts_with('.')).then(|| format!("{name}{slash}"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        entries.sort();
        match entries.len() {
            0 => format!("{shown} is empty"),
            n if n > NEARBY_ENTRIES => format!(
                "{shown} holds: {}, … ({} more; call file_list)",
                entries[..NEARBY_ENTRIES].join(", "),
                n - NEARBY_ENTRIES
            ),
            _ => format!("{shown} holds: {}", entries.join(", ")),
        }
    }

    /// A path that may not exist yet (for writes): every existing ancestor
    /// must resolve inside the jail, and an existing path itself too.
    pub fn resolve_new(&self, field: &str, path: &str) -> Result<PathBuf, ToolError> {
        let names = check_text(field, path)?;
        for existing in (0..=names.len()).rev() {
            let candidate = names[..existing].iter().fold(self.root.clone(), |p, n| p.join(n));
            if candidate.symlink_metadata().is_err() {
                continue;
            }
            let canonical = candidate.canonicalize().map_err(|e| {
                let shown = self.display(&candidate);
                ToolError(format!("{field} {path:?}: {shown:?} is a broken link ({e})"))
            })?;
            let canonical = self.check_inside(field, path, canonical)?;
            if existing < names.len() && !canonical.is_dir() {
                let shown = self.display(&canonical);
                return Err(ToolError(format!(
                    "{field} {path:?}: {shown:?} is a file, not a folder"
                )));
            }
            let tail = names[existing..].iter().fold(canonical, |p, n| p.join(n));
            return Ok(tail);
        }
        // The root itself always exists; reaching here means it vanished.
        Err(ToolError(format!("{field} {path:?}: the workspace folder is gone")))
    }

    /// Workspace-relative display form with '/' separators ("." for the root).
    /// A path outside the workspace is shown as it is.
    pub fn display(&self, absolute: &Path) -> String {
        match absolute.strip_prefix(&self.root) {
            Ok(relative) => {
                let names: Vec<_> = relative.components().map(|c| c.as_os_str().to_string_lossy()).collect();
                if names.is_empty() {
                    ".".to_string()
                } else {
                    names.join("/")
                }
            }
            Err(_) => absolute.to_string_lossy().into_owned(),
        }
    }

    /// Refuses a canonical path that is not under the root.
    fn check_inside(&self, field: &str, path: &str, canonical: PathBuf) -> Result<PathBuf, ToolError> {
        if canonical.starts_with(&self.root) {
            Ok(canonical)
        } else {
            Err(ToolError(format!(
                "{field} {path:?} leads outside the workspace through a symbolic link: {FIX}"
            )))
        }
    }
}

/// The textual checks; returns the plain names of `path` (no `.` entries).
fn check_text<'a>(field: &str, path: &'a str) -> Result<Vec<&'a OsStr>, ToolError> {
    if path.is_empty() {
        return Err(ToolError(format!("{field} is empty: {FIX}")));
    }
    if path.contains('\0') {
        return Err(ToolError(format!("{field} {path:?} contains a NUL byte: {FIX}")));
    }
    let mut names = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            Component::ParentDir => return Err(ToolError(format!("{field} {path:?} leaves the workspace: {FIX}"))),
            Component::RootDir | Component::Prefix(_) => {
                return Err(ToolError(format!("{field} {path:?} is absolute: {FIX}")))
            }
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A workspace with `notes.md` and `docs/a.md`, plus a sibling folder
    /// `outside/` holding `secret.txt`:
    ///
    /// ```text
    /// tmp/
    ///   ws/notes.md
    ///   ws/docs/a.md
    ///   outside/secret.txt
    /// ```
    fn fixture() -> (tempfile::TempDir, Jail) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(ws.join("docs")).unwrap();
        fs::write(ws.join("notes.md"), "n").unwrap();
        fs::write(ws.join("docs/a.md"), "a").unwrap();
        fs::create_dir(tmp.path().join("outside")).unwrap();
        fs::write(tmp.path().join("outside/secret.txt"), "s").unwrap();
        let jail = Jail::new(&ws).unwrap();
        (tmp, jail)
    }

    fn refused(result: Result<PathBuf, ToolError>, expect: &str) {
        match result {
            Ok(p) => panic!("expected a refusal containing {expect:?}, got {p:?}"),
            Err(e) => assert!(e.0.contains(expect), "{:?} lacks {expect:?}", e.0),
        }
    }

    #[test]
    fn new_needs_an_existing_folder() {
        let (tmp, jail) = fixture();
        assert!(jail.root().is_absolute());
        let missing = Jail::new(&tmp.path().join("nope")).unwrap_err();
        assert!(missing.to_string().contains("cannot be opened"));
        let file = Jail::new(&tmp.path().join("ws/notes.md")).unwrap_err();
        assert!(file.to_string().contains("is not a folder"));
    }

    #[test]
    fn resolves_plain_paths() {
        let (_tmp, jail) = fixture();
        assert_eq!(jail.resolve("path", "notes.md").unwrap(), jail.root().join("notes.md"));
        assert_eq!(
            jail.resolve("path", "./docs/a.md").unwrap(),
            jail.root().join("docs/a.md")
        );
        assert_eq!(jail.resolve("path", ".").unwrap(), jail.root());
        assert_eq!(jail.resolve("path", "docs/").unwrap(), jail.root().join("docs"));
    }

    #[test]
    fn refuses_escapes_by_text() {
        let (_tmp, jail) = fixture();
        refused(
            jail.resolve("path", "../x"),
            "path \"../x\" leaves the workspace: use a path relative to the workspace root such as \"notes.md\"",
        );
        refused(jail.resolve("path", "docs/../notes.md"), "leaves the workspace");
        refused(jail.resolve("path", "/etc/passwd"), "path \"/etc/passwd\" is absolute");
        refused(jail.resolve("file", ""), "file is empty");
        refused(jail.resolve("path", "a\0b"), "contains a NUL byte");
        refused(jail.resolve_new("path", "../new.txt"), "leaves the workspace");
        refused(jail.resolve_new("path", "/tmp/new.txt"), "is absolute");
    }

    #[test]
    fn missing_paths_are_named() {
        let (_tmp, jail) = fixture();
        refused(
            jail.resolve("path", "nope.md"),
            "\"nope.md\" does not exist; the workspace root holds: ",
        );
        std::fs::create_dir_all(jail.root().join("docs")).unwrap();
        std::fs::write(jail.root().join("docs/a.md"), "x").unwrap();
        refused(
            jail.resolve("path", "docs/b.md"),
            "\"docs/b.md\" does not exist; \"docs\" holds: a.md",
        );
        #[cfg(unix)]
        {
            let outside = tempfile::tempdir().unwrap();
            std::fs::write(outside.path().join("private.txt"), "x").unwrap();
            std::os::unix::fs::symlink(outside.path(), jail.root().join("out")).unwrap();
            let error = jail.resolve("path", "out/nope").unwrap_err().0;
            assert!(!error.contains("private.txt"), "a link out is never listed: {error}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_out_are_refused_and_in_are_allowed() {
        use std::os::unix::fs::symlink;
        let (tmp, jail) = fixture();
        let ws = jail.root().to_path_buf();
        symlink(tmp.path().join("outside/secret.txt"), ws.join("leak.txt")).unwrap();
        symlink(tmp.path().join("outside"), ws.join("out")).unwrap();
        symlink(ws.join("docs"), ws.join("docs2")).unwrap();
        refused(jail.resolve("path", "leak.txt"), "leads outside the workspace");
        refused(jail.resolve("path", "out/secret.txt"), "leads outside the workspace");
        // A write through a symlinked parent folder, or onto a symlink out.
        refused(jail.resolve_new("path", "out/new.txt"), "leads outside the workspace");
        refused(
            jail.resolve_new("path", "out/deep/new.txt"),
            "leads outside the workspace",
        );
        refused(jail.resolve_new("path", "leak.txt"), "leads outside the workspace");
        // Inside links are followed to their canonical target.
        assert_eq!(jail.resolve("path", "docs2/a.md").unwrap(), ws.join("docs/a.md"));
        assert_eq!(jail.resolve_new("path", "docs2/b.md").unwrap(), ws.join("docs/b.md"));
    }

    #[cfg(unix)]
    #[test]
    fn broken_links_are_refused() {
        use std::os::unix::fs::symlink;
        let (tmp, jail) = fixture();
        symlink(tmp.path().join("gone"), jail.root().join("dangling")).unwrap();
        refused(jail.resolve("path", "dangling"), "broken link");
        refused(jail.resolve_new("path", "dangling"), "broken link");
        refused(jail.resolve_new("path", "dangling/x.txt"), "broken link");
    }

    #[test]
    fn resolve_new_keeps_the_missing_tail() {
        let (_tmp, jail) = fixture();
        let ws = jail.root().to_path_buf();
        assert_eq!(
            jail.resolve_new("path", "new/deep/x.md").unwrap(),
            ws.join("new/deep/x.md")
        );
        assert_eq!(jail.resolve_new("path", "notes.md").unwrap(), ws.join("notes.md"));
        refused(jail.resolve_new("path", "notes.md/x"), "is a file, not a folder");
    }

    #[test]
    fn display_is_relative_with_slashes() {
        let (_tmp, jail) = fixture();
        let ws = jail.root().to_path_buf();
        assert_eq!(jail.display(&ws), ".");
        assert_eq!(jail.display(&ws.join("docs").join("a.md")), "docs/a.md");
        assert_eq!(jail.display(Path::new("/elsewhere/x")), "/elsewhere/x");
    }
}
