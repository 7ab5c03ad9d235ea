use super::*;
use crate::tools::Toolbox;
use serde_json::Value;

/// ```text
/// ws/
///   index.html     title "Home"; links: docs/a.html#s, https://example.com,
///                  ../../etc/passwd, missing.html
///   docs/a.html    links: ../index.html, sub/b.md, #top
///   docs/sub/b.md  links: ../a.html, /index.html, mailto:x@y.z
/// ```
fn fixture() -> (tempfile::TempDir, Toolbox) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    fs::create_dir_all(ws.join("docs/sub")).unwrap();
    fs::write(
        ws.join("index.html"),
        "<html><head><title>Home</title></head><body><p>Go to <a href=\"docs/a.html#s\">A</a>, \
         <a href=\"https://example.com\">Ex</a>, <a href=\"../../etc/passwd\">bad</a>, \
         <a href=\"missing.html\">gone</a></p></body></html>",
    )
    .unwrap();
    fs::write(
        ws.join("docs/a.html"),
        "<h1>A</h1><p>Back <a href=\"../index.html\">home</a> or <a href=\"sub/b.md\">B</a> or <a href=\"#top\">up</a></p>",
    )
    .unwrap();
    fs::write(
        ws.join("docs/sub/b.md"),
        "# B\nsee [a](../a.html) and [top](/index.html) or [mail](mailto:x@y.z)\n",
    )
    .unwrap();
    let jail = Jail::new(ws).unwrap();
    (tmp, Toolbox::new(jail, false))
}

fn call(t: &mut Toolbox, name: &str, args: Value) -> Result<String, ToolError> {
    t.call(name, &args)
}

#[test]
fn opens_html_with_numbered_resolved_links() {
    let (_tmp, mut t) = fixture();
    let out = call(&mut t, "browser_open", json!({"path": "index.html"})).unwrap();
    let expect = "\
page index.html (Home): chars 0-38 of 38 (whole page)
Go to A [1], Ex [2], bad [3], gone [4]
Links:
[1] A -> docs/a.html
[2] Ex -> https://example.com (external, offline)
[3] bad -> ../../etc/passwd (outside the workspace)
[4] gone -> missing.html (missing)";
    assert_eq!(out, expect);
}

#[test]
fn follows_links_across_folders() {
    let (_tmp, mut t) = fixture();
    call(&mut t, "browser_open", json!({"path": "index.html"})).unwrap();
    let a = call(&mut t, "browser_follow", json!({"link": 1})).unwrap();
    let expect = "\
page docs/a.html: chars 0-34 of 34 (whole page)
A
Back home [1] or B [2] or up [3]
Links:
[1] home -> index.html
[2] B -> docs/sub/b.md
[3] up -> docs/a.html (this page)";
    assert_eq!(a, expect);
    let b = call(&mut t, "browser_follow", json!({"link": 2})).unwrap();
    let expect = "\
page docs/sub/b.md: chars 0-37 of 37 (whole page)
# B
see a [1] and top [2] or mail [3]
Links:
[1] a -> docs/a.html
[2] top -> index.html
[3] mail -> mailto:x@y.z (external, offline)";
    assert_eq!(b, expect);
    let back = call(&mut t, "browser_follow", json!({"link": 2})).unwrap();
    assert!(back.starts_with("page index.html (Home):"), "{back}");
}

#[test]
fn refuses_external_escaping_and_missing_links() {
    let (_tmp, mut t) = fixture();
    call(&mut t, "browser_open", json!({"path": "index.html"})).unwrap();
    let ext = call(&mut t, "browser_follow", json!({"link": 2})).unwrap_err();
    assert_eq!(ext.0, format!("link 2 points to https://example.com: {OFFLINE}"));
    let out = call(&mut t, "browser_follow", json!({"link": 3})).unwrap_err();
    assert!(
        out.0.starts_with("link 3 (../../etc/passwd) leaves the workspace"),
        "{out}"
    );
    let gone = call(&mut t, "browser_follow", json!({"link": 4})).unwrap_err();
    assert!(gone.0.contains("\"missing.html\" does not exist"), "{gone}");
    let none = call(&mut t, "browser_follow", json!({"link": 9})).unwrap_err();
    assert_eq!(none.0, "link 9 does not exist: index.html has 4 links");
    // A failed follow leaves the current page as it was.
    let find = call(&mut t, "browser_find", json!({"text": "gone"})).unwrap();
    assert!(
        find.ends_with("in index.html\nline 1 (start 0): Go to A [1], Ex [2], bad [3], gone [4]"),
        "{find}"
    );
}

#[test]
fn urls_and_escapes_cannot_be_opened() {
    let (_tmp, mut t) = fixture();
    for url in [
        "https://example.com",
        "http://localhost:8080/x",
        "file:///etc/passwd",
        "//host/x",
    ] {
        let err = call(&mut t, "browser_open", json!({"path": url})).unwrap_err();
        assert!(err.0.starts_with(OFFLINE), "{url}: {err}");
    }
    let err = call(&mut t, "browser_open", json!({"path": "../x.html"})).unwrap_err();
    assert!(err.0.contains("leaves the workspace"), "{err}");
}

#[cfg(unix)]
#[test]
fn links_through_symlinks_out_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("s.html"), "<p>secret</p>").unwrap();
    let (tmp, mut t) = fixture();
    std::os::unix::fs::symlink(outside.path(), tmp.path().join("out")).unwrap();
    fs::write(tmp.path().join("l.md"), "[s](out/s.html)").unwrap();
    let page = call(&mut t, "browser_open", json!({"path": "l.md"})).unwrap();
    assert!(page.ends_with("[1] s -> out/s.html (outside the workspace)"), "{page}");
    let err = call(&mut t, "browser_follow", json!({"link": 1})).unwrap_err();
    assert!(err.0.contains("outside the workspace"), "{err}");
}

#[test]
fn pages_long_text_and_lists_only_the_links_shown() {
    // "[first](a.md) " + 7,000 × "x" + " [last](b.md)": text "first [1] xxx… last [2]".
    let (tmp, mut t) = fixture();
    let body = format!("[first](a.md) {} [last](b.md)", "x".repeat(7000));
    fs::write(tmp.path().join("long.md"), body).unwrap();
    let total = "first [1] ".len() + 7000 + " last [2]".len();
    let one = call(&mut t, "browser_open", json!({"path": "long.md"})).unwrap();
    let lines: Vec<&str> = one.lines().collect();
    assert_eq!(lines[0], format!("page long.md: chars 0-6000 of {total}"));
    assert_eq!(lines[1].chars().count(), 6000);
    assert_eq!(
        lines[2],
        r#"more: call browser_open with {"path":"long.md","start":6000}"#
    );
    assert_eq!(&lines[3..], ["Links:", "[1] first -> a.md (missing)"]);
    let two = call(&mut t, "browser_open", json!({"path": "long.md", "start": 6000})).unwrap();
    let lines: Vec<&str> = two.lines().collect();
    assert_eq!(lines[0], format!("page long.md: chars 6000-{total} of {total}"));
    assert!(lines[1].ends_with("x last [2]"));
    assert_eq!(&lines[2..], ["Links:", "[2] last -> b.md (missing)"]);
    let past = call(&mut t, "browser_open", json!({"path": "long.md", "start": total})).unwrap_err();
    assert_eq!(
        past.0,
        format!("start {total} is past the end: long.md has {total} chars")
    );
}

#[test]
fn find_lists_matching_lines_case_insensitively() {
    let (tmp, mut t) = fixture();
    let err = call(&mut t, "browser_find", json!({"text": "x"})).unwrap_err();
    assert_eq!(err.0, "no page is open: call browser_open first");
    let err = call(&mut t, "browser_follow", json!({"link": 1})).unwrap_err();
    assert_eq!(err.0, "no page is open: call browser_open first");
    let body: String = (1..=30).map(|i| format!("<p>Row {i} KEY</p>")).collect();
    fs::write(tmp.path().join("rows.htm"), format!("<p>intro</p>{body}")).unwrap();
    call(&mut t, "browser_open", json!({"path": "rows.htm"})).unwrap();
    let out = call(&mut t, "browser_find", json!({"text": "key"})).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "first 20 of 30 lines matching \"key\" in rows.htm");
    // "intro\n" is 6 chars, so row 1 starts at 6 on line 2.
    assert_eq!(lines[1], "line 2 (start 6): Row 1 KEY");
    assert_eq!(lines[2], "line 3 (start 16): Row 2 KEY");
    assert_eq!(lines[21], "… 10 more: search for a longer text");
    let one = call(&mut t, "browser_find", json!({"text": "ROW 30"})).unwrap();
    assert_eq!(
        one,
        "1 line matching \"ROW 30\" in rows.htm\nline 31 (start 316): Row 30 KEY"
    );
    let none = call(&mut t, "browser_find", json!({"text": "zzz"})).unwrap();
    assert_eq!(none, "no match for \"zzz\" in rows.htm");
}

#[test]
fn folders_open_their_index_and_plain_files_open_as_text() {
    let (tmp, mut t) = fixture();
    fs::create_dir(tmp.path().join("site")).unwrap();
    fs::write(tmp.path().join("site/index.html"), "<p>site home</p>").unwrap();
    fs::write(tmp.path().join("data.csv"), "a,[b](c)\n").unwrap();
    let site = call(&mut t, "browser_open", json!({"path": "site"})).unwrap();
    assert_eq!(site, "page site/index.html: chars 0-9 of 9 (whole page)\nsite home");
    let csv = call(&mut t, "browser_open", json!({"path": "data.csv"})).unwrap();
    assert_eq!(csv, "page data.csv: chars 0-8 of 8 (whole page)\na,[b](c)");
    let err = call(&mut t, "browser_open", json!({"path": "docs"})).unwrap_err();
    assert!(err.0.contains("folder without index.html"), "{err}");
}

#[test]
fn hrefs_resolve_like_a_browser() {
    let check = |page: &str, href: &str, expect: Target| assert_eq!(resolve_href(page, href), expect, "{href}");
    let local = |p: &str| Target::Local(p.to_string());
    check("docs/a.html", "b.html", local("docs/b.html"));
    check("docs/a.html", "./sub/../c.html?x=1#frag", local("docs/c.html"));
    check("docs/a.html", "../", local("."));
    check("docs/a.html", "/top.html", local("top.html"));
    check("docs/a.html", "my%20file.md", local("docs/my file.md"));
    check("docs/a.html", "#frag", local("docs/a.html"));
    check("a.html", "../x", Target::Outside("../x".to_string()));
    check("a.html", "HTTPS://x.org", Target::External("HTTPS://x.org".to_string()));
    check(
        "a.html",
        "javascript:void(0)",
        Target::External("javascript:void(0)".to_string()),
    );
    assert_eq!(percent_decode("100%25 %zz %4"), "100% %zz %4");
    assert!(!has_scheme("c:/x") && !has_scheme("notes.md") && has_scheme("mailto:a@b"));
}
