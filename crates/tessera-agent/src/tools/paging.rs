//! Line paging shared by `file_read` and `shell_view`.
//!
//! The source is streamed once: every line is counted (for the total) and
//! checked for NUL bytes (binary), and only the lines of the requested window
//! are kept. A window ends at `lines` lines or `bytes` bytes (each line counts
//! its newline), whichever comes first; a first line longer than the byte cap
//! is cut at a UTF-8 character boundary and marked. O(size of the source).

use std::io::{self, BufRead};

use super::{count, ToolError};

/// Where a page ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Most lines on a page.
    pub(crate) lines: usize,
    /// Most bytes on a page (line text plus one newline per line).
    pub(crate) bytes: usize,
}

/// The lines of one page.
#[derive(Debug, Default)]
pub(crate) struct Window {
    /// 1-based number of the first line asked for.
    pub(crate) first: usize,
    /// The lines kept, without their line endings.
    pub(crate) lines: Vec<String>,
    /// Lines in the whole source.
    pub(crate) total: usize,
    /// Byte length of the first line when it was cut to fit the byte cap.
    pub(crate) cut_from: Option<usize>,
}

/// Reads the window of `source` starting at line `first`; `None` for binary input.
pub(crate) fn window(mut source: impl BufRead, first: usize, limits: Limits) -> io::Result<Option<Window>> {
    let mut win = Window {
        first,
        ..Window::default()
    };
    let mut used = 0;
    let mut collecting = true;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if source.read_until(b'\n', &mut buf)? == 0 {
            return Ok(Some(win));
        }
        if buf.contains(&0) {
            return Ok(None);
        }
        win.total += 1;
        if !collecting || win.total < first {
            continue;
        }
        let text = line_text(&buf);
        if win.lines.len() == limits.lines {
            collecting = false;
        } else if used + text.len() <= limits.bytes {
            used += text.len() + 1;
            win.lines.push(text);
        } else if win.lines.is_empty() {
            win.cut_from = Some(text.len());
            win.lines.push(cut(&text, limits.bytes).to_string());
            collecting = false;
        } else {
            collecting = false;
        }
    }
}

/// The text of one raw line: lossy UTF-8 without its `\n` or `\r\n`.
fn line_text(raw: &[u8]) -> String {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    String::from_utf8_lossy(raw).into_owned()
}

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
pub(crate) fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What a rendered page is called.
pub(crate) struct Labels<'a> {
    /// Shown first in the header, e.g. `notes.md` or `shell run 3`.
    pub(crate) name: &'a str,
    /// What the whole source is, e.g. `file` or `log`.
    pub(crate) unit: &'a str,
}

/// Renders a window as a header, the lines, and a `more:` hint built by
/// `next_call(line)` when lines remain. Errors when `first` is past the end.
pub(crate) fn render(
    labels: &Labels<'_>,
    win: &Window,
    next_call: impl Fn(usize) -> String,
) -> Result<String, ToolError> {
    let Labels { name, unit } = labels;
    if win.total == 0 && win.first == 1 {
        return Ok(format!("{name}: empty {unit}"));
    }
    if win.lines.is_empty() {
        return Err(ToolError(format!(
            "start_line {} is past the end: {name} has {}",
            win.first,
            count(win.total, "line")
        )));
    }
    let last = win.first + win.lines.len() - 1;
    let whole = win.first == 1 && last == win.total && win.cut_from.is_none();
    let mut out = format!("{name}: lines {}-{last} of {}", win.first, win.total);
    if whole {
        out.push_str(&format!(" (whole {unit})"));
    }
    for line in &win.lines {
        out.push('\n');
        out.push_str(line);
    }
    if let Some(len) = win.cut_from {
        let shown = win.lines[0].len();
        out.push_str(&format!(
            "\n[line {} cut: showed {shown} of its {len} bytes]",
            win.first
        ));
    }
    if last < win.total {
        out.push_str(&format!("\nmore: {}", next_call(last + 1)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(source: &str, first: usize, lines: usize, bytes: usize) -> Window {
        window(source.as_bytes(), first, Limits { lines, bytes })
            .unwrap()
            .unwrap()
    }

    #[test]
    fn counts_lines_and_strips_endings() {
        let w = page("a\r\nb\nc", 1, 10, 100);
        assert_eq!(w.lines, ["a", "b", "c"]);
        assert_eq!(w.total, 3);
        assert_eq!(page("a\nb\n", 1, 10, 100).total, 2);
        assert_eq!(page("", 1, 10, 100).total, 0);
    }

    #[test]
    fn stops_at_the_line_cap_but_counts_all() {
        let w = page("1\n2\n3\n4\n5\n", 2, 2, 100);
        assert_eq!(w.lines, ["2", "3"]);
        assert_eq!(w.total, 5);
    }

    #[test]
    fn stops_at_the_byte_cap_counting_newlines() {
        // "aaa\n" is 4 bytes: two lines fill 8 bytes exactly, a third does not fit.
        let w = page("aaa\nbbb\nccc\n", 1, 10, 8);
        assert_eq!(w.lines, ["aaa", "bbb"]);
        // A line may fill the cap exactly when it is the last one shown.
        let w = page("aaa\nbbbb\n", 1, 10, 8);
        assert_eq!(w.lines, ["aaa", "bbbb"]);
    }

    #[test]
    fn a_long_first_line_is_cut_on_a_char_boundary() {
        // "é" is 2 bytes: 5 bytes keep 2 chars (4 bytes), never half a char.
        let w = page("ééé\nx\n", 1, 10, 5);
        assert_eq!(w.lines, ["éé"]);
        assert_eq!(w.cut_from, Some(6));
        assert_eq!(cut("€€", 5), "€");
        assert_eq!(cut("ab", 5), "ab");
    }

    #[test]
    fn nul_bytes_mean_binary() {
        assert!(window(&b"ok\nbin\0ary\n"[..], 1, Limits { lines: 1, bytes: 10 })
            .unwrap()
            .is_none());
    }

    #[test]
    fn render_headers_and_hints() {
        let labels = Labels {
            name: "n.md",
            unit: "file",
        };
        let hint = |n: usize| format!("next {n}");
        let whole = render(&labels, &page("a\nb\n", 1, 10, 100), hint).unwrap();
        assert_eq!(whole, "n.md: lines 1-2 of 2 (whole file)\na\nb");
        let part = render(&labels, &page("a\nb\nc\n", 2, 1, 100), hint).unwrap();
        assert_eq!(part, "n.md: lines 2-2 of 3\nb\nmore: next 3");
        let empty = render(&labels, &page("", 1, 10, 100), hint).unwrap();
        assert_eq!(empty, "n.md: empty file");
        let past = render(&labels, &page("a\n", 4, 10, 100), hint).unwrap_err();
        assert_eq!(past.0, "start_line 4 is past the end: n.md has 1 line");
        let cut = render(&labels, &page("abcdef\nx\n", 1, 10, 4), hint).unwrap();
        assert_eq!(
            cut,
            "n.md: lines 1-1 of 2\nabcd\n[line 1 cut: showed 4 of its 6 bytes]\nmore: next 2"
        );
    }
}
