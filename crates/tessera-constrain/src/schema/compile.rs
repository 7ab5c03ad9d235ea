//! Keywords → shapes. Enforced exactly: `type` (one or a list), `enum`,
//! `const`, `properties`, `required`, `additionalProperties`,
//! `patternProperties`, `propertyNames` ([`super::keys`]), `minProperties`,
//! `maxProperties`, `items`, `prefixItems`, `minItems`, `maxItems`,
//! `minLength`, `maxLength`, `pattern`, `format` ([`super::strings`]),
//! numeric bounds ([`super::numbers`]), `anyOf`, `allOf`, `oneOf` (disjoint
//! alternatives as a union, others run as [`super::Node::OneOf`]), boolean schemas,
//! and local `$ref`s (`#`, JSON pointers, `$anchor`s) with `$defs` /
//! `definitions`. Annotations are ignored. Anything else is refused with its
//! path, or under [`SchemaOptions::lenient`] ignored with a warning.

use super::merge::Merger;
use super::refs::Document;
use super::{ArrayShape, Node, NodeId, ObjectRules, SchemaArena, MAX_DEPTH, MAX_MIN_ITEMS, MAX_PROPERTIES};
use crate::error::ConstrainError;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Keywords that change nothing about which values are valid.
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "$comment",
    "$vocabulary",
    "$dynamicAnchor",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
];

/// `$schema` values whose vocabularies are the standard ones.
const STANDARD_METASCHEMAS: &[&str] = &[
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-04/schema",
];

/// Keywords this compiler enforces.
const ENFORCED: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
    "$anchor",
    "$id",
];

const STRING_KEYWORDS: &[&str] = &["minLength", "maxLength", "pattern", "format"];

const NUMBER_KEYWORDS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];
const ARRAY_KEYWORDS: &[&str] = &["items", "prefixItems", "minItems", "maxItems"];
const OBJECT_KEYWORDS: &[&str] = &[
    "properties",
    "patternProperties",
    "propertyNames",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
];

/// JSON types, as bits.
pub(super) mod types {
    pub const NULL: u8 = 1;
    pub const BOOLEAN: u8 = 2;
    pub const INTEGER: u8 = 4;
    pub const NUMBER: u8 = 8;
    pub const STRING: u8 = 16;
    pub const ARRAY: u8 = 32;
    pub const OBJECT: u8 = 64;
    pub const ALL: u8 = 127;
}

/// Where in which tool's schema the compiler is.
#[derive(Clone)]
pub(super) struct At<'a> {
    pub tool: &'a str,
    pub path: String,
}

impl<'t> At<'t> {
    pub fn error(&self, message: impl Into<String>) -> ConstrainError {
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

    /// One level down; `segment` is escaped as a JSON pointer segment.
    pub fn child(&self, segment: &str) -> At<'t> {
        At {
            tool: self.tool,
            path: format!("{}/{}", self.path, segment.replace('~', "~0").replace('/', "~1")),
        }
    }
}

/// Builds an array or object shape from a schema object.
type ShapeBuilder<'a> = fn(&mut Compiler<'a>, &Map<String, Value>, &At<'_>) -> Result<NodeId, ConstrainError>;

/// Compiles one document (a tool's parameters, a response format) into the arena.
pub(super) struct Compiler<'a> {
    pub arena: &'a mut SchemaArena,
    document: Document<'a>,
    /// Compiled `$ref` targets by JSON pointer and whether read exactly (a
    /// `Pending` node while in progress).
    refs: HashMap<(String, bool), NodeId>,
    pub(super) merger: Merger,
    /// Containers enclosing the schema being compiled.
    open_containers: u32,
    /// Overlapping-`oneOf` alternatives enclosing the schema being compiled:
    /// inside one, declared objects stay open as JSON Schema reads them
    /// (closing them would change which alternatives a value matches).
    pub(super) exact: u32,
}

impl<'a> Compiler<'a> {
    pub fn new(arena: &'a mut SchemaArena, tool: &'a str, root: &'a Value) -> Self {
        Self {
            arena,
            document: Document::new(tool, root),
            refs: HashMap::new(),
            merger: Merger::default(),
            open_containers: 0,
            exact: 0,
        }
    }

    /// Compile the whole document (the root is reachable as `#`).
    pub fn compile_root(&mut self) -> Result<NodeId, ConstrainError> {
        let at = At {
            tool: self.document.tool,
            path: String::new(),
        };
        let root = self.reference("", self.document.root, &at)?;
        if self.arena.is_never(root) {
            return Err(at.error("the schema accepts no value"));
        }
        Ok(root)
    }

    /// Intersect `node` with `other` (for callers that narrow the root).
    pub fn intersect(&mut self, node: NodeId, other: NodeId, at_root: &str) -> Result<NodeId, ConstrainError> {
        let at = At {
            tool: self.document.tool,
            path: at_root.to_string(),
        };
        self.merger.intersect(self.arena, node, other, &at)
    }

    /// The node for the schema at `pointer`, compiled once (cycles become arena cycles).
    fn reference(&mut self, pointer: &str, schema: &Value, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let key = (pointer.to_string(), self.exact > 0);
        if let Some(&node) = self.refs.get(&key) {
            return Ok(node);
        }
        let placeholder = self.arena.push(Node::Pending);
        self.refs.insert(key, placeholder);
        let target = At {
            tool: at.tool,
            path: pointer.to_string(),
        };
        let node = self.compile(schema, &target)?;
        let compiled = self.arena.nodes[node as usize].clone();
        if compiled == Node::Pending {
            return Err(at.error("`$ref` cycle that never reaches a schema"));
        }
        self.arena.nodes[placeholder as usize] = compiled;
        Ok(placeholder)
    }

    pub(super) fn compile(&mut self, schema: &Value, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let map = match schema {
            Value::Bool(true) => return Ok(self.arena.any),
            Value::Bool(false) => return Ok(self.arena.never),
            Value::Object(map) => map,
            _ => return Err(at.error("a schema must be an object or a boolean")),
        };
        self.check_keywords(map, at)?;
        let mut parts = vec![self.typed(map, at)?];
        if let Some(reference) = map.get("$ref") {
            parts.push(self.follow(reference, &at.child("$ref"))?);
        }
        if let Some(list) = map.get("allOf") {
            for (i, schema) in schema_list(list, &at.child("allOf"))?.iter().enumerate() {
                parts.push(self.compile(schema, &at.child("allOf").child(&i.to_string()))?);
            }
        }
        if let Some(list) = map.get("anyOf") {
            parts.push(self.alternatives(list, &at.child("anyOf"))?);
        }
        if let Some(list) = map.get("oneOf") {
            parts.push(self.one_of(list, &at.child("oneOf"))?);
        }
        let mut node = parts[0];
        for &part in &parts[1..] {
            node = self.merger.intersect(self.arena, node, part, at)?;
        }
        match self.values(map, at)? {
            Some(values) => self.merger.intersect(self.arena, values, node, at),
            None => Ok(node),
        }
    }

    /// Refuse (or, lenient, warn about) every keyword the automaton cannot enforce.
    fn check_keywords(&mut self, map: &Map<String, Value>, at: &At<'_>) -> Result<(), ConstrainError> {
        for key in map.keys() {
            let key = key.as_str();
            if key == "$schema" {
                let known = map[key]
                    .as_str()
                    .is_some_and(|uri| STANDARD_METASCHEMAS.contains(&uri.trim_end_matches('#')));
                if !known {
                    self.unsupported(
                        &at.child(key),
                        key,
                        "a metaschema other than a standard draft's may change which keywords validate",
                    )?;
                }
            } else if key == "$id" && !at.path.is_empty() {
                self.unsupported(
                    &at.child(key),
                    key,
                    "an `$id` below the root changes the base of references",
                )?;
            } else if !ANNOTATIONS.contains(&key) && !ENFORCED.contains(&key) {
                self.unsupported(&at.child(key), key, "not among the keywords the automaton enforces")?;
            }
        }
        Ok(())
    }

    /// Refuse `keyword` (`at` is its own path), or (lenient) ignore it with a
    /// warning naming it and its path.
    pub(super) fn unsupported(&mut self, at: &At<'_>, keyword: &str, why: &str) -> Result<(), ConstrainError> {
        if !self.arena.options().lenient {
            return Err(at.error(format!(
                "keyword `{keyword}` is not supported ({why}); the server's --lenient-schemas ignores it"
            )));
        }
        let line = format!("`{}` at {} ignored ({why})", at.tool, at.path);
        if !self.arena.warnings.contains(&line) {
            tracing::warn!("schema of {line}");
            self.arena.warnings.push(line);
        }
        Ok(())
    }

    fn follow(&mut self, reference: &Value, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let reference = reference.as_str().ok_or_else(|| at.error("must be a string"))?;
        let (pointer, target) = match self.document.resolve(reference) {
            Ok(found) => found,
            Err(why) => {
                self.unsupported(at, "$ref", &why)?;
                return Ok(self.arena.any);
            }
        };
        self.reference(&pointer, target, at)
    }

    fn alternatives(&mut self, list: &Value, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let nodes = self.alternative_nodes(list, at)?;
        Ok(self.arena.union(nodes))
    }

    /// `oneOf`: `anyOf` when no value can match two alternatives, else a
    /// [`Node::OneOf`] (exactly one must accept where the value ends). The
    /// alternatives are read exactly (declared objects open), so "exactly
    /// one" is JSON Schema's count, not the narrower generation shapes'.
    /// Disjoint alternatives are then compiled again as generation reads them
    /// (a value of a narrower alternative still matches no other).
    fn one_of(&mut self, list: &Value, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        self.exact += 1;
        let exact = self.alternative_nodes(list, at);
        self.exact -= 1;
        let exact = exact?;
        if !self.merger.all_disjoint(self.arena, &exact) {
            return Ok(self.merger.exclusive(self.arena, exact));
        }
        let narrow = match self.exact == 0 && self.arena.options().close_declared_objects {
            true => self.alternative_nodes(list, at)?,
            false => exact,
        };
        Ok(self.arena.union(narrow))
    }

    fn alternative_nodes(&mut self, list: &Value, at: &At<'_>) -> Result<Vec<NodeId>, ConstrainError> {
        schema_list(list, at)?
            .iter()
            .enumerate()
            .map(|(i, schema)| self.compile(schema, &at.child(&i.to_string())))
            .collect()
    }

    fn type_set(&self, map: &Map<String, Value>, at: &At<'_>) -> Result<u8, ConstrainError> {
        let bit = |name: &str, at: &At<'_>| -> Result<u8, ConstrainError> {
            Ok(match name {
                "null" => types::NULL,
                "boolean" => types::BOOLEAN,
                "integer" => types::INTEGER,
                "number" => types::NUMBER | types::INTEGER,
                "string" => types::STRING,
                "array" => types::ARRAY,
                "object" => types::OBJECT,
                other => return Err(at.error(format!("unknown type `{other}`"))),
            })
        };
        match map.get("type") {
            None => Ok(types::ALL),
            Some(Value::String(name)) => bit(name, &at.child("type")),
            Some(Value::Array(names)) => names.iter().enumerate().try_fold(0, |set, (i, name)| {
                let at = at.child("type").child(&i.to_string());
                let name = name.as_str().ok_or_else(|| at.error("must be a type name"))?;
                Ok(set | bit(name, &at)?)
            }),
            Some(_) => Err(at.child("type").error("must be a type name or a list of them")),
        }
    }

    /// The union of one shape per admitted type, each with its type's keywords.
    fn typed(&mut self, map: &Map<String, Value>, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let set = self.type_set(map, at)?;
        let has = |keywords: &[&str]| keywords.iter().any(|k| map.contains_key(*k));
        let specific = [STRING_KEYWORDS, NUMBER_KEYWORDS, ARRAY_KEYWORDS, OBJECT_KEYWORDS];
        if set == types::ALL && !specific.iter().any(|keywords| has(keywords)) {
            return Ok(self.arena.any);
        }
        let mut parts = Vec::new();
        if set & types::NULL != 0 {
            parts.push(self.arena.push(Node::Null));
        }
        if set & types::BOOLEAN != 0 {
            parts.push(self.arena.push(Node::Boolean));
        }
        if set & (types::NUMBER | types::INTEGER) != 0 {
            let integer = set & types::NUMBER == 0;
            parts.push(self.number(map, at, integer)?);
        }
        if set & types::STRING != 0 {
            let spec = self.string_shape(map, at)?;
            parts.push(self.arena.string(spec).map_err(|e| at.error(e))?);
        }
        if set & types::ARRAY != 0 {
            parts.push(self.container(map, at, Self::array)?);
        }
        if set & types::OBJECT != 0 {
            parts.push(self.container(map, at, Self::object)?);
        }
        Ok(self.arena.union(parts))
    }

    /// An array or object shape, one container deeper than its parent.
    fn container(
        &mut self,
        map: &Map<String, Value>,
        at: &At<'_>,
        build: ShapeBuilder<'a>,
    ) -> Result<NodeId, ConstrainError> {
        if self.open_containers >= MAX_DEPTH {
            return Err(at.error(format!(
                "containers nest more than {MAX_DEPTH} deep here (objects and arrays count); deeper values are not supported"
            )));
        }
        self.open_containers += 1;
        let node = build(self, map, at);
        self.open_containers -= 1;
        node
    }

    fn array(&mut self, map: &Map<String, Value>, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let mut prefix = Vec::new();
        if let Some(list) = map.get("prefixItems") {
            for (i, schema) in schema_list(list, &at.child("prefixItems"))?.iter().enumerate() {
                prefix.push(self.compile(schema, &at.child("prefixItems").child(&i.to_string()))?);
            }
        }
        let items = match map.get("items") {
            None => Some(self.arena.any),
            Some(schema @ (Value::Object(_) | Value::Bool(_))) => Some(self.compile(schema, &at.child("items"))?),
            Some(_) => {
                self.unsupported(&at.child("items"), "items", "an array of schemas is the old tuple form")?;
                Some(self.arena.any)
            }
        };
        let min = count(map, "minItems", at)?.unwrap_or(0);
        if min > MAX_MIN_ITEMS {
            return Err(at.child("minItems").error(format!(
                "{min} is over the largest minItems supported ({MAX_MIN_ITEMS})"
            )));
        }
        let max = count(map, "maxItems", at)?.unwrap_or(u64::MAX);
        Ok(self.arena.array(ArrayShape {
            prefix,
            items,
            min,
            max,
        }))
    }

    fn object(&mut self, map: &Map<String, Value>, at: &At<'_>) -> Result<NodeId, ConstrainError> {
        let empty = Map::new();
        let properties = match map.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(at.child("properties").error("must be an object")),
        };
        let additional = match map.get("additionalProperties") {
            None if !properties.is_empty() && self.arena.options().close_declared_objects && self.exact == 0 => None,
            None => Some(self.arena.any),
            Some(schema @ (Value::Object(_) | Value::Bool(_))) => {
                Some(self.compile(schema, &at.child("additionalProperties"))?)
            }
            Some(_) => return Err(at.child("additionalProperties").error("must be a boolean or a schema")),
        };
        // Property i is the i-th name in sorted order (sorted here: serde_json
        // keeps insertion order when a dependency turns on `preserve_order`).
        let mut entries: Vec<(&String, &Value)> = properties.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let mut names: Vec<String> = entries.iter().map(|(name, _)| (*name).clone()).collect();
        let mut props = Vec::with_capacity(names.len());
        for (name, schema) in entries {
            props.push(self.compile(schema, &at.child("properties").child(name))?);
        }
        let required = required_names(map, at)?;
        let key_patterns = self.key_patterns(map, at)?;
        for (name, prop) in names.iter().zip(props.iter_mut()) {
            for (dfa, node) in &key_patterns {
                if dfa.matches(name) {
                    *prop = self.merger.intersect(self.arena, *prop, *node, at)?;
                }
            }
        }
        // A required name not declared is a property of the undeclared kind
        // (any value where additionalProperties is absent, even for a closed object).
        let undeclared = match map.get("additionalProperties") {
            None => self.arena.any,
            Some(_) => additional.unwrap_or(self.arena.never),
        };
        for name in &required {
            if let Err(i) = names.binary_search(name) {
                let mut node = undeclared;
                let matching: Vec<NodeId> = key_patterns
                    .iter()
                    .filter(|(d, _)| d.matches(name))
                    .map(|p| p.1)
                    .collect();
                if !matching.is_empty() {
                    node = self.arena.any;
                    for other in matching {
                        node = self.merger.intersect(self.arena, node, other, at)?;
                    }
                }
                names.insert(i, name.clone());
                props.insert(i, node);
            }
        }
        if names.len() > MAX_PROPERTIES {
            return Err(at.child("properties").error(format!(
                "{} properties, over the limit of {MAX_PROPERTIES}",
                names.len()
            )));
        }
        let required_bits = required
            .iter()
            .filter_map(|name| names.binary_search(name).ok())
            .fold(0u64, |bits, i| bits | 1 << i);
        let min_props = count(map, "minProperties", at)?.unwrap_or(0).min(u32::MAX as u64) as u32;
        let max_props = count(map, "maxProperties", at)?.map_or(u32::MAX, |m| m.min(u32::MAX as u64) as u32);
        let rules = ObjectRules {
            required: required_bits,
            additional,
            min_props,
            max_props,
            keys: self.key_table(map, at, &names, key_patterns, additional)?,
        };
        Ok(self.arena.object(names, props, rules))
    }
}

fn schema_list<'v>(list: &'v Value, at: &At<'_>) -> Result<&'v Vec<Value>, ConstrainError> {
    list.as_array()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| at.error("must be a non-empty array of schemas"))
}

/// A non-negative integer keyword (`2.0` counts as 2).
pub(super) fn count(map: &Map<String, Value>, key: &str, at: &At<'_>) -> Result<Option<u64>, ConstrainError> {
    let Some(value) = map.get(key) else {
        return Ok(None);
    };
    let as_count = value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0)
            .map(|f| f as u64)
    });
    as_count
        .map(Some)
        .ok_or_else(|| at.child(key).error("must be a non-negative integer"))
}

fn required_names(map: &Map<String, Value>, at: &At<'_>) -> Result<Vec<String>, ConstrainError> {
    let Some(list) = map.get("required") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| at.child("required").error("must be an array of property names"))?;
    list.iter()
        .enumerate()
        .map(|(i, name)| {
            name.as_str()
                .map(String::from)
                .ok_or_else(|| at.child("required").child(&i.to_string()).error("must be a string"))
        })
        .collect()
}
