//! Tool definitions compiled once per tool set, and tool choices resolved
//! against them into the set of names a call may use.

use crate::choice::AllowedTool;
use crate::error::ConstrainError;
use crate::json::Shortest;
use crate::literal::LiteralTrie;
use crate::pattern::PatternCache;
use crate::schema::{NodeId, SchemaArena, SchemaOptions};
use serde_json::Value;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Longest tool name accepted.
pub const MAX_NAME_LEN: usize = 64;

/// A tool as a request declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// `[A-Za-z0-9_.-]{1,64}`.
    pub name: String,
    /// What it does (prompt text; not used by the automaton).
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub parameters: Value,
}

impl ToolDef {
    /// This definition with `text` applied to every piece of its text: the
    /// name, the description and every string of the schema, keys included
    /// (how a prompt builder rewrites outside text before rendering it).
    pub fn map_text(&self, mut text: impl FnMut(&str) -> String) -> ToolDef {
        ToolDef {
            name: text(&self.name),
            description: text(&self.description),
            parameters: map_json_text(&self.parameters, &mut text),
        }
    }
}

fn map_json_text(value: &Value, text: &mut impl FnMut(&str) -> String) -> Value {
    match value {
        Value::String(string) => Value::String(text(string)),
        Value::Array(items) => Value::Array(items.iter().map(|item| map_json_text(item, text)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (text(key), map_json_text(item, text)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A tool set, validated and compiled: names plus one schema arena.
#[derive(Debug, Clone)]
pub struct CompiledTools {
    pub(crate) names: Vec<String>,
    pub(crate) roots: Vec<NodeId>,
    pub(crate) arena: SchemaArena,
    /// Shortest values of the arena's nodes (budget-aware closing).
    pub(crate) shortest: Shortest,
    hash: u64,
}

/// Canonical hash of a tool list: names, descriptions and schemas serialized
/// with sorted keys, in order (the same list always hashes the same).
pub fn tools_hash(tools: &[ToolDef]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for tool in tools {
        tool.name.hash(&mut hasher);
        tool.description.hash(&mut hasher);
        // serde_json maps iterate in sorted key order: to_string is canonical.
        tool.parameters.to_string().hash(&mut hasher);
    }
    hasher.finish()
}

fn check_name(index: usize, name: &str) -> Result<(), ConstrainError> {
    let invalid = |reason: String| ConstrainError::InvalidName {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(ConstrainError::EmptyName { index });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(invalid(format!(
            "{} bytes, over the limit of {MAX_NAME_LEN}",
            name.len()
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(invalid(format!("character {c:?} is outside [A-Za-z0-9_.-]")));
    }
    Ok(())
}

/// A response format's schema, compiled (OpenAI's `response_format`): the
/// whole response is one JSON object obeying it. The automaton reads it as it
/// reads a call's arguments, so it is compiled the same way, but it is its own
/// type: never a tool set, never named as a tool.
#[derive(Debug, Clone)]
pub struct ResponseSchema {
    pub(crate) compiled: Arc<CompiledTools>,
    pub(crate) root: NodeId,
}

/// The entry a response schema is compiled as (not a tool: never in a prompt
/// or a choice).
const RESPONSE_ENTRY: &str = "response_format";

impl ResponseSchema {
    /// Compile `schema` (an object schema) as `options` say.
    pub fn compile(schema: &Value, options: SchemaOptions) -> Result<Self, ConstrainError> {
        let compiled = CompiledTools::compile_with(&[response_entry(schema)], options);
        Self::from_compiled(compiled.map(Arc::new))
    }

    /// Keywords ignored under [`SchemaOptions::lenient`], each with its path.
    pub fn warnings(&self) -> &[String] {
        self.compiled.warnings()
    }

    fn from_compiled(compiled: Result<Arc<CompiledTools>, ConstrainError>) -> Result<Self, ConstrainError> {
        let compiled = compiled.map_err(|error| match error {
            ConstrainError::InvalidSchema { path, message, .. } => {
                ConstrainError::InvalidResponseSchema { path, message }
            }
            other => other,
        })?;
        let root = *compiled
            .roots
            .first()
            .ok_or_else(|| ConstrainError::NoTools(RESPONSE_ENTRY.into()))?;
        Ok(Self { compiled, root })
    }
}

fn response_entry(schema: &Value) -> ToolDef {
    ToolDef {
        name: RESPONSE_ENTRY.into(),
        description: String::new(),
        parameters: schema.clone(),
    }
}

impl CompiledTools {
    /// Validate names (non-empty, unique, `[A-Za-z0-9_.-]`) and compile every
    /// schema for generation ([`SchemaOptions::GENERATION`]).
    pub fn compile(tools: &[ToolDef]) -> Result<Self, ConstrainError> {
        Self::compile_with(tools, SchemaOptions::GENERATION)
    }

    /// [`compile`](Self::compile) with the schemas read as `options` say.
    pub fn compile_with(tools: &[ToolDef], options: SchemaOptions) -> Result<Self, ConstrainError> {
        Self::compile_in(tools, options, Default::default())
    }

    /// [`compile_with`](Self::compile_with), its patterns compiled in `patterns`.
    fn compile_in(
        tools: &[ToolDef],
        options: SchemaOptions,
        patterns: Arc<PatternCache>,
    ) -> Result<Self, ConstrainError> {
        let mut arena = SchemaArena::new(options, patterns);
        let mut names: Vec<String> = Vec::with_capacity(tools.len());
        let mut roots = Vec::with_capacity(tools.len());
        for (index, tool) in tools.iter().enumerate() {
            check_name(index, &tool.name)?;
            if names.contains(&tool.name) {
                return Err(ConstrainError::DuplicateName(tool.name.clone()));
            }
            roots.push(arena.compile_parameters(&tool.name, &tool.parameters)?);
            names.push(tool.name.clone());
        }
        let shortest = crate::json::finish::finish_and_check(
            &mut arena,
            names.iter().map(String::as_str).zip(roots.iter().copied()),
        )?;
        Ok(Self {
            names,
            roots,
            shortest,
            arena,
            hash: tools_hash(tools),
        })
    }

    /// The tool names, in declaration order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The canonical hash the set was compiled from.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Keywords ignored under [`SchemaOptions::lenient`], each with its path (empty when strict).
    pub fn warnings(&self) -> &[String] {
        &self.arena.warnings
    }

    /// Resolve `allowed` (names or families; `None` = every tool) to tool indices.
    pub fn resolve(&self, allowed: Option<&[AllowedTool]>) -> Result<Vec<usize>, ConstrainError> {
        let Some(entries) = allowed else {
            return Ok((0..self.names.len()).collect());
        };
        let mut chosen = vec![false; self.names.len()];
        for entry in entries {
            match entry {
                AllowedTool::Family(prefix) => {
                    let family: Vec<usize> = (0..self.names.len())
                        .filter(|&i| self.names[i].starts_with(prefix.as_str()))
                        .collect();
                    if family.is_empty() {
                        return Err(ConstrainError::EmptyFamily(prefix.clone()));
                    }
                    family.iter().for_each(|&i| chosen[i] = true);
                }
                AllowedTool::Name(name) => {
                    let index = self
                        .names
                        .iter()
                        .position(|n| n == name)
                        .ok_or_else(|| ConstrainError::UnknownTool(name.clone()))?;
                    chosen[index] = true;
                }
            }
        }
        Ok((0..self.names.len()).filter(|&i| chosen[i]).collect())
    }
}

/// Compiled tool sets by the canonical hash of their list, so a tool list sent
/// with every request of a session is compiled once. Shared by reference
/// between threads: the lock is held only to find or insert a set's slot,
/// never across a compile, so different sets compile in parallel and requests
/// for one new set wait for its single compile. Bounded: least recently used
/// sets are dropped beyond `capacity`.
#[derive(Debug)]
pub struct ToolSetCache {
    capacity: usize,
    options: SchemaOptions,
    /// Most recently used last.
    sets: Mutex<Vec<CachedSet>>,
    compiles: AtomicUsize,
    /// The pattern tables of every set compiled here (not process-wide).
    patterns: Arc<PatternCache>,
}

/// One tool list's slot: filled once, by the first request that needs it.
#[derive(Debug)]
struct CachedSet {
    hash: u64,
    defs: Vec<ToolDef>,
    compiled: Arc<OnceLock<Result<Arc<CompiledTools>, ConstrainError>>>,
}

impl ToolSetCache {
    /// A cache of at most `capacity` sets (at least one), compiled for generation.
    pub fn new(capacity: usize) -> Self {
        Self::with_options(capacity, SchemaOptions::GENERATION)
    }

    /// A cache whose sets are compiled with `options`.
    pub fn with_options(capacity: usize, options: SchemaOptions) -> Self {
        Self {
            capacity: capacity.max(1),
            options,
            sets: Mutex::new(Vec::new()),
            compiles: AtomicUsize::new(0),
            patterns: Arc::default(),
        }
    }

    /// The compiled set for `tools`, compiling it on a miss (a refused list's
    /// error is kept too). A hit needs equal definitions, not only an equal
    /// hash (a crafted collision gets its own set).
    pub fn get_or_compile(&self, tools: &[ToolDef]) -> Result<Arc<CompiledTools>, ConstrainError> {
        let slot = self.slot(tools);
        slot.get_or_init(|| {
            self.compiles.fetch_add(1, Ordering::Relaxed);
            CompiledTools::compile_in(tools, self.options, self.patterns.clone()).map(Arc::new)
        })
        .clone()
    }

    /// The slot of `tools`, found or made (the lock is held only here).
    fn slot(&self, tools: &[ToolDef]) -> Arc<OnceLock<Result<Arc<CompiledTools>, ConstrainError>>> {
        let hash = tools_hash(tools);
        let mut sets = self.sets.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = sets.iter().position(|set| set.hash == hash && set.defs == tools) {
            let set = sets.remove(at);
            let slot = set.compiled.clone();
            sets.push(set);
            return slot;
        }
        if sets.len() == self.capacity {
            sets.remove(0);
        }
        let compiled = Arc::new(OnceLock::new());
        sets.push(CachedSet {
            hash,
            defs: tools.to_vec(),
            compiled: compiled.clone(),
        });
        compiled
    }

    /// The compiled response schema for `schema`, compiling it on a miss
    /// (cached beside the tool sets).
    pub fn get_or_compile_response(&self, schema: &Value) -> Result<ResponseSchema, ConstrainError> {
        ResponseSchema::from_compiled(self.get_or_compile(&[response_entry(schema)]))
    }

    /// Number of sets held.
    pub fn len(&self) -> usize {
        self.sets.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no set is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many compiles have run (a test of the single compile per set).
    pub fn compiles(&self) -> usize {
        self.compiles.load(Ordering::Relaxed)
    }
}

/// The names a call may use, as a trie (string i = `tools[i]`).
#[derive(Debug, Clone)]
pub(crate) struct AllowedNames {
    pub trie: LiteralTrie,
    /// Tool index of each trie string.
    pub tools: Vec<usize>,
}

impl AllowedNames {
    pub fn new(compiled: &CompiledTools, tools: Vec<usize>) -> Self {
        let names: Vec<&str> = tools.iter().map(|&i| compiled.names[i].as_str()).collect();
        Self {
            trie: LiteralTrie::new(&names),
            tools,
        }
    }

    /// Longest common prefix of the allowed names.
    pub fn common_prefix<'a>(&self, compiled: &'a CompiledTools) -> &'a str {
        let mut names = self.tools.iter().map(|&i| compiled.names[i].as_str());
        let Some(first) = names.next() else {
            return "";
        };
        let len = names.fold(first.len(), |len, name| {
            first
                .bytes()
                .zip(name.bytes())
                .take(len)
                .take_while(|(a, b)| a == b)
                .count()
        });
        &first[..len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, parameters: Value) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: String::new(),
            parameters,
        }
    }

    #[test]
    fn the_cache_compiles_each_list_once_keyed_by_canonical_content() {
        let cache = ToolSetCache::new(2);
        // Same content, keys in a different order: one canonical hash, one compilation.
        let a = [tool("a", json!({"type": "object", "properties": {"x": {}, "y": {}}}))];
        let a_again = [tool(
            "a",
            serde_json::from_str(r#"{"properties": {"y": {}, "x": {}}, "type": "object"}"#).unwrap(),
        )];
        let first = cache.get_or_compile(&a).unwrap();
        let second = cache.get_or_compile(&a_again).unwrap();
        assert!(std::sync::Arc::ptr_eq(&first, &second));
        cache.get_or_compile(&[tool("b", json!({}))]).unwrap();
        cache.get_or_compile(&[tool("c", json!({}))]).unwrap();
        assert_eq!(cache.len(), 2, "bounded");
        let recompiled = cache.get_or_compile(&a).unwrap();
        assert!(
            !std::sync::Arc::ptr_eq(&first, &recompiled),
            "the least recently used set was dropped"
        );
        assert!(cache.get_or_compile(&[tool("", json!({}))]).is_err());
    }

    #[test]
    fn concurrent_requests_for_one_new_set_compile_it_once() {
        let cache = ToolSetCache::new(4);
        let tools: Vec<ToolDef> = (0..300)
            .map(|i| {
                tool(
                    &format!("tool_{i}"),
                    json!({"type": "object", "properties": {"path": {"type": "string", "pattern": "^[a-z]+/[0-9]{2,4}$"}}}),
                )
            })
            .collect();
        let sets: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| cache.get_or_compile(&tools).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(cache.compiles(), 1, "one compile for four requests");
        assert!(sets.iter().all(|set| std::sync::Arc::ptr_eq(set, &sets[0])));
        // While one set compiles, another is found without waiting for it.
        cache.get_or_compile(&[tool("other", json!({}))]).unwrap();
        assert_eq!(cache.compiles(), 2);
    }
}
