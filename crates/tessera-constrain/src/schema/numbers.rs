//! `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` and
//! `multipleOf` → a [`NumberShape`] in scaled units (exact decimals: the
//! bound's own digits, not a float's).

use super::compile::{At, Compiler};
use super::{lcm, NodeId, NumberShape, SCALE, SCALED_LIMIT};
use crate::error::ConstrainError;
use serde_json::{Map, Number, Value};

/// A bound as the automaton sees it.
enum Scaled {
    Exact(i128),
    /// Beyond what a bounded number is written with (±10^19); the sign.
    Beyond(bool),
    /// More than 18 decimal places.
    TooFine,
}

/// `number` scaled by 10^18, read from its decimal text.
fn scaled(number: &Number) -> Scaled {
    let text = number.to_string();
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (text.as_str(), 0),
    };
    let negative = mantissa.starts_with('-');
    let digits = mantissa.trim_start_matches('-');
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all: String = format!("{int}{frac}");
    let all = all.trim_start_matches('0');
    // value = all × 10^(exponent − frac.len()); scaled: × 10^18.
    let shift = exponent - frac.len() as i32 + 18;
    let significant = all.trim_end_matches('0');
    let shift = shift + (all.len() - significant.len()) as i32;
    if significant.is_empty() {
        return Scaled::Exact(0);
    }
    if shift < 0 {
        return Scaled::TooFine;
    }
    let magnitude = significant
        .parse::<i128>()
        .ok()
        .and_then(|m| 10i128.checked_pow(shift as u32).and_then(|p| m.checked_mul(p)))
        .filter(|m| *m <= SCALED_LIMIT);
    match magnitude {
        Some(m) => Scaled::Exact(if negative { -m } else { m }),
        None => Scaled::Beyond(!negative),
    }
}

impl Compiler<'_> {
    /// The number shape of a schema object (`integer` when its type says so).
    pub(super) fn number(
        &mut self,
        map: &Map<String, Value>,
        at: &At<'_>,
        integer: bool,
    ) -> Result<NodeId, ConstrainError> {
        let mut shape = NumberShape {
            integer,
            ..NumberShape::ANY
        };
        for (key, lower, inward) in [
            ("minimum", true, 0),
            ("exclusiveMinimum", true, 1),
            ("maximum", false, 0),
            ("exclusiveMaximum", false, -1),
        ] {
            let Some(value) = map.get(key) else {
                continue;
            };
            let at = at.child(key);
            let number = value.as_number().ok_or_else(|| at.error("must be a number"))?;
            match (scaled(number), lower) {
                (Scaled::Exact(v), true) => shape.min = Some(shape.min.map_or(v + inward, |m| m.max(v + inward))),
                (Scaled::Exact(v), false) => shape.max = Some(shape.max.map_or(v + inward, |m| m.min(v + inward))),
                // A bound past ±10^19 on the far side leaves no value the automaton
                // writes; on the near side, no limit.
                (Scaled::Beyond(positive), true) if positive => return self.unwritable(&at),
                (Scaled::Beyond(positive), false) if !positive => return self.unwritable(&at),
                (Scaled::Beyond(_), _) => {}
                (Scaled::TooFine, _) => {
                    return Err(at.error(format!("{number} has more than 18 decimal places")));
                }
            }
        }
        if map.get("format").and_then(Value::as_str) == Some("int32") {
            let (lo, hi) = (i32::MIN as i128 * SCALE, i32::MAX as i128 * SCALE);
            shape.min = Some(shape.min.map_or(lo, |m| m.max(lo)));
            shape.max = Some(shape.max.map_or(hi, |m| m.min(hi)));
        }
        if let Some(value) = map.get("multipleOf") {
            let at = at.child("multipleOf");
            let step = match value.as_number().map(scaled) {
                Some(Scaled::Exact(step)) if step > 0 => step,
                Some(Scaled::TooFine) => return Err(at.error("more than 18 decimal places")),
                Some(Scaled::Beyond(true)) => return Err(at.error("over 10^19")),
                _ => return Err(at.error("must be a number greater than 0")),
            };
            shape.step = lcm(shape.step, step).ok_or_else(|| at.error("too large"))?;
        }
        let node = self.arena.number(shape);
        if self.arena.is_never(node) && !surely_empty(&shape) {
            return self.unwritable(at);
        }
        Ok(node)
    }

    /// Numbers the automaton cannot write (past 19 digits, or an integer past
    /// i64): none, except inside an overlapping `oneOf`, where dropping an
    /// alternative would let through values it matches: refused there.
    fn unwritable(&mut self, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        match self.exact {
            0 => Ok(self.arena.never),
            _ => Err(at.error(
                "inside an overlapping `oneOf`, numbers past what the automaton writes (19 integer digits, integers within i64) cannot be excluded",
            )),
        }
    }
}

/// Whether no number at all meets `shape`'s bounds (not just none the automaton writes).
fn surely_empty(shape: &NumberShape) -> bool {
    let writable = |v: i128| v.abs() <= SCALED_LIMIT;
    let int64 = |v: i128| (i64::MIN as i128 * SCALE..=i64::MAX as i128 * SCALE).contains(&v);
    match (shape.min, shape.max) {
        (Some(lo), Some(hi)) if lo > hi => true,
        (Some(lo), Some(hi)) => writable(lo) && writable(hi) && (!shape.integer || int64(lo) && int64(hi)),
        _ => false,
    }
}
