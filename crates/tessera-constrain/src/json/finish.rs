//! Once every schema of a set is compiled: the depth figures fixed against
//! the shortest values the automaton finds, and the roots refused for having
//! no value that ends (or none short enough).

use super::Shortest;
use crate::error::ConstrainError;
use crate::schema::{Node, NodeId, SchemaArena, MAX_DEPTH, MAX_SHORTEST_BYTES};
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

/// Once every schema is compiled: [`finish`](SchemaArena::finish) the depth
/// figures and find the shortest values; an overlapping `oneOf` needs at
/// least the depth of the value found for it (its alternatives' own
/// shortest values may match two of them), and one with no value found
/// (`oneOf: [true, true]`) can never be entered.
/// Refuse a root no value of which closes within [`MAX_DEPTH`] (a
/// recursion with no way out, or no value at all). `roots`: (tool, root).
pub(crate) fn finish_and_check<'t>(
    arena: &mut SchemaArena,
    roots: impl IntoIterator<Item = (&'t str, NodeId)>,
) -> Result<Shortest, ConstrainError> {
    arena.finish();
    let mut shortest = Shortest::new(arena);
    let floors: HashMap<NodeId, u32> = (0..arena.nodes.len() as NodeId)
        .filter(|&n| matches!(arena.nodes[n as usize], Node::OneOf(_)))
        .map(|n| (n, shortest.value(n).map_or(u32::MAX, nesting)))
        .filter(|&(n, floor)| floor > arena.need(n))
        .collect();
    if !floors.is_empty() {
        arena.one_of_floor = floors;
        arena.finish();
        shortest = Shortest::new(arena);
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
        if arena.need(root) > MAX_DEPTH {
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
