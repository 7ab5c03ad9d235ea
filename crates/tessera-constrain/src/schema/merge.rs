//! Intersections of shapes (`allOf`, `$ref` beside other keywords, `enum`
//! under other keywords) and the disjointness test that lets `oneOf` run as
//! `anyOf` (overlapping ones become [`super::Node::OneOf`]). Both work on compiled nodes, so they see through `$ref`s; a
//! recursive reference still being compiled cannot be merged and is refused.

use super::compile::{types, At};
use super::literal_check::accepts_literal;
use super::{lcm, ArrayShape, Node, NodeId, NumberShape, ObjectRules, ObjectShape, SchemaArena, StringSpec};
use crate::error::ConstrainError;
use std::collections::HashMap;
use std::sync::Arc;

/// Memoized intersections (the same pair meets again under `$ref`s).
#[derive(Default)]
pub(super) struct Merger {
    memo: HashMap<(NodeId, NodeId), NodeId>,
}

impl Merger {
    /// The shape of the values both `a` and `b` accept.
    pub fn intersect(
        &mut self,
        arena: &mut SchemaArena,
        a: NodeId,
        b: NodeId,
        at: &At<'_>,
    ) -> Result<NodeId, ConstrainError> {
        match (&arena.nodes[a as usize], &arena.nodes[b as usize]) {
            _ if a == b => return Ok(a),
            (Node::Any, _) => return Ok(b),
            (_, Node::Any) => return Ok(a),
            (Node::Never, _) | (_, Node::Never) => return Ok(arena.never),
            _ => {}
        }
        let key = (a.min(b), a.max(b));
        if let Some(&node) = self.memo.get(&key) {
            return Ok(node);
        }
        // Recursive shapes meet the same pair again below: it is this node.
        let placeholder = arena.push(Node::Pending);
        self.memo.insert(key, placeholder);
        let node = self.intersect_fresh(arena, a, b, at)?;
        arena.nodes[placeholder as usize] = arena.nodes[node as usize].clone();
        if arena.nodes[node as usize] == Node::Pending {
            // The result is a reference still being compiled: it, not a copy of it.
            self.memo.insert(key, node);
            return Ok(node);
        }
        Ok(placeholder)
    }

    fn intersect_fresh(
        &mut self,
        arena: &mut SchemaArena,
        a: NodeId,
        b: NodeId,
        at: &At<'_>,
    ) -> Result<NodeId, ConstrainError> {
        let (x, y) = (arena.nodes[a as usize].clone(), arena.nodes[b as usize].clone());
        Ok(match (x, y) {
            (Node::Any, _) => b,
            (_, Node::Any) => a,
            (Node::Never, _) | (_, Node::Never) => arena.never,
            (Node::Pending, _) | (_, Node::Pending) => {
                return Err(
                    at.error("`allOf` or `$ref` beside other keywords over a recursive reference cannot be merged")
                )
            }
            (Node::Union(xs), _) => {
                let parts = xs
                    .iter()
                    .map(|&x| self.intersect(arena, x, b, at))
                    .collect::<Result<Vec<_>, _>>()?;
                arena.union(parts)
            }
            (_, Node::Union(_)) => self.intersect_fresh(arena, b, a, at)?,
            // A value of `b` matches alternative `x` exactly when it matches `x ∧ b`.
            (Node::OneOf(xs), _) => {
                let parts = xs
                    .iter()
                    .map(|&x| self.intersect(arena, x, b, at))
                    .collect::<Result<Vec<_>, _>>()?;
                self.exclusive(arena, parts)
            }
            (_, Node::OneOf(_)) => self.intersect_fresh(arena, b, a, at)?,
            (Node::Literals(trie), _) => self.filter_literals(arena, trie, b, at)?,
            (_, Node::Literals(trie)) => self.filter_literals(arena, trie, a, at)?,
            (Node::Null, Node::Null) | (Node::Boolean, Node::Boolean) => a,
            (Node::Number(s), Node::Number(t)) => {
                let step = lcm(s.step, t.step).ok_or_else(|| at.error("merged `multipleOf`s are too large"))?;
                let bound = |x: Option<i128>, y: Option<i128>, pick: fn(i128, i128) -> i128| match (x, y) {
                    (Some(x), Some(y)) => Some(pick(x, y)),
                    (x, y) => x.or(y),
                };
                arena.number(NumberShape {
                    integer: s.integer || t.integer,
                    min: bound(s.min, t.min, i128::max),
                    max: bound(s.max, t.max, i128::min),
                    step,
                })
            }
            (Node::String(s), Node::String(t)) => {
                let (s, t) = (arena.string_spec(&s), arena.string_spec(&t));
                let dfa = match (s.dfa, t.dfa) {
                    (Some(x), Some(y)) if Arc::ptr_eq(&x, &y) => Some(x),
                    (Some(x), Some(y)) => Some(Arc::new(
                        x.intersect(&y)
                            .map_err(|e| at.error(format!("two patterns together: {}", e.0)))?,
                    )),
                    (x, y) => x.or(y),
                };
                let spec = StringSpec {
                    min_len: s.min_len.max(t.min_len),
                    max_len: s.max_len.min(t.max_len),
                    dfa,
                };
                arena.string(spec).map_err(|e| at.error(e))?
            }
            (Node::Array(s), Node::Array(t)) => self.arrays(arena, &s, &t, at)?,
            (Node::Object(s), Node::Object(_)) if s.is_any() => b,
            (Node::Object(_), Node::Object(t)) if t.is_any() => a,
            (Node::Object(s), Node::Object(t)) => self.objects(arena, &s, &t, at)?,
            _ => arena.never,
        })
    }

    /// The literals of `trie` that `node` accepts.
    fn filter_literals(
        &mut self,
        arena: &mut SchemaArena,
        trie: u32,
        node: NodeId,
        at: &At<'_>,
    ) -> Result<NodeId, ConstrainError> {
        if reaches_pending(arena, node) {
            return Err(at.error("`enum`/`const` under a recursive reference cannot be checked"));
        }
        let kept: Vec<String> = arena.tries[trie as usize]
            .strings()
            .iter()
            .filter(|text| accepts_literal(arena, node, text))
            .map(|text| String::from_utf8_lossy(text).into_owned())
            .collect();
        Ok(arena.literals(&kept))
    }

    fn arrays(
        &mut self,
        arena: &mut SchemaArena,
        s: &ArrayShape,
        t: &ArrayShape,
        at: &At<'_>,
    ) -> Result<NodeId, ConstrainError> {
        let len = s.prefix.len().max(t.prefix.len());
        let mut prefix = Vec::with_capacity(len);
        for i in 0..len as u64 {
            let item = match (s.item(i), t.item(i)) {
                (Some(x), Some(y)) => self.intersect(arena, x, y, at)?,
                _ => arena.never,
            };
            prefix.push(item);
        }
        let items = match (s.items, t.items) {
            (Some(x), Some(y)) => Some(self.intersect(arena, x, y, at)?),
            _ => None,
        };
        Ok(arena.array(ArrayShape {
            prefix,
            items,
            min: s.min.max(t.min),
            max: s.max.min(t.max),
        }))
    }

    fn objects(
        &mut self,
        arena: &mut SchemaArena,
        s: &ObjectShape,
        t: &ObjectShape,
        at: &At<'_>,
    ) -> Result<NodeId, ConstrainError> {
        if s.key_table.is_some() || t.key_table.is_some() {
            return Err(at.error(
                "objects with `patternProperties` or `propertyNames` cannot be merged (allOf, $ref siblings) yet",
            ));
        }
        let mut names: Vec<String> = s.names.iter().chain(&t.names).cloned().collect();
        names.sort();
        names.dedup();
        if names.len() > super::MAX_PROPERTIES {
            return Err(at.error(format!(
                "merged objects declare {} properties, over the limit of {}",
                names.len(),
                super::MAX_PROPERTIES
            )));
        }
        let mut props = Vec::with_capacity(names.len());
        let mut required = 0u64;
        for (i, name) in names.iter().enumerate() {
            let (x, x_required) = property(arena, s, name);
            let (y, y_required) = property(arena, t, name);
            props.push(self.intersect(arena, x, y, at)?);
            if x_required || y_required {
                required |= 1 << i;
            }
        }
        let additional = match (s.additional, t.additional) {
            (Some(x), Some(y)) => Some(self.intersect(arena, x, y, at)?),
            _ => None,
        };
        let rules = ObjectRules {
            required,
            additional,
            min_props: s.min_props.max(t.min_props),
            max_props: s.max_props.min(t.max_props),
            keys: None,
        };
        Ok(arena.object(names, props, rules))
    }

    /// Whether no value can match both `a` and `b` (false when unsure).
    /// `oneOf` over compiled `alternatives`: a union when no value can match
    /// two of them, else a [`Node::OneOf`].
    pub fn exclusive(&mut self, arena: &mut SchemaArena, alternatives: Vec<NodeId>) -> NodeId {
        let live: Vec<NodeId> = alternatives.iter().copied().filter(|&n| !arena.is_never(n)).collect();
        match self.all_disjoint(arena, &live) {
            true => arena.union(live),
            false => arena.one_of(live),
        }
    }

    /// Whether no value matches two of `alternatives` (`Never` ones aside).
    pub fn all_disjoint(&mut self, arena: &SchemaArena, alternatives: &[NodeId]) -> bool {
        let live: Vec<NodeId> = alternatives.iter().copied().filter(|&n| !arena.is_never(n)).collect();
        live.iter()
            .enumerate()
            .all(|(i, &a)| live[i + 1..].iter().all(|&b| a != b && self.disjoint(arena, a, b)))
    }

    pub fn disjoint(&mut self, arena: &SchemaArena, a: NodeId, b: NodeId) -> bool {
        if type_bits(arena, a) & type_bits(arena, b) == 0 {
            return true;
        }
        match (&arena.nodes[a as usize], &arena.nodes[b as usize]) {
            // A `oneOf`'s values are among its alternatives' (a union's).
            (Node::Union(xs) | Node::OneOf(xs), _) => xs.iter().all(|&x| self.disjoint(arena, x, b)),
            (_, Node::Union(ys) | Node::OneOf(ys)) => ys.iter().all(|&y| self.disjoint(arena, a, y)),
            (Node::Literals(trie), _) => literals_outside(arena, *trie, b),
            (_, Node::Literals(trie)) => literals_outside(arena, *trie, a),
            (Node::Object(s), Node::Object(t)) => s.names.iter().enumerate().any(|(i, name)| {
                let Ok(j) = t.names.binary_search(name) else {
                    return false;
                };
                s.required & (1 << i) != 0 && t.required & (1 << j) != 0 && self.disjoint(arena, s.props[i], t.props[j])
            }),
            _ => false,
        }
    }
}

/// The schema a property named `name` has in `shape`, and whether it is required.
fn property(arena: &SchemaArena, shape: &ObjectShape, name: &str) -> (NodeId, bool) {
    match shape.names.binary_search_by(|n| n.as_str().cmp(name)) {
        Ok(i) => (shape.props[i], shape.required & (1 << i) != 0),
        Err(_) => (shape.additional.unwrap_or(arena.never), false),
    }
}

/// Whether every literal of `trie` is refused by `node`. A number is judged
/// by its strict spelling (`1`, not `1.0`, which an integer shape refuses
/// though `1.0` is an integer); one without such a spelling (`1e20`, past
/// what the automaton writes) is taken to overlap any shape with numbers.
fn literals_outside(arena: &SchemaArena, trie: u32, node: NodeId) -> bool {
    let numbers = type_bits(arena, node) & types::NUMBER != 0;
    !reaches_pending(arena, node)
        && arena.tries[trie as usize].strings().iter().all(|text| {
            let number = text.first().is_some_and(|b| *b == b'-' || b.is_ascii_digit());
            match number && !super::spelling::is_canonical(text) {
                true => has_strict_spelling(text) || !numbers,
                false => !accepts_literal(arena, node, text),
            }
        })
}

/// Whether the number `text` stands for has a strict spelling (then that
/// spelling, in the same literal set, is the one judged).
fn has_strict_spelling(text: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(text)
        .ok()
        .is_some_and(|value| {
            super::values::spellings(&value)
                .iter()
                .any(|s| super::spelling::is_canonical(s.as_bytes()))
        })
}

/// The JSON types a node's values can have.
fn type_bits(arena: &SchemaArena, node: NodeId) -> u8 {
    match &arena.nodes[node as usize] {
        Node::Any | Node::Pending => types::ALL,
        Node::Never => 0,
        Node::Null => types::NULL,
        Node::Boolean => types::BOOLEAN,
        Node::Number(_) => types::NUMBER,
        Node::String(_) => types::STRING,
        Node::Array(_) => types::ARRAY,
        Node::Object(_) => types::OBJECT,
        Node::Union(alternatives) | Node::OneOf(alternatives) => {
            alternatives.iter().fold(0, |bits, &alt| bits | type_bits(arena, alt))
        }
        Node::Literals(trie) => arena.tries[*trie as usize]
            .strings()
            .iter()
            .fold(0, |bits, text| bits | literal_type(text)),
    }
}

fn literal_type(text: &[u8]) -> u8 {
    match text.first() {
        Some(b'n') => types::NULL,
        Some(b't' | b'f') => types::BOOLEAN,
        Some(b'"') => types::STRING,
        _ => types::NUMBER,
    }
}

/// Whether a `Pending` node (a reference being compiled) is reachable from `node`.
fn reaches_pending(arena: &SchemaArena, node: NodeId) -> bool {
    let mut seen = vec![false; arena.nodes.len()];
    let mut todo = vec![node];
    while let Some(n) = todo.pop() {
        if std::mem::replace(&mut seen[n as usize], true) {
            continue;
        }
        match &arena.nodes[n as usize] {
            Node::Pending => return true,
            Node::Union(alternatives) | Node::OneOf(alternatives) => todo.extend(alternatives),
            Node::Array(shape) => todo.extend(shape.prefix.iter().chain(&shape.items)),
            Node::Object(shape) => todo.extend(shape.props.iter().chain(&shape.additional)),
            _ => {}
        }
    }
    false
}
