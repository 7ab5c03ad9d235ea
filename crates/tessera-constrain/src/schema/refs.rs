//! Local references: `#`, JSON pointers (`#/$defs/item`, percent-encoded and
//! `~`-escaped), and `$anchor` names, resolved inside the one document; the
//! root's `$id` may prefix them. Remote and relative URIs are not fetched.

use serde_json::Value;
use std::collections::HashMap;

/// One schema document and what its references can name.
pub(super) struct Document<'a> {
    pub tool: &'a str,
    pub root: &'a Value,
    base: Option<&'a str>,
    /// `$anchor` (and `$dynamicAnchor`) name → JSON pointer.
    anchors: HashMap<String, String>,
}

impl<'a> Document<'a> {
    pub fn new(tool: &'a str, root: &'a Value) -> Self {
        let base = root.get("$id").and_then(Value::as_str);
        let mut anchors = HashMap::new();
        collect_anchors(root, String::new(), &mut anchors);
        Self {
            tool,
            root,
            base,
            anchors,
        }
    }

    /// The JSON pointer and schema `reference` names, or why it cannot be followed.
    pub fn resolve(&self, reference: &str) -> Result<(String, &'a Value), String> {
        let local = match self.base {
            Some(base) if reference.starts_with(base) => &reference[base.len()..],
            _ => reference,
        };
        let fragment = match local {
            "" => "",
            _ => local
                .strip_prefix('#')
                .ok_or_else(|| format!("`{reference}` is not a local reference (remote schemas are not fetched)"))?,
        };
        let pointer = match fragment {
            "" => String::new(),
            f if f.starts_with('/') => percent_decode(f).ok_or_else(|| format!("`{reference}` is badly escaped"))?,
            name => self
                .anchors
                .get(name)
                .cloned()
                .ok_or_else(|| format!("no `$anchor` named `{name}`"))?,
        };
        let target = self
            .root
            .pointer(&pointer)
            .ok_or_else(|| format!("`{reference}` points at nothing in the schema"))?;
        Ok((pointer, target))
    }
}

fn collect_anchors(value: &Value, pointer: String, anchors: &mut HashMap<String, String>) {
    match value {
        Value::Object(map) => {
            for key in ["$anchor", "$dynamicAnchor"] {
                if let Some(name) = map.get(key).and_then(Value::as_str) {
                    anchors.entry(name.to_string()).or_insert_with(|| pointer.clone());
                }
            }
            for (key, child) in map {
                let segment = key.replace('~', "~0").replace('/', "~1");
                collect_anchors(child, format!("{pointer}/{segment}"), anchors);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                collect_anchors(child, format!("{pointer}/{i}"), anchors);
            }
        }
        _ => {}
    }
}

/// `%XX` escapes decoded (the pointer's `~0`/`~1` stay for `Value::pointer`).
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
