//! One JSON value checked against a schema by the very automaton that
//! constrains generation: what the conformance suite drives, and a way for a
//! caller to ask whether a text is a value the constraint would produce.

use crate::error::ConstrainError;
use crate::json::Shortest;
use crate::schema::{NodeId, SchemaArena, SchemaOptions};
use serde_json::Value;

/// A compiled schema for a whole JSON value (any root type).
#[derive(Debug, Clone)]
pub struct ValueSchema {
    arena: SchemaArena,
    root: NodeId,
    shortest: Shortest,
}

impl ValueSchema {
    /// Compile `schema`; refused keywords and invalid schemas are errors naming
    /// the keyword and its JSON pointer (`name` stands for the tool).
    pub fn compile(name: &str, schema: &Value, options: SchemaOptions) -> Result<Self, ConstrainError> {
        let mut arena = SchemaArena::new(options, Default::default());
        let root = arena.compile_value(name, schema)?;
        let shortest = crate::json::finish::finish_and_check(&mut arena, [(name, root)])?;
        Ok(Self { arena, root, shortest })
    }

    /// Whether the automaton accepts `text` byte by byte as one complete value
    /// (no leading or trailing whitespace).
    pub fn accepts(&self, text: &[u8]) -> bool {
        crate::json::accepts(&self.arena, Some(&self.shortest), self.root, text)
    }

    /// Keywords ignored under [`SchemaOptions::lenient`], each with its path.
    pub fn warnings(&self) -> &[String] {
        &self.arena.warnings
    }
}
