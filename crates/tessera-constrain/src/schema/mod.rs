//! JSON Schema → a small arena of value shapes the automaton walks.
//!
//! A schema object is the intersection of its keywords. Type-specific keywords
//! apply to values of their type only (`minLength` says nothing of a number),
//! so a schema compiles to a union of one shape per type it admits. `allOf`
//! and `$ref` beside other keywords are merged into one shape ([`merge`]);
//! `anyOf` becomes a [`Node::Union`] whose alternatives the automaton runs in
//! parallel; `oneOf` the same when its alternatives are disjoint, else a
//! [`Node::OneOf`] (parallel too, exactly one must accept where the value
//! ends); `enum`/`const` become literal sets (scalars) and exact shapes
//! (objects in any key order, arrays), kept only where the rest of the schema
//! accepts them. Local `$ref`s (JSON pointers, `$anchor`s) compile once, so
//! recursive schemas are cycles in the arena.
//!
//! Every keyword is either enforced exactly or refused with its path (unless
//! [`SchemaOptions::lenient`], which ignores it with a warning): see
//! [`compile`] for the lists. Shapes are normalized as they are built: one
//! that no value can satisfy is [`Node::Never`], and containers drop what can
//! never be filled (a `false` property is a forbidden key).

mod compile;
mod depth;
mod keys;
mod literal_check;
mod merge;
mod numbers;
mod refs;
pub(crate) mod spelling;
mod strings;
mod values;

use crate::error::ConstrainError;
use crate::literal::LiteralTrie;
use crate::pattern::{Dfa, KeyDfa, PatternCache, PatternUse};
use compile::Compiler;
use serde_json::Value;
use spelling::is_canonical;
use std::collections::HashMap;
use std::sync::Arc;

/// Index of a node in the arena.
pub(crate) type NodeId = u32;

/// Most properties one object schema may declare (seen sets are `u64` bit sets).
pub const MAX_PROPERTIES: usize = 64;

/// Deepest nesting of containers (objects and arrays) a value may have: a
/// schema whose containers nest deeper is refused when it compiles, naming
/// where it crosses the limit, so the automaton never reaches a state that
/// must open a container it cannot hold (an empty mask mid-call).
pub const MAX_DEPTH: u32 = 64;

/// Longest string (in code points) a length bound may name; longer bounds are refused.
pub const MAX_LENGTH_BOUND: u64 = 1 << 20;

/// Largest `minItems`; larger ones are refused (no response holds that many,
/// and the automaton's shortest values and completions count them one by one).
pub const MAX_MIN_ITEMS: u64 = 4096;

/// Longest shortest value any part of a schema may have (minimums multiply
/// through nesting); a schema past it is refused when it compiles.
pub const MAX_SHORTEST_BYTES: u32 = 16 << 20;

/// A value shape.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// Any JSON value.
    Any,
    /// No value (normalized away wherever a container can do without it).
    Never,
    Null,
    Boolean,
    Number(NumberShape),
    String(StringShape),
    /// One of these canonical serializations (index of a literal trie).
    Literals(u32),
    Array(ArrayShape),
    Object(ObjectShape),
    /// Alternatives run in parallel; a value is accepted when any accepts it.
    Union(Vec<NodeId>),
    /// `oneOf` whose alternatives may overlap: run in parallel like a union,
    /// each under its own marker, and a value is accepted when exactly one
    /// alternative accepts it (decided where the value ends; see
    /// `json::exclusive`). Repeats are kept: two equal alternatives exclude
    /// each other.
    OneOf(Vec<NodeId>),
    /// A `$ref` target still being compiled (replaced when it is done).
    Pending,
}

/// Bounded numbers are compared as integers scaled by 10^18.
pub(crate) const SCALE: i128 = 1_000_000_000_000_000_000;

/// The largest magnitude (scaled) a bounded number can be written with: 19 integer digits.
pub(crate) const SCALED_LIMIT: i128 = 10_000_000_000_000_000_000 * SCALE - 1;

/// A number's constraints, in scaled units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NumberShape {
    /// No fractional part (written without one), within i64.
    pub integer: bool,
    /// Smallest allowed value (an exclusive bound is moved in by one unit).
    pub min: Option<i128>,
    pub max: Option<i128>,
    /// Allowed values are multiples of this (`multipleOf`; 1 = any).
    pub step: i128,
}

impl NumberShape {
    pub const ANY: Self = Self {
        integer: false,
        min: None,
        max: None,
        step: 1,
    };

    /// Whether it is read as an exact decimal (see `json::number`).
    pub fn is_bounded(&self) -> bool {
        self.integer || self.min.is_some() || self.max.is_some() || self.step > 1
    }

    /// Whether some allowed value lies in one of `intervals` (scaled, inclusive).
    pub fn feasible(&self, intervals: &[(i128, i128)]) -> bool {
        let (step, low, high) = match self.integer {
            true => (
                lcm(self.step, SCALE).unwrap_or(i128::MAX),
                i64::MIN as i128 * SCALE,
                i64::MAX as i128 * SCALE,
            ),
            false => (self.step, -SCALED_LIMIT, SCALED_LIMIT),
        };
        intervals.iter().any(|&(a, b)| {
            let lo = a.max(self.min.unwrap_or(low)).max(low);
            let hi = b.min(self.max.unwrap_or(high)).min(high);
            lo <= hi && lo + (step - lo.rem_euclid(step)) % step <= hi
        })
    }
}

/// Least common multiple, `None` on overflow.
pub(crate) fn lcm(a: i128, b: i128) -> Option<i128> {
    let gcd = |mut x: i128, mut y: i128| {
        while y != 0 {
            (x, y) = (y, x % y);
        }
        x
    };
    (a / gcd(a, b)).checked_mul(b)
}

/// A string's length bounds, in code points, and its pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StringShape {
    pub min_len: u32,
    pub max_len: u32,
    /// Index into [`SchemaArena::patterns`] (`pattern` and `format` together).
    pub pattern: Option<u32>,
}

impl StringShape {
    pub const ANY: Self = Self {
        min_len: 0,
        max_len: u32::MAX,
        pattern: None,
    };
}

/// A string shape as the compiler assembles it, before it has an index.
#[derive(Debug, Clone)]
pub(crate) struct StringSpec {
    pub min_len: u32,
    pub max_len: u32,
    /// What the text must match (the product of every pattern and format on it).
    pub dfa: Option<Arc<Dfa>>,
}

/// An array's items: the first ones by position, then the rest.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ArrayShape {
    pub prefix: Vec<NodeId>,
    /// Items past the prefix; `None` when there may be none.
    pub items: Option<NodeId>,
    pub min: u64,
    pub max: u64,
}

impl ArrayShape {
    /// The schema of item `index`, or `None` when the array cannot hold it.
    pub fn item(&self, index: u64) -> Option<NodeId> {
        match usize::try_from(index).ok().and_then(|i| self.prefix.get(i)) {
            Some(&node) => Some(node),
            None => self.items,
        }
    }
}

/// An object's declared properties (sorted by name) and what else it allows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ObjectShape {
    /// Declared property names, sorted.
    pub names: Vec<String>,
    /// Literal trie over the JSON-escaped property names (index into `tries`).
    pub keys: u32,
    /// Schema of each property, by index.
    pub props: Vec<NodeId>,
    /// Bit i set when property i is required.
    pub required: u64,
    /// Bit i set when property i can have no value: the key is forbidden.
    pub forbidden: u64,
    /// Schema of undeclared properties; `None` when they are forbidden.
    pub additional: Option<NodeId>,
    pub min_props: u32,
    pub max_props: u32,
    /// With `patternProperties` or `propertyNames`: the key table (index into
    /// [`SchemaArena::key_tables`]); keys are then read through it.
    pub key_table: Option<u32>,
    /// With a key table: the schema of an undeclared key per set of key
    /// patterns it matches (set 0, none: `additional`, or `Never`).
    pub by_pattern: Vec<NodeId>,
}

impl ObjectShape {
    /// Whether every object fits (no property named, any undeclared one, no counts).
    pub fn is_any(&self) -> bool {
        self.names.is_empty()
            && self.key_table.is_none()
            && self.additional == Some(0)
            && self.min_props == 0
            && self.max_props == u32::MAX
    }
}

/// An object's key table and the schema of undeclared keys per pattern set.
pub(crate) type KeyRules = (Arc<KeyDfa>, Vec<NodeId>);

/// What an object shape says besides its properties (see [`SchemaArena::object`]).
#[derive(Debug, Clone)]
pub(crate) struct ObjectRules {
    /// Bit i set when property i is required.
    pub required: u64,
    pub additional: Option<NodeId>,
    pub min_props: u32,
    pub max_props: u32,
    /// The key table and the schema per pattern set (see [`ObjectShape::by_pattern`]).
    pub keys: Option<KeyRules>,
}

/// How a schema is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaOptions {
    /// Ignore keywords the automaton cannot enforce (each named in a warning)
    /// instead of refusing the schema. The automaton then accepts a superset.
    pub lenient: bool,
    /// An object schema that declares `properties` and says nothing of
    /// `additionalProperties` takes only the declared properties (as OpenAI's
    /// strict mode requires), so a small model cannot wander into invented
    /// keys. `false` reads JSON Schema exactly (undeclared keys allowed).
    pub close_declared_objects: bool,
}

impl SchemaOptions {
    /// For generation: strict keywords, declared objects closed.
    pub const GENERATION: Self = Self {
        lenient: false,
        close_declared_objects: true,
    };
    /// JSON Schema read exactly (the conformance suite), strict keywords.
    pub const EXACT: Self = Self {
        lenient: false,
        close_declared_objects: false,
    };
}

impl Default for SchemaOptions {
    fn default() -> Self {
        Self::GENERATION
    }
}

/// Every schema of a tool set in one arena.
#[derive(Debug, Clone)]
pub(crate) struct SchemaArena {
    pub nodes: Vec<Node>,
    pub tries: Vec<LiteralTrie>,
    /// Per literal trie whose numbers are not all in the strict spelling
    /// (`spelling::is_canonical`): the trie of its strictly spelled
    /// literals, read inside an overlapping `oneOf`.
    pub strict_tries: HashMap<u32, u32>,
    /// Patterns of string shapes, each with the length bounds of its shape.
    pub patterns: Vec<PatternUse>,
    /// Key tables of objects with `patternProperties` or `propertyNames`.
    pub key_tables: Vec<Arc<KeyDfa>>,
    pub any: NodeId,
    pub never: NodeId,
    pub any_object: NodeId,
    pub any_array: NodeId,
    pub any_number: NodeId,
    /// Containers a shortest value of each node nests (`u32::MAX`: none ends);
    /// filled by [`SchemaArena::finish`]. The automaton opens a container or
    /// starts a key only where the value can still close within [`MAX_DEPTH`].
    pub depth_need: Vec<u32>,
    /// Overlapping `oneOf`s whose value found nests deeper than their
    /// alternatives' own need: that depth at least (`u32::MAX`, no value
    /// found: never entered).
    pub one_of_floor: HashMap<NodeId, u32>,
    /// Keywords ignored (lenient only), one line per (tool, path).
    pub warnings: Vec<String>,
    options: SchemaOptions,
    /// Pattern tables compiled so far, shared with the owner's other arenas.
    pub pattern_cache: Arc<PatternCache>,
}

impl SchemaArena {
    /// An empty arena whose patterns are compiled in `pattern_cache`.
    pub fn new(options: SchemaOptions, pattern_cache: Arc<PatternCache>) -> Self {
        let mut arena = Self {
            nodes: vec![Node::Any, Node::Never],
            tries: vec![LiteralTrie::new::<&[u8]>(&[])],
            strict_tries: HashMap::new(),
            patterns: Vec::new(),
            key_tables: Vec::new(),
            any: 0,
            never: 1,
            any_object: 0,
            any_array: 0,
            any_number: 0,
            depth_need: Vec::new(),
            one_of_floor: HashMap::new(),
            warnings: Vec::new(),
            options,
            pattern_cache,
        };
        arena.any_object = arena.push(Node::Object(ObjectShape {
            names: Vec::new(),
            keys: 0,
            props: Vec::new(),
            required: 0,
            forbidden: 0,
            additional: Some(0),
            min_props: 0,
            max_props: u32::MAX,
            key_table: None,
            by_pattern: Vec::new(),
        }));
        arena.any_array = arena.push(Node::Array(ArrayShape {
            prefix: Vec::new(),
            items: Some(0),
            min: 0,
            max: u64::MAX,
        }));
        arena.any_number = arena.push(Node::Number(NumberShape::ANY));
        arena
    }

    /// Compile a tool's `parameters` schema: the object values it admits.
    pub fn compile_parameters(&mut self, tool: &str, schema: &Value) -> Result<NodeId, ConstrainError> {
        let any_object = self.any_object;
        let mut compiler = Compiler::new(self, tool, schema);
        let root = compiler.compile_root()?;
        let object = compiler.intersect(root, any_object, "")?;
        if self.is_never(object) {
            return Err(ConstrainError::InvalidSchema {
                tool: tool.to_string(),
                path: "/".into(),
                message: "must be an object schema".into(),
            });
        }
        Ok(object)
    }

    /// Compile a schema for a whole JSON value (any root type).
    pub fn compile_value(&mut self, name: &str, schema: &Value) -> Result<NodeId, ConstrainError> {
        Compiler::new(self, name, schema).compile_root()
    }

    pub fn options(&self) -> SchemaOptions {
        self.options
    }

    pub(crate) fn push(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        (self.nodes.len() - 1) as NodeId
    }

    pub(crate) fn is_never(&self, node: NodeId) -> bool {
        self.nodes[node as usize] == Node::Never
    }

    /// A union of `alternatives`, flattened, without `Never` or repeats.
    pub(crate) fn union(&mut self, alternatives: Vec<NodeId>) -> NodeId {
        let mut kept: Vec<NodeId> = Vec::new();
        for alt in alternatives {
            let inner = match &self.nodes[alt as usize] {
                Node::Never => continue,
                Node::Any => return self.any,
                Node::Union(inner) => inner.clone(),
                _ => vec![alt],
            };
            for node in inner {
                if !kept.contains(&node) {
                    kept.push(node);
                }
            }
        }
        match kept.as_slice() {
            [] => self.never,
            [single] => *single,
            _ => self.push(Node::Union(kept)),
        }
    }

    /// A `oneOf` of `alternatives` that may overlap (see [`Node::OneOf`]):
    /// `Never` ones dropped, one left stands alone.
    pub(crate) fn one_of(&mut self, alternatives: Vec<NodeId>) -> NodeId {
        let kept: Vec<NodeId> = alternatives.into_iter().filter(|&n| !self.is_never(n)).collect();
        match kept.as_slice() {
            [] => self.never,
            [single] => *single,
            _ => self.push(Node::OneOf(kept)),
        }
    }

    /// A number shape, `Never` when no value fits it.
    pub(crate) fn number(&mut self, shape: NumberShape) -> NodeId {
        if !shape.feasible(&[(-SCALED_LIMIT, SCALED_LIMIT)]) {
            return self.never;
        }
        self.push(Node::Number(shape))
    }

    /// A string shape, `Never` when no text meets its bounds and pattern.
    /// Fails (with why) when the pattern cannot be combined with the bounds.
    pub(crate) fn string(&mut self, spec: StringSpec) -> Result<NodeId, String> {
        let StringSpec { min_len, max_len, dfa } = spec;
        if min_len > max_len {
            return Ok(self.never);
        }
        let pattern = match dfa {
            None => None,
            Some(dfa) => {
                let used = PatternUse::new(dfa, min_len, max_len).map_err(|e| e.0)?;
                if !used.live(0, 0, min_len, max_len) {
                    return Ok(self.never);
                }
                self.patterns.push(used);
                Some((self.patterns.len() - 1) as u32)
            }
        };
        Ok(self.push(Node::String(StringShape {
            min_len,
            max_len,
            pattern,
        })))
    }

    /// The spec a string shape was made from.
    pub(crate) fn string_spec(&self, shape: &StringShape) -> StringSpec {
        StringSpec {
            min_len: shape.min_len,
            max_len: shape.max_len,
            dfa: shape.pattern.map(|p| self.patterns[p as usize].dfa.clone()),
        }
    }

    /// An array shape, cut where an item can never be filled.
    pub(crate) fn array(&mut self, mut shape: ArrayShape) -> NodeId {
        if let Some(cut) = shape.prefix.iter().position(|&n| self.is_never(n)) {
            shape.prefix.truncate(cut);
            shape.items = None;
        }
        if shape.items.is_some_and(|n| self.is_never(n)) {
            shape.items = None;
        }
        if shape.items.is_none() {
            shape.max = shape.max.min(shape.prefix.len() as u64);
        }
        if shape.min > shape.max {
            return self.never;
        }
        self.push(Node::Array(shape))
    }

    /// An object shape whose properties no value can fill are forbidden keys
    /// (a required one makes the object `Never`).
    pub(crate) fn object(&mut self, names: Vec<String>, props: Vec<NodeId>, rules: ObjectRules) -> NodeId {
        let mut shape = ObjectShape {
            names: Vec::new(),
            keys: 0,
            props: Vec::new(),
            required: rules.required,
            forbidden: 0,
            additional: rules.additional,
            min_props: rules.min_props,
            max_props: rules.max_props,
            key_table: None,
            by_pattern: Vec::new(),
        };
        for (i, &node) in props.iter().enumerate() {
            if self.is_never(node) {
                shape.forbidden |= 1 << i;
            }
        }
        if shape.required & shape.forbidden != 0 {
            return self.never;
        }
        if shape.additional.is_some_and(|n| self.is_never(n)) {
            shape.additional = None;
        }
        let mut undeclared = shape.additional.is_some();
        if let Some((keys, by_pattern)) = rules.keys {
            let sets = by_pattern
                .iter()
                .enumerate()
                .filter(|&(_, &n)| !self.is_never(n))
                .fold(0u64, |sets, (i, _)| sets | 1 << i);
            undeclared = keys.has_undeclared(sets);
            for (i, &node) in props.iter().enumerate() {
                if !keys.names_allowed(i) && !self.is_never(node) {
                    shape.forbidden |= 1 << i;
                }
            }
            if shape.required & shape.forbidden != 0 {
                return self.never;
            }
            self.key_tables.push(keys);
            shape.key_table = Some((self.key_tables.len() - 1) as u32);
            shape.by_pattern = by_pattern;
        }
        let most = if undeclared {
            u32::MAX
        } else {
            names.len() as u32 - shape.forbidden.count_ones()
        };
        if shape.required.count_ones() > shape.max_props || shape.min_props > most.min(shape.max_props) {
            return self.never;
        }
        let escaped: Vec<String> = names.iter().map(|name| escape_key(name)).collect();
        self.tries.push(LiteralTrie::new(&escaped));
        shape.keys = (self.tries.len() - 1) as u32;
        shape.names = names;
        shape.props = props;
        self.push(Node::Object(shape))
    }

    /// A node for one of these canonical serializations.
    pub(crate) fn literals(&mut self, serialized: &[String]) -> NodeId {
        if serialized.is_empty() {
            return self.never;
        }
        self.tries.push(LiteralTrie::new(serialized));
        let trie = (self.tries.len() - 1) as u32;
        let strict: Vec<&String> = serialized
            .iter()
            .filter(|text| {
                !text.starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'])
                    || is_canonical(text.as_bytes())
            })
            .collect();
        if strict.len() < serialized.len() {
            self.tries.push(LiteralTrie::new(&strict));
            self.strict_tries.insert(trie, (self.tries.len() - 1) as u32);
        }
        self.push(Node::Literals(trie))
    }

    /// The trie a literal set is read through: `strict` (inside an overlapping
    /// `oneOf`), only the strictly spelled numbers.
    pub(crate) fn literal_trie(&self, trie: u32, strict: bool) -> u32 {
        match strict {
            true => self.strict_tries.get(&trie).copied().unwrap_or(trie),
            false => trie,
        }
    }
}

/// A property name as it appears between the quotes of a JSON key.
pub(crate) fn escape_key(name: &str) -> String {
    let quoted = serde_json::Value::String(name.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}
