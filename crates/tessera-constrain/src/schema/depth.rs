//! What a schema needs once compiled: how deep a shortest value of each node
//! nests (the automaton opens a container only where its value can still
//! close within [`MAX_DEPTH`](super::MAX_DEPTH)). The shortest values
//! themselves, and the roots refused for having no value that ends, are the
//! automaton's floor's (`json::finish`).

use super::{Node, NodeId, SchemaArena};

impl SchemaArena {
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
