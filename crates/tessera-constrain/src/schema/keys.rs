//! `patternProperties` and `propertyNames`: the key patterns of an object,
//! its key table ([`KeyDfa`]), and the schema of an undeclared key for each
//! set of key patterns it may match.

use super::compile::{At, Compiler};
use super::{KeyRules, Node, NodeId};
use crate::error::ConstrainError;
use crate::pattern::{Dfa, KeyDfa, MAX_KEY_PATTERNS};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The longest `propertyNames` length bound (counted by the key table's states).
const MAX_NAME_LENGTH_BOUND: u32 = 256;

/// A key pattern and the schema of the properties it matches.
pub(super) type KeyPattern = (Arc<Dfa>, NodeId);

impl Compiler<'_> {
    /// `patternProperties`: each pattern compiled, with its schema.
    pub(super) fn key_patterns(
        &mut self,
        map: &Map<String, Value>,
        at: &At<'_>,
    ) -> Result<Vec<KeyPattern>, ConstrainError> {
        let Some(entries) = map.get("patternProperties") else {
            return Ok(Vec::new());
        };
        let at = at.child("patternProperties");
        let entries = entries.as_object().ok_or_else(|| at.error("must be an object"))?;
        if entries.len() > MAX_KEY_PATTERNS {
            return Err(at.error(format!(
                "{} patterns, over the limit of {MAX_KEY_PATTERNS} per object",
                entries.len()
            )));
        }
        let mut patterns = Vec::new();
        for (source, schema) in entries {
            let at = at.child(source);
            match self.arena.pattern_cache.ecma(source) {
                Ok(dfa) => patterns.push((dfa, self.compile(schema, &at)?)),
                // Lenient: keys it would match fall to additionalProperties (fewer values, never invalid ones).
                Err(why) => self.unsupported(&at, "patternProperties", &format!("the pattern {}", why.0))?,
            }
        }
        Ok(patterns)
    }

    /// The key table of an object with key patterns or `propertyNames`, with
    /// the schema per pattern set (set 0: `additional`, or `Never`).
    pub(super) fn key_table(
        &mut self,
        map: &Map<String, Value>,
        at: &At<'_>,
        names: &[String],
        patterns: Vec<KeyPattern>,
        additional: Option<NodeId>,
    ) -> Result<Option<KeyRules>, ConstrainError> {
        let allowed = self.property_names(map, at)?;
        if patterns.is_empty() && allowed.is_none() {
            return Ok(None);
        }
        let mut by_pattern = Vec::with_capacity(1 << patterns.len());
        by_pattern.push(additional.unwrap_or(self.arena.never));
        for set in 1..1u32 << patterns.len() {
            let mut node = self.arena.any;
            for (i, (_, schema)) in patterns.iter().enumerate() {
                if set >> i & 1 != 0 {
                    node = self.merger.intersect(self.arena, node, *schema, at)?;
                }
            }
            by_pattern.push(node);
        }
        let dfas: Vec<Arc<Dfa>> = patterns.into_iter().map(|(dfa, _)| dfa).collect();
        let keys = KeyDfa::build(names, &dfas, allowed.as_deref())
            .map_err(|why| at.child("patternProperties").error(why.0))?;
        Ok(Some((Arc::new(keys), by_pattern)))
    }

    /// `propertyNames` as a table over the key text (`None`: any name).
    fn property_names(&mut self, map: &Map<String, Value>, at: &At<'_>) -> Result<Option<Arc<Dfa>>, ConstrainError> {
        let Some(schema) = map.get("propertyNames") else {
            return Ok(None);
        };
        let at = at.child("propertyNames");
        let compiled = self.compile(schema, &at)?;
        let node = self.string_part(compiled);
        let nothing = || self.arena.pattern_cache.ecma("^[]$").map_err(|why| at.error(why.0));
        match self.arena.nodes[node as usize].clone() {
            Node::Any => Ok(None),
            Node::String(shape) => {
                let spec = self.arena.string_spec(&shape);
                let (min, max) = (spec.min_len, spec.max_len);
                if min > MAX_NAME_LENGTH_BOUND || (max != u32::MAX && max > MAX_NAME_LENGTH_BOUND) {
                    return Err(at.error(format!(
                        "a name length bound over {MAX_NAME_LENGTH_BOUND} is not supported"
                    )));
                }
                let upper = if max == u32::MAX {
                    String::new()
                } else {
                    max.to_string()
                };
                let lengths = Dfa::from_regex(&format!("(?s:.){{{min},{upper}}}")).map_err(|why| at.error(why.0))?;
                let table = match spec.dfa {
                    Some(dfa) => dfa.intersect(&lengths).map_err(|why| at.error(why.0))?,
                    None => lengths,
                };
                Ok(Some(Arc::new(table)))
            }
            Node::Literals(trie) => {
                let names: Vec<String> = self.arena.tries[trie as usize]
                    .strings()
                    .iter()
                    .filter_map(|text| serde_json::from_slice::<String>(text).ok())
                    .collect();
                if names.is_empty() {
                    return Ok(Some(nothing()?));
                }
                let alternatives: Vec<String> = names.iter().map(|name| literal_regex(name)).collect();
                let table =
                    Dfa::from_regex(&format!("(?:{})", alternatives.join("|"))).map_err(|why| at.error(why.0))?;
                Ok(Some(Arc::new(table)))
            }
            Node::Union(_) | Node::OneOf(_) | Node::Pending => {
                self.unsupported(&at, "propertyNames", "a name schema with alternatives")?;
                Ok(None)
            }
            // No string is a value of these: no key is allowed.
            Node::Never | Node::Null | Node::Boolean | Node::Number(_) | Node::Array(_) | Node::Object(_) => {
                Ok(Some(nothing()?))
            }
        }
    }
}

impl Compiler<'_> {
    /// The alternatives of `node` that may be strings: names are strings, so
    /// `{"maxLength": 3}` (a union over every type) reads as its string part.
    fn string_part(&self, node: NodeId) -> NodeId {
        let Node::Union(alternatives) = &self.arena.nodes[node as usize] else {
            return node;
        };
        let strings: Vec<NodeId> = alternatives
            .iter()
            .copied()
            .filter(|&n| {
                matches!(
                    self.arena.nodes[n as usize],
                    Node::Any | Node::String(_) | Node::Literals(_) | Node::Union(_) | Node::OneOf(_)
                )
            })
            .collect();
        match strings.as_slice() {
            [] => self.arena.never,
            [one] => *one,
            _ => node,
        }
    }
}

/// A regex matching exactly `text`.
fn literal_regex(text: &str) -> String {
    text.chars().map(|c| format!(r"\x{{{:X}}}", c as u32)).collect()
}
