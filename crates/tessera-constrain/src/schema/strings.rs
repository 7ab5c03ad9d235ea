//! String keywords: `minLength`, `maxLength` (code points), `pattern`
//! (ECMA-262) and `format` (asserted for the formats in [`FORMATS`]).

use super::compile::{count, At, Compiler};
use super::{StringSpec, MAX_LENGTH_BOUND};
use crate::error::ConstrainError;
use crate::pattern::{Dfa, FORMATS};
use serde_json::{Map, Value};
use std::sync::Arc;

/// OpenAPI's number formats: each already holds for every number the
/// automaton writes (integers fit an i64, numbers an f64, and `float`'s range
/// is wider than the 20 integer digits a number may have), except `int32`,
/// which [`Compiler::number`] bounds.
const NUMBER_FORMATS: &[&str] = &["int32", "int64", "float", "double"];

impl Compiler<'_> {
    pub(super) fn string_shape(&mut self, map: &Map<String, Value>, at: &At<'_>) -> Result<StringSpec, ConstrainError> {
        let (dfa, format_max) = self.text_pattern(map, at)?;
        let min = count(map, "minLength", at)?.unwrap_or(0);
        let max = count(map, "maxLength", at)?;
        for (key, bound) in [("minLength", Some(min)), ("maxLength", max)] {
            if bound.is_some_and(|b| b > MAX_LENGTH_BOUND) {
                return Err(at.child(key).error(format!(
                    "{} is over the longest length bound supported ({MAX_LENGTH_BOUND})",
                    bound.unwrap_or_default()
                )));
            }
        }
        Ok(StringSpec {
            min_len: min as u32,
            max_len: max.map_or(u32::MAX, |m| m as u32).min(format_max),
            dfa,
        })
    }

    /// What `pattern` and `format` require of a string's text (one table for
    /// both), and the longest text the format allows.
    fn text_pattern(
        &mut self,
        map: &Map<String, Value>,
        at: &At<'_>,
    ) -> Result<(Option<Arc<Dfa>>, u32), ConstrainError> {
        let mut found: Vec<Arc<Dfa>> = Vec::new();
        let mut max_len = u32::MAX;
        if let Some(source) = map.get("pattern") {
            let at = at.child("pattern");
            let source = source.as_str().ok_or_else(|| at.error("must be a string"))?;
            match self.arena.pattern_cache.ecma(source) {
                Ok(dfa) => found.push(dfa),
                Err(why) => self.unsupported(&at, "pattern", &format!("the pattern {}", why.0))?,
            }
        }
        if let Some(name) = map.get("format") {
            let at = at.child("format");
            let name = name.as_str().ok_or_else(|| at.error("must be a string"))?;
            match self.arena.pattern_cache.format(name) {
                Some(Ok((dfa, longest))) => {
                    found.push(dfa);
                    max_len = longest;
                }
                Some(Err(why)) => return Err(at.error(format!("format `{name}` {}", why.0))),
                None if NUMBER_FORMATS.contains(&name) => {}
                None => self.unsupported(
                    &at,
                    "format",
                    &format!("format `{name}` is not among those enforced ({})", FORMATS.join(", ")),
                )?,
            }
        }
        let dfa = match found.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            [a, b, ..] => Some(Arc::new(
                a.intersect(b)
                    .map_err(|e| at.error(format!("`pattern` with `format`: {}", e.0)))?,
            )),
        };
        Ok((dfa, max_len))
    }
}
