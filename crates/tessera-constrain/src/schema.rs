//! JSON Schema → a small arena of value shapes the argument automaton walks.
//!
//! Supported: `type` (one or a list), `properties`, `required`,
//! `additionalProperties` (bool or schema; when absent: false if the object
//! declares `properties`, true if it declares none), `items`, `minItems`,
//! `maxItems`, `enum`, `const`, `anyOf`/`oneOf` of alternatives that differ in
//! their first byte (an object and a string, a number and null...).
//! Annotations (`description`, `title`, `default`, `examples`, `$schema`...)
//! are ignored silently; any other keyword is reported once per tool as a
//! warning and ignored (the automaton then accepts a superset). `enum`/`const`
//! values must be written in canonical JSON (compact, sorted keys). Containers
//! may nest [`MAX_DEPTH`] deep; a deeper schema is refused with the path where
//! it crosses the limit (every container in a schema can be reached, so the
//! automaton must be able to open each one).

use crate::literal::LiteralTrie;
use crate::ConstrainError;
use serde_json::{Map, Value};

/// Index of a node in the arena.
pub(crate) type NodeId = u32;

/// Most properties one object schema may declare (seen sets are `u64` bit sets).
pub const MAX_PROPERTIES: usize = 64;

/// Deepest nesting of containers (objects and arrays) a value may have: a
/// schema whose containers nest deeper is refused when it compiles, naming
/// where it crosses the limit, so the automaton never reaches a state that
/// must open a container it cannot hold (an empty mask mid-call).
pub const MAX_DEPTH: u32 = 64;

/// A value shape.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Any,
    Null,
    Boolean,
    Integer,
    Number,
    String,
    /// One of these canonical serializations (index of a literal trie).
    Literals(u32),
    Array {
        items: NodeId,
        min: u64,
        max: u64,
    },
    Object(ObjectShape),
    /// Alternatives with disjoint first bytes, tried in order.
    Union(Vec<NodeId>),
}

/// An object's declared properties (sorted by name) and what else it allows.
#[derive(Debug, Clone)]
pub(crate) struct ObjectShape {
    /// Literal trie over the JSON-escaped property names (index into `tries`).
    pub keys: u32,
    /// Schema of each property, by index.
    pub props: Vec<NodeId>,
    /// Bit i set when property i is required.
    pub required: u64,
    /// Schema of undeclared properties; `None` when they are forbidden.
    pub additional: Option<NodeId>,
}

/// Annotations that change nothing about which values are valid.
const IGNORED: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
];
/// Keywords this compiler understands.
const KNOWN: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "anyOf",
    "oneOf",
];

/// Every tool's argument schema in one arena.
#[derive(Debug, Clone)]
pub(crate) struct SchemaArena {
    pub nodes: Vec<Node>,
    pub tries: Vec<LiteralTrie>,
    pub any: NodeId,
    pub any_object: NodeId,
    /// Unsupported keywords met, one line per (tool, keyword).
    pub warnings: Vec<String>,
    /// Containers enclosing the schema being compiled.
    open_containers: u32,
}

/// The first bytes a value of a shape can start with.
fn first_bytes(arena: &SchemaArena, node: NodeId) -> [bool; 256] {
    let mut set = [false; 256];
    let mut mark = |bytes: &[u8]| bytes.iter().for_each(|&b| set[b as usize] = true);
    match &arena.nodes[node as usize] {
        Node::Any => mark(b"{[\"-0123456789tfn"),
        Node::Null => mark(b"n"),
        Node::Boolean => mark(b"tf"),
        Node::Integer | Node::Number => mark(b"-0123456789"),
        Node::String => mark(b"\""),
        Node::Array { .. } => mark(b"["),
        Node::Object(_) => mark(b"{"),
        Node::Literals(trie) => {
            let trie = &arena.tries[*trie as usize];
            for b in 0..=255u8 {
                if trie.step(0, b).is_some() {
                    set[b as usize] = true;
                }
            }
        }
        Node::Union(alternatives) => {
            for &alt in alternatives {
                let inner = first_bytes(arena, alt);
                for b in 0..256 {
                    set[b] |= inner[b];
                }
            }
        }
    }
    set
}

/// Where in which tool's schema the compiler is.
struct At<'a> {
    tool: &'a str,
    path: String,
}

impl At<'_> {
    fn error(&self, message: impl Into<String>) -> ConstrainError {
        ConstrainError::InvalidSchema {
            tool: self.tool.to_string(),
            path: if self.path.is_empty() {
                "/".into()
            } else {
                self.path.clone()
            },
            message: message.into(),
        }
    }

    fn child(&self, segment: &str) -> At<'_> {
        At {
            tool: self.tool,
            path: format!("{}/{segment}", self.path),
        }
    }
}

impl SchemaArena {
    pub fn new() -> Self {
        let mut arena = Self {
            nodes: vec![Node::Any],
            tries: vec![LiteralTrie::new::<&[u8]>(&[])],
            any: 0,
            any_object: 0,
            warnings: Vec::new(),
            open_containers: 0,
        };
        arena.any_object = arena.push(Node::Object(ObjectShape {
            keys: 0,
            props: Vec::new(),
            required: 0,
            additional: Some(0),
        }));
        arena
    }

    fn push(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        (self.nodes.len() - 1) as NodeId
    }

    /// Compile a tool's `parameters` schema; its root must describe an object.
    pub fn compile_parameters(&mut self, tool: &str, schema: &Value) -> Result<NodeId, ConstrainError> {
        let at = At {
            tool,
            path: String::new(),
        };
        let root = self.compile(schema, &at)?;
        match &self.nodes[root as usize] {
            Node::Object(_) => Ok(root),
            Node::Any => Ok(self.any_object),
            _ => Err(at.error("the parameters of a tool must be an object schema")),
        }
    }

    fn compile(&mut self, schema: &Value, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let map = match schema {
            Value::Bool(true) => return Ok(self.any),
            Value::Bool(false) => return Err(at.error("`false` accepts no value")),
            Value::Object(map) => map,
            _ => return Err(at.error("a schema must be an object or a boolean")),
        };
        self.report_unsupported(map, at);
        if let Some(value) = map.get("const") {
            return Ok(self.literals(std::slice::from_ref(value)));
        }
        if let Some(values) = map.get("enum") {
            let values = values.as_array().filter(|v| !v.is_empty());
            let values = values.ok_or_else(|| at.child("enum").error("must be a non-empty array"))?;
            return Ok(self.literals(values));
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(alternatives) = map.get(keyword) {
                return self.union_of_schemas(alternatives, &at.child(keyword));
            }
        }
        match map.get("type") {
            Some(Value::String(name)) => self.typed(name, map, at),
            Some(Value::Array(names)) => {
                let mut alternatives = Vec::new();
                for (i, name) in names.iter().enumerate() {
                    let name = name
                        .as_str()
                        .ok_or_else(|| at.child(&format!("type/{i}")).error("must be a type name"))?;
                    alternatives.push(self.typed(name, map, at)?);
                }
                self.union(alternatives, &at.child("type"))
            }
            Some(_) => Err(at.child("type").error("must be a type name or a list of them")),
            None if map.contains_key("properties") => self.typed("object", map, at),
            None if map.contains_key("items") => self.typed("array", map, at),
            None => Ok(self.any),
        }
    }

    fn report_unsupported(&mut self, map: &Map<String, Value>, at: &At<'_>) {
        for key in map.keys() {
            if IGNORED.contains(&key.as_str()) || KNOWN.contains(&key.as_str()) {
                continue;
            }
            let line = format!("tool `{}`: keyword `{key}` is not supported and is ignored", at.tool);
            if !self.warnings.contains(&line) {
                tracing::warn!("{line}");
                self.warnings.push(line);
            }
        }
    }

    fn literals(&mut self, values: &[Value]) -> NodeId {
        let serialized: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        self.tries.push(LiteralTrie::new(&serialized));
        self.push(Node::Literals((self.tries.len() - 1) as u32))
    }

    fn union_of_schemas(&mut self, alternatives: &Value, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let list = alternatives.as_array().filter(|a| !a.is_empty());
        let list = list.ok_or_else(|| at.error("must be a non-empty array of schemas"))?;
        let mut nodes = Vec::new();
        for (i, schema) in list.iter().enumerate() {
            nodes.push(self.compile(schema, &at.child(&i.to_string()))?);
        }
        self.union(nodes, at)
    }

    /// A union keeping, among alternatives that start with the same byte, only the first.
    fn union(&mut self, alternatives: Vec<NodeId>, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let mut kept: Vec<NodeId> = Vec::new();
        let mut taken = [false; 256];
        for alt in alternatives {
            let first = first_bytes(self, alt);
            if (0..256).any(|b| first[b] && taken[b]) {
                let line = format!(
                    "tool `{}`: {} has alternatives that start alike; only the first of them is used",
                    at.tool, at.path
                );
                if !self.warnings.contains(&line) {
                    tracing::warn!("{line}");
                    self.warnings.push(line);
                }
                continue;
            }
            (0..256).filter(|&b| first[b]).for_each(|b| taken[b] = true);
            kept.push(alt);
        }
        Ok(match kept.as_slice() {
            [single] => *single,
            _ => self.push(Node::Union(kept)),
        })
    }

    fn typed(&mut self, name: &str, map: &Map<String, Value>, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        Ok(match name {
            "null" => self.push(Node::Null),
            "boolean" => self.push(Node::Boolean),
            "integer" => self.push(Node::Integer),
            "number" => self.push(Node::Number),
            "string" => self.push(Node::String),
            "array" | "object" => self.container(name, map, at)?,
            other => return Err(at.child("type").error(format!("unknown type `{other}`"))),
        })
    }

    /// An array or object schema, one container deeper than its parent.
    fn container(&mut self, name: &str, map: &Map<String, Value>, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        if self.open_containers >= MAX_DEPTH {
            return Err(at.error(format!(
                "containers nest more than {MAX_DEPTH} deep here (objects and arrays count); deeper values are not supported"
            )));
        }
        self.open_containers += 1;
        let node = match name {
            "array" => self.array(map, at),
            _ => self.object(map, at),
        };
        self.open_containers -= 1;
        node
    }

    fn array(&mut self, map: &Map<String, Value>, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let items = match map.get("items") {
            None => self.any,
            Some(schema @ (Value::Object(_) | Value::Bool(_))) => self.compile(schema, &at.child("items"))?,
            Some(_) => {
                let line = format!(
                    "tool `{}`: tuple `items` at {} is not supported; any items accepted",
                    at.tool, at.path
                );
                tracing::warn!("{line}");
                self.warnings.push(line);
                self.any
            }
        };
        let bound = |key: &str| -> Result<Option<u64>, ConstrainError> {
            match map.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| at.child(key).error("must be a non-negative integer")),
            }
        };
        let min = bound("minItems")?.unwrap_or(0);
        let max = bound("maxItems")?.unwrap_or(u64::MAX);
        if min > max {
            return Err(at.error(format!("minItems ({min}) exceeds maxItems ({max})")));
        }
        Ok(self.push(Node::Array { items, min, max }))
    }

    fn object(&mut self, map: &Map<String, Value>, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let empty = Map::new();
        let properties = match map.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(at.child("properties").error("must be an object")),
        };
        if properties.len() > MAX_PROPERTIES {
            return Err(at.child("properties").error(format!(
                "{} properties, over the limit of {MAX_PROPERTIES}",
                properties.len()
            )));
        }
        // serde_json's map iterates in sorted key order: property i is the i-th name.
        let names: Vec<&String> = properties.keys().collect();
        let mut props = Vec::with_capacity(names.len());
        for (name, schema) in properties {
            props.push(self.compile(schema, &at.child(&format!("properties/{name}")))?);
        }
        let required = self.required(map, &names, at)?;
        // Absent `additionalProperties` means "any key" in JSON Schema; for generation that
        // lets a small model wander into invented keys for thousands of tokens. Like
        // XGrammar's strict mode, an object that declares its properties keeps to them
        // unless the schema says otherwise; an object declaring none stays open.
        let additional = match map.get("additionalProperties") {
            None if !properties.is_empty() => None,
            None | Some(Value::Bool(true)) => Some(self.any),
            Some(Value::Bool(false)) => None,
            Some(schema @ Value::Object(_)) => Some(self.compile(schema, &at.child("additionalProperties"))?),
            Some(_) => return Err(at.child("additionalProperties").error("must be a boolean or a schema")),
        };
        let escaped: Vec<String> = names
            .iter()
            .map(|name| {
                let quoted = Value::String((*name).clone()).to_string();
                quoted[1..quoted.len() - 1].to_string()
            })
            .collect();
        self.tries.push(LiteralTrie::new(&escaped));
        let keys = (self.tries.len() - 1) as u32;
        Ok(self.push(Node::Object(ObjectShape {
            keys,
            props,
            required,
            additional,
        })))
    }

    fn required(&self, map: &Map<String, Value>, names: &[&String], at: &At<'_>) -> Result<u64, ConstrainError> {
        let Some(list) = map.get("required") else {
            return Ok(0);
        };
        let list = list
            .as_array()
            .ok_or_else(|| at.child("required").error("must be an array of property names"))?;
        let mut bits = 0u64;
        for (i, name) in list.iter().enumerate() {
            let name = name
                .as_str()
                .ok_or_else(|| at.child(&format!("required/{i}")).error("must be a string"))?;
            let index = names.iter().position(|n| n.as_str() == name).ok_or_else(|| {
                at.child("required")
                    .error(format!("`{name}` is not among the properties"))
            })?;
            bits |= 1 << index;
        }
        Ok(bits)
    }
}
