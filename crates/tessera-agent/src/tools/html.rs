//! A small, tolerant HTML-to-text extractor for the offline browser.
//!
//! One left-to-right pass over the source, no tree: text runs are
//! entity-decoded and whitespace-collapsed, block tags become line breaks,
//! `<li>` starts a `- ` line, `<pre>` keeps its whitespace, `<script>`,
//! `<style>` and the contents of `<head>` are dropped (the first `<title>` is
//! kept apart), and `<a href>` renders as `text [n]`, numbering links in
//! order. Malformed markup degrades to text: a `<` that does not start a tag
//! is kept, an unclosed tag ends the input, unclosed elements close at the
//! end. O(length of the source).

/// A link found in a page, before it is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawLink {
    /// The link text (the target when the text is empty).
    pub(crate) text: String,
    /// The target as written in the source, entities decoded.
    pub(crate) href: String,
    /// Char offset of its `[n]` marker in the extracted text.
    pub(crate) offset: usize,
}

/// A page turned into text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Extracted {
    /// The `<title>`, if any.
    pub(crate) title: Option<String>,
    /// The readable text, links rendered as `text [n]`.
    pub(crate) text: String,
    /// The links, `links[n - 1]` being link `[n]`.
    pub(crate) links: Vec<RawLink>,
}

/// Tags that break lines (on open and on close).
const BLOCK_TAGS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "br",
    "caption",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "option",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "tfoot",
    "thead",
    "tr",
    "ul",
];

/// Elements whose content is never text.
const DROPPED_TAGS: &[&str] = &["script", "style", "noscript", "template"];

/// Text output with whitespace collapsing and a char count for link offsets.
#[derive(Debug, Default)]
pub(crate) struct TextOut {
    text: String,
    chars: usize,
    /// Whitespace seen since the last char; becomes one space before the next.
    space: bool,
    /// Inside `<pre>`: whitespace is kept.
    pre: usize,
}

impl TextOut {
    /// Appends decoded text, collapsing whitespace outside `<pre>`.
    pub(crate) fn push_text(&mut self, s: &str) {
        for c in s.chars() {
            if self.pre > 0 {
                self.push_char(if c == '\u{a0}' { ' ' } else { c });
            } else if c.is_whitespace() {
                self.space = true;
            } else {
                if self.space && !self.text.is_empty() && !self.text.ends_with('\n') {
                    self.push_char(' ');
                }
                self.space = false;
                self.push_char(c);
            }
        }
    }

    /// Ends the current line (never leaves blank lines or leading breaks).
    pub(crate) fn line_break(&mut self) {
        self.space = false;
        while self.text.ends_with(' ') {
            self.text.pop();
            self.chars -= 1;
        }
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.push_char('\n');
        }
    }

    /// Appends the `[n]` marker after a link; returns its char offset.
    pub(crate) fn marker(&mut self, n: usize) -> usize {
        self.space = true;
        self.push_text(&format!("[{n}]"));
        self.chars - format!("[{n}]").len()
    }

    fn push_char(&mut self, c: char) {
        self.text.push(c);
        self.chars += 1;
    }

    /// The text so far, trailing whitespace removed.
    pub(crate) fn finish(mut self) -> String {
        let len = self.text.trim_end().len();
        self.text.truncate(len);
        self.text
    }
}

/// A parsed tag.
#[derive(Debug, PartialEq, Eq)]
struct Tag {
    /// Lowercase name.
    name: String,
    closing: bool,
    attrs: Vec<(String, String)>,
}

impl Tag {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Extraction state.
#[derive(Debug, Default)]
struct Extractor {
    out: TextOut,
    title: Option<String>,
    in_head: bool,
    /// The open `<a>`: its href and where its text starts in `out.text`.
    link: Option<(String, usize)>,
    links: Vec<RawLink>,
}

/// Extracts the text, title and links of an HTML page.
pub(crate) fn extract(html: &str) -> Extracted {
    let mut ex = Extractor::default();
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        ex.text(&rest[..lt]);
        rest = ex.markup(&rest[lt..]);
    }
    ex.text(rest);
    ex.close_link();
    Extracted {
        title: ex.title,
        text: ex.out.finish(),
        links: ex.links,
    }
}

impl Extractor {
    fn text(&mut self, raw: &str) {
        if !self.in_head && !raw.is_empty() {
            self.out.push_text(&decode_entities(raw));
        }
    }

    /// Handles the markup at the start of `s` (which starts with `<`);
    /// returns what follows it.
    fn markup<'a>(&mut self, s: &'a str) -> &'a str {
        if let Some(body) = s.strip_prefix("<!--") {
            return body.find("-->").map_or("", |end| &body[end + 3..]);
        }
        if s.starts_with("<!") || s.starts_with("<?") {
            return s.find('>').map_or("", |end| &s[end + 1..]);
        }
        if !starts_tag(s) {
            self.text("<");
            return &s[1..];
        }
        let Some((tag, len)) = parse_tag(s) else {
            return ""; // a tag never closed swallows the rest, as in browsers
        };
        let rest = &s[len..];
        if !tag.closing && (DROPPED_TAGS.contains(&tag.name.as_str()) || tag.name == "title") {
            let (content, after) = raw_content(rest, &tag.name);
            if tag.name == "title" && self.title.is_none() {
                let mut title = TextOut::default();
                title.push_text(&decode_entities(content));
                self.title = Some(title.finish()).filter(|t| !t.is_empty());
            }
            return after;
        }
        self.tag(&tag);
        rest
    }

    fn tag(&mut self, tag: &Tag) {
        let name = tag.name.as_str();
        match (name, tag.closing) {
            ("head", false) => self.in_head = true,
            ("head", true) => self.in_head = false,
            ("a", false) => {
                self.close_link();
                if let Some(href) = tag.attr("href") {
                    self.link = Some((href.to_string(), self.out.text.len()));
                }
            }
            ("a", true) => self.close_link(),
            ("img", false) => {
                if let Some(alt) = tag.attr("alt") {
                    self.text(alt);
                }
            }
            ("td" | "th", _) => self.out.push_text(" "),
            _ => {}
        }
        if BLOCK_TAGS.contains(&name) {
            self.in_head = false;
            self.out.line_break();
            if name == "pre" {
                self.out.pre = if tag.closing {
                    self.out.pre.saturating_sub(1)
                } else {
                    self.out.pre + 1
                };
            }
            if name == "li" && !tag.closing {
                self.out.push_text("- ");
            }
        }
    }

    fn close_link(&mut self) {
        let Some((href, start)) = self.link.take() else { return };
        let mut text = TextOut::default();
        text.push_text(self.out.text.get(start..).unwrap_or(""));
        let text = text.finish();
        let n = self.links.len() + 1;
        let offset = self.out.marker(n);
        let text = if text.is_empty() { href.clone() } else { text };
        self.links.push(RawLink { text, href, offset });
    }
}

/// The content of a raw-text element up to its closing tag (any case), and
/// what follows that tag; all the rest when it is never closed.
fn raw_content<'a>(s: &'a str, name: &str) -> (&'a str, &'a str) {
    let close = format!("</{name}");
    let found = s
        .as_bytes()
        .windows(close.len())
        .position(|w| w.eq_ignore_ascii_case(close.as_bytes()));
    match found {
        Some(at) => {
            let after = &s[at..];
            let end = after.find('>').map_or(after.len(), |i| i + 1);
            (&s[..at], &after[end..])
        }
        None => (s, ""),
    }
}

/// Whether `s` starts like a tag: `<` then a letter, or `</` then a letter.
fn starts_tag(s: &str) -> bool {
    let name = s.strip_prefix("</").or_else(|| s.strip_prefix('<')).unwrap_or(s);
    name.starts_with(|c: char| c.is_ascii_alphabetic())
}

/// Parses a tag at the start of `s`; `None` when `s` does not start one
/// (a lone `<`, or a tag never closed by `>`). Returns the tag and its length.
fn parse_tag(s: &str) -> Option<(Tag, usize)> {
    let bytes = s.as_bytes();
    let mut i = 1;
    let closing = bytes.get(i) == Some(&b'/');
    if closing {
        i += 1;
    }
    let name_start = i;
    if !bytes.get(i)?.is_ascii_alphabetic() {
        return None;
    }
    while bytes.get(i).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'-') {
        i += 1;
    }
    let name = s[name_start..i].to_ascii_lowercase();
    let mut attrs = Vec::new();
    loop {
        while bytes.get(i).is_some_and(|b| b.is_ascii_whitespace() || *b == b'/') {
            i += 1;
        }
        match bytes.get(i)? {
            b'>' => return Some((Tag { name, closing, attrs }, i + 1)),
            _ => {
                let (attr, next) = parse_attr(s, i)?;
                attrs.push(attr);
                i = next;
            }
        }
    }
}

/// Parses `name`, `name=value`, `name="value"` or `name='value'` at `i`.
fn parse_attr(s: &str, mut i: usize) -> Option<((String, String), usize)> {
    let bytes = s.as_bytes();
    let start = i;
    while bytes
        .get(i)
        .is_some_and(|b| !b.is_ascii_whitespace() && !b"=>/".contains(b))
    {
        i += 1;
    }
    if i == start {
        i += 1; // a stray '=': skip it
    }
    let name = s[start..i].to_ascii_lowercase();
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    if bytes.get(i) != Some(&b'=') {
        return Some(((name, String::new()), i));
    }
    i += 1;
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    let (value, next) = match bytes.get(i)? {
        q @ (b'"' | b'\'') => {
            let len = s[i + 1..].find(*q as char)?;
            (&s[i + 1..i + 1 + len], i + len + 2)
        }
        _ => {
            let len = s[i..]
                .find(|c: char| c.is_ascii_whitespace() || c == '>')
                .unwrap_or(s.len() - i);
            (&s[i..i + len], i + len)
        }
    };
    Some(((name, decode_entities(value)), next))
}

/// Decodes `&amp; &lt; &gt; &quot; &apos; &#39; &nbsp;` (and a few more
/// named ones) and numeric `&#NN;` / `&#xHH;`; anything else stays as is.
pub(crate) fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        // ';' is ASCII, so its byte position is a char boundary.
        let decoded = rest.as_bytes()[1..]
            .iter()
            .take(ENTITY_MAX_LEN + 1)
            .position(|&b| b == b';')
            .and_then(|semi| Some((entity(&rest[1..semi + 1])?, semi + 2)));
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Longest entity body looked for (`#x10FFFF` is 8 chars).
const ENTITY_MAX_LEN: usize = 10;

/// The char of an entity body (between `&` and `;`).
fn entity(body: &str) -> Option<char> {
    if let Some(num) = body.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse::<u32>().ok()?,
        };
        return Some(char::from_u32(code).filter(|&c| c != '\0').unwrap_or('\u{fffd}'));
    }
    Some(match body {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => '\u{a0}',
        "copy" => '©',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "laquo" => '«',
        "raquo" => '»',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(html: &str) -> String {
        extract(html).text
    }

    #[test]
    fn decodes_entities() {
        assert_eq!(
            decode_entities("a &amp; b &lt;c&gt; &quot;d&quot; &#39;e&#39;"),
            "a & b <c> \"d\" 'e'"
        );
        assert_eq!(decode_entities("&#65;&#x42;&#X43;&#0;"), "ABC\u{fffd}");
        assert_eq!(decode_entities("AT&T &bogus; &amp"), "AT&T &bogus; &amp");
        assert_eq!(decode_entities("x&nbsp;y"), "x\u{a0}y");
        assert_eq!(decode_entities("&amp;ééééé&#x20AC;"), "&ééééé€");
        assert_eq!(text("<p>x&nbsp;&nbsp; y</p>"), "x y");
    }

    #[test]
    fn drops_script_style_and_head_but_keeps_the_title() {
        let page = extract(
            "<html><head><title>My &amp; Page</title><meta charset=utf-8><style>p{}</style></head>\
             <body><script>var a = '<p>no</p>';</script><p>Hello</p><SCRIPT>x()</SCRIPT></body></html>",
        );
        assert_eq!(page.title.as_deref(), Some("My & Page"));
        assert_eq!(page.text, "Hello");
    }

    #[test]
    fn blocks_break_lines_and_inline_tags_do_not() {
        let html = "<h1>Title</h1>\n<p>One <b>bold</b>   and\n<i>it</i>.</p><div><div>Nested</div></div>\
                    <ul><li>a</li><li>b <em>c</em></li></ul>x<br>y";
        assert_eq!(text(html), "Title\nOne bold and it.\nNested\n- a\n- b c\nx\ny");
    }

    #[test]
    fn pre_keeps_its_whitespace() {
        assert_eq!(text("<p>a</p><pre>  x\n    y</pre><p>b</p>"), "a\n  x\n    y\nb");
    }

    #[test]
    fn links_are_numbered_with_their_offsets() {
        let page = extract("<p>See <a href=\"b.html#top\">the <b>next</b> page</a> or <a href='https://x.org/?a=1&amp;b=2'>X</a>.</p><a href=c.html></a>");
        assert_eq!(page.text, "See the next page [1] or X [2].\n[3]");
        let hrefs: Vec<&str> = page.links.iter().map(|l| l.href.as_str()).collect();
        assert_eq!(hrefs, ["b.html#top", "https://x.org/?a=1&b=2", "c.html"]);
        assert_eq!(page.links[0].text, "the next page");
        assert_eq!(page.links[2].text, "c.html");
        for (i, link) in page.links.iter().enumerate() {
            let at: String = page.text.chars().skip(link.offset).take(3).collect();
            assert_eq!(at, format!("[{}]", i + 1));
        }
    }

    #[test]
    fn anchors_without_href_are_plain_text() {
        let page = extract("<a name=x>plain</a> text");
        assert_eq!(page.text, "plain text");
        assert!(page.links.is_empty());
    }

    #[test]
    fn offsets_count_chars_not_bytes() {
        let page = extract("<p>héllo €</p><a href=a.md>ü</a>");
        assert_eq!(page.text, "héllo €\nü [1]");
        assert_eq!(page.links[0].offset, 10);
    }

    #[test]
    fn tolerates_broken_markup() {
        assert_eq!(text("a < b and 3<4 <p>ok"), "a < b and 3<4\nok");
        assert_eq!(text("<!-- hidden <p>x</p> -->shown<!DOCTYPE html>"), "shown");
        assert_eq!(text("<p class=\"unterminated>never"), "");
        assert_eq!(text("<div>open <a href=x>dangling"), "open dangling [1]");
        assert_eq!(text("<script>never closed"), "");
        assert_eq!(text("<img src=a.png alt=\"A cat\"> <td>1</td><td>2</td>"), "A cat 1 2");
    }

    #[test]
    fn parses_attributes() {
        let (tag, len) = parse_tag("<A HREF = 'x y' data-k=v disabled/>rest").unwrap();
        assert_eq!(tag.name, "a");
        assert_eq!(tag.attr("href"), Some("x y"));
        assert_eq!(tag.attr("data-k"), Some("v"));
        assert_eq!(tag.attr("disabled"), Some(""));
        assert_eq!(len, "<A HREF = 'x y' data-k=v disabled/>".len());
        assert!(parse_tag("< p>").is_none());
        assert!(parse_tag("<p").is_none());
    }
}
