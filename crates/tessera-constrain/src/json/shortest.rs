//! The shortest value of every schema node, in bytes: primitives found by a
//! search through the lexers (a bounded number, a string under a pattern),
//! containers by a fixpoint over their required content (recursive shapes
//! converge because a value of each closes). [`Shortest::write_value`] writes
//! one; the automaton checks every byte it writes when a completion is built.

use super::number::{NumLex, NumStep};
use super::text::{Bounds, TextAt, TextPattern, TextRules, TextStep};
use crate::schema::{escape_key, ArrayShape, Node, NodeId, NumberShape, ObjectShape, SchemaArena};
use std::collections::{HashSet, VecDeque};

/// Bytes a search for the shortest string or number may go (longer ones are not completed).
const SEARCH_LIMIT: usize = 8192;

/// Bytes an undeclared entry is estimated at (`"k":0`).
const UNDECLARED_ENTRY: u32 = 6;

/// Bytes tried when searching, closing and common bytes first.
pub(super) fn search_bytes() -> impl Iterator<Item = u8> {
    let first = *b"\"0,}]:1a";
    first.into_iter().chain((0..=255u8).filter(move |b| !first.contains(b)))
}

/// Shortest values per node.
#[derive(Debug, Clone)]
pub(crate) struct Shortest {
    /// Length of a shortest value (`None`: no value, or none found).
    len: Vec<Option<u32>>,
    /// A shortest value of each primitive node.
    primitive: Vec<Option<Vec<u8>>>,
}

impl Shortest {
    /// The length of the longest of the nodes' shortest values.
    pub fn longest(&self) -> u32 {
        self.len.iter().flatten().copied().max().unwrap_or(0)
    }

    pub fn new(arena: &SchemaArena) -> Self {
        let primitive: Vec<Option<Vec<u8>>> = arena.nodes.iter().map(|node| primitive(arena, node)).collect();
        let mut len: Vec<Option<u32>> = primitive.iter().map(|p| p.as_ref().map(|b| b.len() as u32)).collect();
        loop {
            let mut changed = false;
            for (id, node) in arena.nodes.iter().enumerate() {
                let found = container_len(node, &len);
                if found.is_some_and(|f| len[id].is_none_or(|old| f < old)) {
                    len[id] = found;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut shortest = Self { len, primitive };
        for (id, node) in arena.nodes.iter().enumerate() {
            if let Node::OneOf(alternatives) = node {
                let value = shortest.one_of_value(arena, id as NodeId, alternatives);
                shortest.len[id] = value.as_ref().map(|v| v.len() as u32);
                shortest.primitive[id] = value;
            }
        }
        shortest
    }

    /// A value of an overlapping `oneOf` that exactly one alternative
    /// accepts: the shortest of the alternatives' own (one per type an
    /// alternative admits) that does, else one searched byte by byte (not
    /// always the shortest).
    fn one_of_value(&self, arena: &SchemaArena, node: NodeId, alternatives: &[NodeId]) -> Option<Vec<u8>> {
        let parts = alternatives
            .iter()
            .flat_map(|&alternative| match &arena.nodes[alternative as usize] {
                Node::Union(parts) => parts.clone(),
                _ => vec![alternative],
            });
        let mut own: Vec<Vec<u8>> = parts
            .filter_map(|alternative| {
                let mut bytes = Vec::new();
                self.write_value(arena, alternative, &mut bytes).map(|()| bytes)
            })
            .collect();
        own.sort_by_key(Vec::len);
        if let Some(value) = own.into_iter().find(|bytes| super::accepts(arena, None, node, bytes)) {
            return Some(value);
        }
        let mut stacks = super::Stacks::default();
        let mut machine = super::JsonMachine {
            arena,
            stacks: &mut stacks,
            shortest: None,
        };
        machine
            .search(super::JsonState::start(node), super::exclusive::Goal::Complete)
            .map(|(bytes, _)| bytes)
    }

    /// The value kept for a node that is not a container (an overlapping
    /// `oneOf`'s: one exactly one alternative accepts).
    pub fn value(&self, node: NodeId) -> Option<&[u8]> {
        self.primitive[node as usize].as_deref()
    }

    /// Bytes of a shortest value of `node`.
    pub fn len(&self, node: NodeId) -> Option<u32> {
        self.len[node as usize]
    }

    /// Write a shortest value of `node`.
    pub fn write_value(&self, arena: &SchemaArena, node: NodeId, out: &mut Vec<u8>) -> Option<()> {
        self.len(node)?;
        if let Some(bytes) = &self.primitive[node as usize] {
            out.extend_from_slice(bytes);
            return Some(());
        }
        match &arena.nodes[node as usize] {
            Node::Union(alternatives) => {
                let best = alternatives
                    .iter()
                    .copied()
                    .filter(|&a| self.len(a).is_some())
                    .min_by_key(|&a| self.len(a))?;
                self.write_value(arena, best, out)
            }
            Node::Array(shape) => {
                out.push(b'[');
                self.write_items(arena, shape, 0, out)?;
                // A whole value, not one left open for an item to be searched.
                (out.last() == Some(&b']')).then_some(())
            }
            Node::Object(shape) => {
                out.push(b'{');
                self.write_entries(arena, shape, 0, 0, false, out)?;
                // A whole value, not one left open for an undeclared key.
                (out.last() == Some(&b'}')).then_some(())
            }
            _ => None,
        }
    }

    /// The items from `seen` up to the array's minimum, then `]` (`,` before
    /// each but the first). An item with no value written here (a container
    /// whose keys must be searched) is left open, for the completion's search.
    pub fn write_items(&self, arena: &SchemaArena, shape: &ArrayShape, seen: u64, out: &mut Vec<u8>) -> Option<()> {
        for i in seen..shape.min {
            if i > 0 {
                out.push(b',');
            }
            if !self.write_whole(arena, shape.item(i)?, out) {
                return Some(());
            }
        }
        out.push(b']');
        Some(())
    }

    /// Write a shortest value of `node`; `false`, with nothing written, when
    /// none can be written here.
    fn write_whole(&self, arena: &SchemaArena, node: NodeId, out: &mut Vec<u8>) -> bool {
        let mark = out.len();
        let written = self.write_value(arena, node, out).is_some();
        if !written {
            out.truncate(mark);
        }
        written
    }

    /// The properties an object still needs, then `}`: the required ones
    /// missing from `seen`, then the cheapest others up to `minProperties`.
    /// `comma`: entries are already written, so each new one takes a `,`.
    /// Left open after a key whose value cannot be written here, or at an
    /// undeclared key's opening quote, for the completion's search.
    pub fn write_entries(
        &self,
        arena: &SchemaArena,
        shape: &ObjectShape,
        seen: u64,
        extra: u32,
        comma: bool,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        let mut count = seen.count_ones() + extra;
        let mut first = !comma;
        // Whether the entry's value was written (else the output stops after its colon).
        let mut entry = |i: usize, out: &mut Vec<u8>| -> bool {
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(escape_key(&shape.names[i]).as_bytes());
            out.extend_from_slice(b"\":");
            self.write_whole(arena, shape.props[i], out)
        };
        let missing = shape.required & !seen;
        for i in (0..shape.props.len()).filter(|i| missing >> i & 1 != 0) {
            if !entry(i, out) {
                return Some(());
            }
            count += 1;
        }
        let mut optional: Vec<usize> = (0..shape.props.len())
            .filter(|&i| (seen | missing | shape.forbidden) >> i & 1 == 0 && self.len(shape.props[i]).is_some())
            .collect();
        optional.sort_by_key(|&i| shape.names[i].len() as u32 + self.len(shape.props[i]).unwrap_or(u32::MAX));
        let mut optional = optional.into_iter();
        while count < shape.min_props {
            let Some(i) = optional.next() else {
                // An undeclared key is owed: open it and leave its name to the
                // completion's search (patterns, names already used).
                if !std::mem::take(&mut first) {
                    out.push(b',');
                }
                out.push(b'"');
                return Some(());
            };
            if !entry(i, out) {
                return Some(());
            }
            count += 1;
        }
        out.push(b'}');
        Some(())
    }
}

/// A shortest value of a node that is not a container (`None` for containers and unions).
fn primitive(arena: &SchemaArena, node: &Node) -> Option<Vec<u8>> {
    match node {
        Node::Any => Some(b"0".to_vec()),
        Node::Null => Some(b"null".to_vec()),
        Node::Boolean => Some(b"true".to_vec()),
        Node::Number(shape) => shortest_number(shape),
        Node::String(shape) => {
            let rules = TextRules {
                bounds: Bounds {
                    min: shape.min_len,
                    max: shape.max_len,
                },
                canonical: shape.pattern.is_some(),
                pattern: shape.pattern.map(|p| TextPattern::Value(&arena.patterns[p as usize])),
            };
            let mut text = vec![b'"'];
            text.extend(shortest_text(TextAt::START, &rules)?);
            Some(text)
        }
        Node::Literals(trie) => arena.tries[*trie as usize]
            .strings()
            .iter()
            .min_by_key(|s| s.len())
            .cloned(),
        _ => None,
    }
}

/// Bytes of a shortest container or union value, from the lengths so far.
fn container_len(node: &Node, len: &[Option<u32>]) -> Option<u32> {
    let of = |n: NodeId| len[n as usize];
    match node {
        // A `oneOf`'s estimate until its value is found (see `Shortest::new`).
        Node::Union(alternatives) | Node::OneOf(alternatives) => alternatives.iter().filter_map(|&a| of(a)).min(),
        // Checked sums: nested minimums multiply, and a wrapped length would
        // pass for a short one.
        Node::Array(shape) => (0..shape.min).try_fold(2u32, |total, i| {
            total.checked_add(of(shape.item(i)?)?)?.checked_add(u32::from(i > 0))
        }),
        Node::Object(shape) => {
            let entry = |i: usize| Some(escape_key(&shape.names[i]).len() as u32 + 3 + of(shape.props[i])?);
            let mut total = 2u32;
            let required: Vec<usize> = (0..shape.props.len())
                .filter(|i| shape.required >> i & 1 != 0)
                .collect();
            for &i in &required {
                total = total.checked_add(entry(i)?)?;
            }
            let mut optional: Vec<u32> = (0..shape.props.len())
                .filter(|&i| (shape.required | shape.forbidden) >> i & 1 == 0)
                .filter_map(entry)
                .collect();
            optional.sort();
            let short = (shape.min_props as usize).saturating_sub(required.len());
            // Past the declared keys, undeclared ones: an estimate (`"k":0`);
            // the completion searches their names.
            let undeclared = short.saturating_sub(optional.len()) as u32;
            let optional_len = optional[..short.min(optional.len())]
                .iter()
                .try_fold(0u32, |sum, &len| sum.checked_add(len))?;
            total = total
                .checked_add(optional_len)?
                .checked_add(undeclared.checked_mul(UNDECLARED_ENTRY)?)?;
            let entries = required.len() + short;
            total.checked_add(u32::try_from(entries.saturating_sub(1)).ok()?)
        }
        _ => None,
    }
}

/// The shortest bytes that close a string's text from `at` (its closing quote included).
pub(super) fn shortest_text(at: TextAt, rules: &TextRules<'_>) -> Option<Vec<u8>> {
    if rules.pattern.is_none() && at.at_boundary() {
        let missing = rules.bounds.min.saturating_sub(at.count) as usize;
        let mut text = vec![b'a'; missing];
        text.push(b'"');
        return Some(text);
    }
    let step = |at: TextAt, byte| match at.step(byte, rules) {
        None => None,
        Some(TextStep::End) => Some(Err(())),
        Some(TextStep::Inside(next)) => Some(Ok(next)),
    };
    // Without a pattern (inside an escape or a character) the first way out is as short.
    if rules.pattern.is_none() {
        return depth_first(at, &step);
    }
    search(at, step)
}

/// The shortest digits completing a number of `shape` from its start.
fn shortest_number(shape: &NumberShape) -> Option<Vec<u8>> {
    let mut best: Option<Vec<u8>> = None;
    for first in search_bytes() {
        let Some(start) = NumLex::start(shape, first, false) else {
            continue;
        };
        let rest = if start.complete(shape) {
            Some(Vec::new())
        } else {
            search(start, |num, byte| match num.step(shape, byte)? {
                NumStep::Inside(next) if next.complete(shape) => Some(Err(())),
                NumStep::Inside(next) => Some(Ok(next)),
                NumStep::Ended => None,
            })
        };
        if let Some(rest) = rest {
            let mut number = vec![first];
            number.extend(rest);
            if best.as_ref().is_none_or(|b| number.len() < b.len()) {
                best = Some(number);
            }
        }
    }
    best
}

/// States a breadth-first search visits before it falls back to depth-first.
const BREADTH_LIMIT: usize = 1024;

/// The shortest bytes from `start` to the goal: `step` gives the next state
/// (`Ok`), the goal reached with this byte (`Err`), or nothing. Breadth-first
/// while the frontier stays small; past that (a bounded number's digits each
/// make a new state), depth-first, bytes in [`search_bytes`] order, which the
/// automaton's lack of dead ends makes quick.
pub(super) fn search<S: Copy + Eq + std::hash::Hash>(
    start: S,
    step: impl Fn(S, u8) -> Option<Result<S, ()>>,
) -> Option<Vec<u8>> {
    let mut seen = HashSet::from([start]);
    let mut queue = VecDeque::from([(start, Vec::new())]);
    while let Some((state, path)) = queue.pop_front() {
        if path.len() >= SEARCH_LIMIT || seen.len() > BREADTH_LIMIT {
            return depth_first(start, &step);
        }
        for byte in search_bytes() {
            match step(state, byte) {
                None => {}
                Some(Err(())) => {
                    let mut done = path.clone();
                    done.push(byte);
                    return Some(done);
                }
                Some(Ok(next)) if seen.insert(next) => {
                    let mut longer = path.clone();
                    longer.push(byte);
                    queue.push_back((next, longer));
                }
                Some(Ok(_)) => {}
            }
        }
    }
    None
}

/// Depth-first to the goal, never revisiting a state.
fn depth_first<S: Copy + Eq + std::hash::Hash>(
    start: S,
    step: &impl Fn(S, u8) -> Option<Result<S, ()>>,
) -> Option<Vec<u8>> {
    let mut seen = HashSet::from([start]);
    // (state left, index of the byte taken in search order, the byte)
    let mut path: Vec<(S, usize, u8)> = Vec::new();
    let mut state = start;
    let mut from = 0usize;
    loop {
        let tried = search_bytes()
            .enumerate()
            .skip(from)
            .find_map(|(i, byte)| match step(state, byte) {
                Some(Err(())) => Some((i, byte, None)),
                Some(Ok(next)) if !seen.contains(&next) => Some((i, byte, Some(next))),
                _ => None,
            });
        match tried {
            Some((_, byte, None)) => {
                let mut bytes: Vec<u8> = path.iter().map(|&(_, _, b)| b).collect();
                bytes.push(byte);
                return Some(bytes);
            }
            Some((i, byte, Some(next))) if path.len() < SEARCH_LIMIT => {
                seen.insert(next);
                path.push((state, i, byte));
                state = next;
                from = 0;
            }
            _ => {
                let (back, i, _) = path.pop()?;
                state = back;
                from = i + 1;
            }
        }
    }
}
