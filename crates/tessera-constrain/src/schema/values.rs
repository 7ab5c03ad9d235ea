//! `enum` and `const`: scalars become one literal set (every spelling of a
//! number: `1`, `1.0`), objects and arrays exact shapes (keys in any order);
//! [`super::merge`] then keeps only what the rest of the schema accepts.

use super::compile::{At, Compiler};
use super::{ArrayShape, NodeId, ObjectRules};
use crate::error::ConstrainError;
use serde_json::{Map, Value};

impl Compiler<'_> {
    /// `enum` and `const` as a node (scalars as literals, containers as exact shapes).
    pub(super) fn values(&mut self, map: &Map<String, Value>, at: &At<'_>) -> Result<Option<NodeId>, ConstrainError> {
        let mut values: Option<Vec<Value>> = None;
        if let Some(list) = map.get("enum") {
            let list = list
                .as_array()
                .ok_or_else(|| at.child("enum").error("must be an array"))?;
            values = Some(list.clone());
        }
        if let Some(value) = map.get("const") {
            values = Some(match values {
                Some(list) => list.into_iter().filter(|v| same_value(v, value)).collect(),
                None => vec![value.clone()],
            });
        }
        let Some(values) = values else {
            return Ok(None);
        };
        let mut scalars = Vec::new();
        let mut containers = Vec::new();
        for value in &values {
            match value {
                Value::Object(_) | Value::Array(_) => containers.push(self.exactly(value)),
                scalar => scalars.extend(spellings(scalar)),
            }
        }
        let literals = self.arena.literals(&scalars);
        containers.push(literals);
        Ok(Some(self.arena.union(containers)))
    }

    /// The shape matching exactly `value` (objects in any key order).
    fn exactly(&mut self, value: &Value) -> NodeId {
        match value {
            Value::Object(map) => {
                // Sorted by name, whatever order the map keeps.
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                let names: Vec<String> = entries.iter().map(|(name, _)| (*name).clone()).collect();
                let props: Vec<NodeId> = entries.iter().map(|(_, v)| self.exactly(v)).collect();
                let required = if names.len() >= 64 {
                    u64::MAX
                } else {
                    (1u64 << names.len()) - 1
                };
                let rules = ObjectRules {
                    required,
                    additional: None,
                    min_props: 0,
                    max_props: u32::MAX,
                    keys: None,
                };
                self.arena.object(names, props, rules)
            }
            Value::Array(items) => {
                let prefix = items.iter().map(|v| self.exactly(v)).collect();
                let len = items.len() as u64;
                self.arena.array(ArrayShape {
                    prefix,
                    items: None,
                    min: len,
                    max: len,
                })
            }
            scalar => {
                let spelled = spellings(scalar);
                self.arena.literals(&spelled)
            }
        }
    }
}

/// The texts a scalar may be written as: its canonical JSON, and for an
/// integral number also with a `.0` fraction (and `-0` for zero), for
/// another number also without an exponent (a strict number's spelling).
pub(super) fn spellings(value: &Value) -> Vec<String> {
    let Value::Number(n) = value else {
        return vec![value.to_string()];
    };
    let integral = n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
            .map(|f| f as i64)
    });
    match integral {
        Some(0) => ["0", "0.0", "-0", "-0.0"].map(String::from).to_vec(),
        Some(i) => vec![i.to_string(), format!("{i}.0")],
        None => {
            let plain = n.as_f64().map(|f| format!("{f}"));
            let mut spelled = vec![n.to_string()];
            spelled.extend(plain.filter(|p| *p != spelled[0]));
            spelled
        }
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
pub(super) fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}
