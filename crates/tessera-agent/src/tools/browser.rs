//! The offline browser: `browser_open`, `browser_find`, `browser_follow`.
//!
//! Pages are files inside the workspace: `.html`/`.htm` go through
//! [`html::extract`], `.md`/`.markdown`/`.txt` through [`markdown::extract`],
//! anything else is shown as plain text. Links resolve relative to the
//! page's folder (a leading `/` means the workspace root), with `#fragment`
//! and `?query` stripped and `%XX` decoded; every URL with a scheme is
//! external and never fetched. The last page opened is the current page that
//! `browser_find` and `browser_follow` work on. A page is shown
//! [`PAGE_CHARS`] chars at a time, followed by the links whose `[n]` marker
//! lies in the shown window.

use std::fs;
use std::path::Path;

use serde::Deserialize;
use serde_json::json;

use super::files::io_error;
use super::{clip, count, hint, html, markdown, ToolError};
use crate::jail::Jail;

/// Chars of page text per `browser_open` observation.
pub(crate) const PAGE_CHARS: usize = 6000;
/// Most lines one `browser_find` shows.
pub(crate) const FIND_MAX: usize = 20;
/// Largest page file: 5 MB.
pub(crate) const PAGE_MAX_BYTES: u64 = 5 * 1024 * 1024;
/// Chars of a link text or found line shown.
const SNIPPET_CHARS: usize = 200;
const OFFLINE: &str = "offline: only files inside the workspace can be opened";

/// `browser_open` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpenArgs {
    path: String,
    #[serde(default)]
    start: usize,
}

/// `browser_find` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FindArgs {
    text: String,
}

/// `browser_follow` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FollowArgs {
    link: usize,
}

/// The browser's state: the current page.
#[derive(Debug, Default)]
pub(crate) struct Browser {
    page: Option<Page>,
}

/// An opened page.
#[derive(Debug)]
struct Page {
    /// Workspace-relative path.
    shown: String,
    title: Option<String>,
    text: String,
    links: Vec<Link>,
}

/// A resolved link.
#[derive(Debug)]
struct Link {
    text: String,
    target: Target,
    /// Char offset of the `[n]` marker in the page text.
    offset: usize,
}

/// Where a link leads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// A workspace-relative path (not yet checked against the jail).
    Local(String),
    /// A URL with a scheme; never fetched.
    External(String),
    /// A relative path that climbs above the workspace root.
    Outside(String),
}

impl Browser {
    /// `browser_open`.
    pub(crate) fn open(&mut self, jail: &Jail, args: OpenArgs) -> Result<String, ToolError> {
        let path = args.path.trim();
        if has_scheme(path) || path.starts_with("//") {
            return Err(ToolError(format!("{OFFLINE}; {path:?} is not a workspace file")));
        }
        self.show(jail, path, args.start)
    }

    /// `browser_find`.
    pub(crate) fn find(&self, args: FindArgs) -> Result<String, ToolError> {
        let page = self.current()?;
        if args.text.is_empty() {
            return Err(ToolError("text is empty: give the text to find".to_string()));
        }
        let needle = args.text.to_lowercase();
        let mut found = Vec::new();
        let mut total = 0;
        let mut start = 0;
        for (i, line) in page.text.split('\n').enumerate() {
            if line.to_lowercase().contains(&needle) {
                total += 1;
                if found.len() < FIND_MAX {
                    found.push(format!("line {} (start {start}): {}", i + 1, clip(line, SNIPPET_CHARS)));
                }
            }
            start += line.chars().count() + 1;
        }
        let (text, shown) = (&args.text, &page.shown);
        if total == 0 {
            return Ok(format!("no match for {text:?} in {shown}"));
        }
        let mut out = if total > FIND_MAX {
            format!("first {FIND_MAX} of {total} lines matching {text:?} in {shown}")
        } else {
            format!("{} matching {text:?} in {shown}", count(total, "line"))
        };
        for line in &found {
            out.push('\n');
            out.push_str(line);
        }
        if total > FIND_MAX {
            out.push_str(&format!("\n… {} more: search for a longer text", total - FIND_MAX));
        }
        Ok(out)
    }

    /// `browser_follow`.
    pub(crate) fn follow(&mut self, jail: &Jail, args: FollowArgs) -> Result<String, ToolError> {
        let page = self.current()?;
        let n = args.link;
        let link = n.checked_sub(1).and_then(|i| page.links.get(i)).ok_or_else(|| {
            ToolError(format!(
                "link {n} does not exist: {} has {}",
                page.shown,
                count(page.links.len(), "link")
            ))
        })?;
        match link.target.clone() {
            Target::Local(path) => self.show(jail, &path, 0),
            Target::External(url) => Err(ToolError(format!("link {n} points to {url}: {OFFLINE}"))),
            Target::Outside(href) => Err(ToolError(format!("link {n} ({href}) leaves the workspace: {OFFLINE}"))),
        }
    }

    fn current(&self) -> Result<&Page, ToolError> {
        self.page
            .as_ref()
            .ok_or_else(|| ToolError("no page is open: call browser_open first".to_string()))
    }

    /// Loads `path`, renders it from `start`, and makes it the current page.
    fn show(&mut self, jail: &Jail, path: &str, start: usize) -> Result<String, ToolError> {
        let page = load(jail, path)?;
        let out = render(jail, &page, start)?;
        self.page = Some(page);
        Ok(out)
    }
}

/// Reads and extracts a page file (a folder opens its `index.html`).
fn load(jail: &Jail, path: &str) -> Result<Page, ToolError> {
    let mut file = jail.resolve("path", path)?;
    if file.is_dir() {
        let index = file.join("index.html");
        if !index.is_file() {
            let call = hint("file_list", json!({ "path": jail.display(&file) }));
            return Err(ToolError(format!(
                "{:?} is a folder without index.html: {call}",
                jail.display(&file)
            )));
        }
        file = jail.resolve("path", &format!("{}/index.html", jail.display(&file)))?;
    }
    let shown = jail.display(&file);
    if !file.is_file() {
        return Err(ToolError(format!("{shown:?} is not a regular file")));
    }
    let size = fs::metadata(&file)
        .map_err(|e| io_error("cannot read", &shown, e))?
        .len();
    if size > PAGE_MAX_BYTES {
        return Err(ToolError(format!(
            "{shown:?} is {size} bytes; pages may be at most {PAGE_MAX_BYTES} bytes: use file_read"
        )));
    }
    let bytes = fs::read(&file).map_err(|e| io_error("cannot read", &shown, e))?;
    if bytes.contains(&0) {
        return Err(ToolError(format!("{shown:?} is a binary file, not a page")));
    }
    let source = String::from_utf8_lossy(&bytes);
    let extracted = match extension(&file).as_str() {
        "html" | "htm" => html::extract(&source),
        "md" | "markdown" | "txt" => markdown::extract(&source),
        _ => html::Extracted {
            text: source.into_owned(),
            ..html::Extracted::default()
        },
    };
    let links = extracted
        .links
        .into_iter()
        .map(|raw| Link {
            target: resolve_href(&shown, &raw.href),
            text: raw.text,
            offset: raw.offset,
        })
        .collect();
    let mut text = extracted.text;
    text.truncate(text.trim_end().len());
    Ok(Page {
        shown,
        title: extracted.title,
        text,
        links,
    })
}

fn extension(file: &Path) -> String {
    file.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

/// The observation for `page` from char `start`.
fn render(jail: &Jail, page: &Page, start: usize) -> Result<String, ToolError> {
    let total = page.text.chars().count();
    let title = page.title.as_ref().map(|t| format!(" ({t})")).unwrap_or_default();
    let mut out = format!("page {}{title}: ", page.shown);
    if total == 0 && start == 0 {
        out.push_str("empty page");
        return Ok(out);
    }
    if start >= total {
        return Err(ToolError(format!(
            "start {start} is past the end: {} has {}",
            page.shown,
            count(total, "char")
        )));
    }
    let end = (start + PAGE_CHARS).min(total);
    out.push_str(&format!("chars {start}-{end} of {total}"));
    if start == 0 && end == total {
        out.push_str(" (whole page)");
    }
    out.push('\n');
    out.push_str(char_slice(&page.text, start, end));
    if end < total {
        let call = hint("browser_open", json!({ "path": page.shown, "start": end }));
        out.push_str(&format!("\nmore: {call}"));
    }
    let shown_links: Vec<(usize, &Link)> = page
        .links
        .iter()
        .enumerate()
        .filter(|(_, l)| l.offset >= start && l.offset < end)
        .collect();
    if !shown_links.is_empty() {
        out.push_str("\nLinks:");
        for (i, link) in shown_links {
            let target = describe_target(jail, page, &link.target);
            out.push_str(&format!(
                "\n[{}] {} -> {target}",
                i + 1,
                clip(&link.text, SNIPPET_CHARS)
            ));
        }
    }
    Ok(out)
}

/// The chars `start..end` of `text`.
fn char_slice(text: &str, start: usize, end: usize) -> &str {
    let byte = |n: usize| text.char_indices().nth(n).map_or(text.len(), |(b, _)| b);
    &text[byte(start)..byte(end)]
}

/// How a link target reads in the `Links:` list.
fn describe_target(jail: &Jail, page: &Page, target: &Target) -> String {
    match target {
        Target::External(url) => format!("{url} (external, offline)"),
        Target::Outside(href) => format!("{href} (outside the workspace)"),
        Target::Local(path) if *path == page.shown => format!("{path} (this page)"),
        Target::Local(path) => match jail.resolve("link", path) {
            Ok(_) => path.clone(),
            Err(_) if jail.root().join(path).symlink_metadata().is_err() => format!("{path} (missing)"),
            Err(_) => format!("{path} (outside the workspace)"),
        },
    }
}

/// Resolves `href` found on the page at workspace path `page`.
fn resolve_href(page: &str, href: &str) -> Target {
    let href = href.trim();
    if has_scheme(href) || href.starts_with("//") {
        return Target::External(href.to_string());
    }
    let path = percent_decode(href.split(['#', '?']).next().unwrap_or(""));
    if path.is_empty() {
        return Target::Local(page.to_string());
    }
    let mut parts: Vec<&str> = if path.starts_with('/') {
        Vec::new()
    } else {
        page.split('/').filter(|p| *p != ".").collect()
    };
    if !path.starts_with('/') {
        parts.pop(); // the page's own file name
    }
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Target::Outside(href.to_string());
                }
            }
            name => parts.push(name),
        }
    }
    if parts.is_empty() {
        Target::Local(".".to_string())
    } else {
        Target::Local(parts.join("/"))
    }
}

/// Whether `s` starts with a URL scheme such as `https:` or `mailto:`
/// (two chars at least, so a drive letter is not one).
fn has_scheme(s: &str) -> bool {
    match s.split_once(':') {
        Some((scheme, _)) => {
            scheme.len() >= 2
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

/// Decodes `%XX` escapes (invalid UTF-8 becomes U+FFFD; bad escapes stay).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
