//! What a schema needs once compiled: how deep a shortest value of each node
//! nests (the automaton opens a container only where its value can still
//! close within [`MAX_DEPTH`]), its shortest values, and the roots refused
//! for having no value that ends.

use super::{Node, NodeId, SchemaArena, MAX_DEPTH, MAX_SHORTEST_BYTES};
use crate::json::Shortest;
use crate::ConstrainError;
use std::collections::HashMap;

/// Containers a JSON text nests (brackets outside strings).
fn nesting(text: &[u8]) -> u32 {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0u32, 0u32, false, false);
    for &byte in text {
        match (in_string, escaped, byte) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') | (false, _, b'"') => in_string = !in_string,
            (false, _, b'{' | b'[') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, _, b'}' | b']') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

impl SchemaArena {
    /// Once every schema is compiled: [`finish`](Self::finish) the depth
    /// figures and find the shortest values; an overlapping `oneOf` needs at
    /// least the depth of the value found for it (its alternatives' own
    /// shortest values may match two of them), and one with no value found
    /// (`oneOf: [true, true]`) can never be entered.
    /// Refuse a root no value of which closes within [`MAX_DEPTH`] (a
    /// recursion with no way out, or no value at all). `roots`: (tool, root).
    pub fn finish_and_check<'t>(
        &mut self,
        roots: impl IntoIterator<Item = (&'t str, NodeId)>,
    ) -> Result<Shortest, ConstrainError> {
        self.finish();
        let mut shortest = Shortest::new(self);
        let floors: HashMap<NodeId, u32> = (0..self.nodes.len() as NodeId)
            .filter(|&n| matches!(self.nodes[n as usize], Node::OneOf(_)))
            .map(|n| (n, shortest.value(n).map_or(u32::MAX, nesting)))
            .filter(|&(n, floor)| floor > self.need(n))
            .collect();
        if !floors.is_empty() {
            self.one_of_floor = floors;
            self.finish();
            shortest = Shortest::new(self);
        }
        // One bound for the whole arena, named by the set's first tool.
        let roots: Vec<(&str, NodeId)> = roots.into_iter().collect();
        let longest = shortest.longest();
        if let Some((tool, _)) = roots.first().filter(|_| longest > MAX_SHORTEST_BYTES) {
            return Err(ConstrainError::InvalidSchema {
                tool: tool.to_string(),
                path: "/".into(),
                message: format!(
                    "a value in this schema (or another of its tool set) is {longest} bytes at its shortest \
                     (minimum counts and lengths multiply through nesting), over the limit of \
                     {MAX_SHORTEST_BYTES}"
                ),
            });
        }
        for (tool, root) in roots {
            if self.need(root) > MAX_DEPTH {
                return Err(ConstrainError::InvalidSchema {
                    tool: tool.to_string(),
                    path: "/".into(),
                    message: format!(
                        "every value nests containers more than {MAX_DEPTH} deep, or never ends (a recursive `$ref` \
                         with no way out), or no value was found that exactly one alternative of a `oneOf` accepts \
                         (inside a `oneOf`, objects are open as JSON Schema reads them: `required` or \
                         `additionalProperties: false` tells alternatives apart)"
                    ),
                });
            }
        }
        Ok(shortest)
    }

    /// Compute [`depth_need`](Self::depth_need) for every node (a fixpoint:
    /// recursive shapes converge from "never ends" down).
    pub fn finish(&mut self) {
        let mut need = vec![u32::MAX; self.nodes.len()];
        loop {
            let mut changed = false;
            for (i, node) in self.nodes.iter().enumerate() {
                let floor = self.one_of_floor.get(&(i as NodeId)).copied().unwrap_or(0);
                let value = node_need(node, &need).max(floor);
                if value < need[i] {
                    need[i] = value;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self.depth_need = need;
    }

    /// Containers a shortest value of `node` nests (0 before [`finish`](Self::finish)).
    pub fn need(&self, node: NodeId) -> u32 {
        self.depth_need.get(node as usize).copied().unwrap_or(0)
    }
}

/// One step of the depth fixpoint for `node`, given the current figures.
fn node_need(node: &Node, need: &[u32]) -> u32 {
    let of = |n: &NodeId| need[*n as usize];
    match node {
        Node::Any | Node::Null | Node::Boolean | Node::Number(_) | Node::String(_) | Node::Literals(_) => 0,
        Node::Never | Node::Pending => u32::MAX,
        Node::Union(alternatives) => alternatives.iter().map(of).min().unwrap_or(u32::MAX),
        // The value found may be any alternative's: the deepest that ends.
        Node::OneOf(alternatives) => alternatives
            .iter()
            .map(of)
            .filter(|&n| n != u32::MAX)
            .max()
            .unwrap_or(u32::MAX),
        Node::Array(shape) => {
            let items =
                (0..shape.min.min(shape.prefix.len() as u64 + 1)).map(|i| shape.item(i).map_or(u32::MAX, |n| of(&n)));
            items.max().unwrap_or(0).saturating_add(1)
        }
        Node::Object(shape) => {
            let required = (0..shape.props.len()).filter(|i| shape.required & (1 << i) != 0);
            let deepest = required.map(|i| of(&shape.props[i])).max().unwrap_or(0);
            // Keys beyond the required ones (minProperties): the shallowest other kind.
            let extra = shape.min_props > shape.required.count_ones();
            let other = (0..shape.props.len())
                .filter(|i| shape.required & (1 << i) == 0 && shape.forbidden & (1 << i) == 0)
                .map(|i| of(&shape.props[i]))
                .chain(shape.additional.iter().map(of))
                .chain(shape.by_pattern.iter().map(of).filter(|&n| n != u32::MAX))
                .max()
                .unwrap_or(0);
            deepest.max(if extra { other } else { 0 }).saturating_add(1)
        }
    }
}
