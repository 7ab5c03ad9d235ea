//! Markdown and plain-text pages for the offline browser: the text as is,
//! with inline links `[text](target "title")` rendered as `text [n]` like
//! HTML links. Images (`![alt](src)`) and reference links stay as written.
//! One pass, O(length of the text).

use super::html::{Extracted, RawLink};

/// The text of a Markdown page with its inline links numbered.
pub(crate) fn extract(source: &str) -> Extracted {
    let mut text = String::with_capacity(source.len());
    let mut chars = 0;
    let mut links = Vec::new();
    let mut rest = source;
    while let Some(open) = rest.find('[') {
        let before = &rest[..open];
        push(&mut text, &mut chars, before);
        let image = before.ends_with('!');
        match parse_link(&rest[open..]).filter(|_| !image) {
            Some((label, href, len)) => {
                push(&mut text, &mut chars, label);
                let marker = format!("[{}]", links.len() + 1);
                let spaced = if label.is_empty() {
                    marker.clone()
                } else {
                    format!(" {marker}")
                };
                push(&mut text, &mut chars, &spaced);
                let offset = chars - marker.len();
                let text = if label.is_empty() {
                    href.clone()
                } else {
                    label.to_string()
                };
                links.push(RawLink { text, href, offset });
                rest = &rest[open + len..];
            }
            None => {
                push(&mut text, &mut chars, "[");
                rest = &rest[open + 1..];
            }
        }
    }
    push(&mut text, &mut chars, rest);
    Extracted {
        title: None,
        text,
        links,
    }
}

fn push(text: &mut String, chars: &mut usize, s: &str) {
    text.push_str(s);
    *chars += s.chars().count();
}

/// Parses `[label](target "title")` at the start of `s` (on one line);
/// returns the label, the target and the length of the whole link.
fn parse_link(s: &str) -> Option<(&str, String, usize)> {
    let close = s.find([']', '\n'])?;
    if s.as_bytes()[close] != b']' || s[1..close].contains('[') {
        return None;
    }
    let after = s[close + 1..].strip_prefix('(')?;
    let end = after.find([')', '\n'])?;
    if after.as_bytes()[end] != b')' {
        return None;
    }
    let inside = after[..end].trim();
    let target = match inside.strip_prefix('<') {
        Some(angled) => angled.split('>').next()?,
        None => inside.split_whitespace().next()?,
    };
    if target.is_empty() {
        return None;
    }
    Some((s[1..close].trim(), target.to_string(), close + 2 + end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(source: &str, text: &str, hrefs: &[&str]) {
        let page = extract(source);
        assert_eq!(page.text, text);
        let got: Vec<&str> = page.links.iter().map(|l| l.href.as_str()).collect();
        assert_eq!(got, hrefs);
        for (i, link) in page.links.iter().enumerate() {
            let at: String = page.text.chars().skip(link.offset).take(3).collect();
            assert_eq!(at, format!("[{}]", i + 1), "{source}");
        }
    }

    #[test]
    fn inline_links_are_numbered() {
        check(
            "# Doc\nSee [the guide](docs/guide.md) and [site](https://x.org \"X\").\n",
            "# Doc\nSee the guide [1] and site [2].\n",
            &["docs/guide.md", "https://x.org"],
        );
        check("é [ü](<a b.md>)", "é ü [1]", &["a b.md"]);
        check("[](empty.md)", "[1]", &["empty.md"]);
    }

    #[test]
    fn other_brackets_stay_as_written() {
        check(
            "![cat](cat.png) [ref][1] [x] (y) [a\n](b) [c]()",
            "![cat](cat.png) [ref][1] [x] (y) [a\n](b) [c]()",
            &[],
        );
        check("[[nested](n.md)", "[nested [1]", &["n.md"]);
    }

    #[test]
    fn link_text_is_kept_for_the_list() {
        let page = extract("[a](x.md)[](y.md)");
        assert_eq!(page.links[0].text, "a");
        assert_eq!(page.links[1].text, "y.md");
        assert_eq!(page.text, "a [1][2]");
    }
}
