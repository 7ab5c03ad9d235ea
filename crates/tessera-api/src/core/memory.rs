//! The arguments text the model generated for its recent calls, by the value
//! it parses to. A protocol that sends an earlier call back as a parsed
//! object (Anthropic's `tool_use.input`), or a client that re-serializes the
//! arguments (pretty-printed, keys reordered), loses the model's spacing and
//! key order; the prompt must still spell the call as generated, or the next
//! turn misses the cache from that call on. Keyed by the value's canonical
//! text (sorted keys, compact), so any serialization of the same value finds
//! it. Bounded: the oldest entry goes first. O(1) per lookup and insert
//! besides hashing the text.

use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Calls remembered.
const REMEMBERED: usize = 4096;

/// Generated arguments by canonical text.
#[derive(Debug, Default)]
pub struct ArgumentMemory {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_value: HashMap<String, String>,
    order: VecDeque<String>,
}

/// `value` as sorted-key compact JSON (serde_json's map is ordered by key).
pub fn canonical(value: &Value) -> String {
    value.to_string()
}

impl ArgumentMemory {
    /// Remember that the model wrote `generated` for a call; text that is
    /// not JSON, or already canonical, needs no entry.
    pub fn remember(&self, generated: &str) {
        let Ok(value) = serde_json::from_str::<Value>(generated) else {
            return;
        };
        let key = canonical(&value);
        if key == generated {
            return;
        }
        let Ok(mut entries) = self.inner.lock() else {
            return;
        };
        if entries.by_value.insert(key.clone(), generated.to_string()).is_none() {
            entries.order.push_back(key);
            if entries.order.len() > REMEMBERED {
                if let Some(oldest) = entries.order.pop_front() {
                    entries.by_value.remove(&oldest);
                }
            }
        }
    }

    /// The text the model generated for `value`, if remembered; else its
    /// canonical text (deterministic, so later turns still agree).
    pub fn spell(&self, value: &Value) -> String {
        let key = canonical(value);
        let remembered = self
            .inner
            .lock()
            .ok()
            .and_then(|entries| entries.by_value.get(&key).cloned());
        remembered.unwrap_or(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_is_spelled_as_generated_however_it_comes_back() {
        let memory = ArgumentMemory::default();
        let generated = r#"{"path": "notes.md", "content": "a\u00e9"}"#;
        memory.remember(generated);
        let reordered = json!({"content": "aé", "path": "notes.md"});
        assert_eq!(memory.spell(&reordered), generated);
        assert_eq!(
            memory.spell(&json!({"path": "x"})),
            r#"{"path":"x"}"#,
            "unknown: canonical"
        );
        assert_eq!(canonical(&json!({"b": 1, "a": [2]})), r#"{"a":[2],"b":1}"#);
    }

    #[test]
    fn the_oldest_entry_goes_first() {
        let memory = ArgumentMemory::default();
        for i in 0..=REMEMBERED {
            memory.remember(&format!("{{\"i\": {i}}}"));
        }
        assert_eq!(memory.spell(&json!({"i": 0})), r#"{"i":0}"#);
        assert_eq!(memory.spell(&json!({"i": 1})), r#"{"i": 1}"#);
    }
}
