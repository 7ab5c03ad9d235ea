//! The replies the model generated for its recent calls, by call id. Every
//! protocol sends an earlier call back with the id this server gave it
//! (`call_…`, or `toolu_…` for Anthropic), but not as it was generated:
//! Anthropic sends a parsed `input` object, clients re-serialize arguments
//! (compact, pretty-printed, keys reordered), and no protocol says whether
//! the model wrote its call in the template's envelope, bare (`{"name": …}`)
//! or in a ```json fence. The prompt must still spell the reply as the model
//! wrote it, or the next turn misses the cache from that reply on. So an
//! answer with calls remembers its whole text (the engine's prefill and
//! every generated token's text) under each call's id, with what it said:
//! its free text and its calls. A reply sent back saying the same (the same
//! text, the same calls with the same argument values) is spelled as
//! generated; anything else is rendered from what the client sent, which is
//! what it asked for. Keyed by id, one conversation's reply never takes
//! another's spelling. Bounded by entries and bytes: the oldest go first.

use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Replies remembered.
const REMEMBERED: usize = 4096;
/// Bytes of replies remembered.
const REMEMBERED_BYTES: usize = 32 << 20;

/// One generated reply with calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// Its whole text, as the model's tokens spell it.
    pub text: String,
    /// Its free text, as answered.
    pub content: String,
    /// Its calls' names and arguments, as answered.
    pub calls: Vec<(String, String)>,
}

impl Reply {
    fn bytes(&self) -> usize {
        self.text.len() + self.content.len() + self.calls.iter().map(|(n, a)| n.len() + a.len()).sum::<usize>()
    }

    /// Whether a client's `content` and `calls` (names, argument values) say what this reply said.
    pub fn says(&self, content: &str, calls: &[(&str, Value)]) -> bool {
        self.content == content
            && self.calls.len() == calls.len()
            && self
                .calls
                .iter()
                .zip(calls)
                .all(|((name, arguments), (sent_name, sent))| {
                    name == sent_name && serde_json::from_str::<Value>(arguments).is_ok_and(|value| &value == sent)
                })
    }

    /// Call `index`'s arguments as generated.
    pub fn arguments(&self, index: usize) -> Option<&str> {
        self.calls.get(index).map(|(_, arguments)| arguments.as_str())
    }
}

/// Generated replies by call id.
#[derive(Debug, Default)]
pub struct ReplyMemory {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    /// Each call id's reply and the call's position in it.
    by_id: HashMap<String, (Arc<Reply>, usize)>,
    /// Replies in the order they came, oldest first, with their call ids.
    order: VecDeque<(Arc<Reply>, Vec<String>)>,
    bytes: usize,
}

/// `value` as sorted-key compact JSON (serde_json's map is ordered by key).
pub fn canonical(value: &Value) -> String {
    value.to_string()
}

impl ReplyMemory {
    /// Remember `reply`, whose calls have `ids` (in order).
    pub fn remember(&self, ids: Vec<String>, reply: Reply) {
        let bytes = reply.bytes();
        if ids.is_empty() || bytes > REMEMBERED_BYTES {
            return;
        }
        let Ok(mut entries) = self.inner.lock() else {
            return;
        };
        let reply = Arc::new(reply);
        for (index, id) in ids.iter().enumerate() {
            entries.by_id.insert(id.clone(), (reply.clone(), index));
        }
        entries.bytes += bytes;
        entries.order.push_back((reply, ids));
        while entries.order.len() > REMEMBERED || entries.bytes > REMEMBERED_BYTES {
            let Some((oldest, ids)) = entries.order.pop_front() else {
                break;
            };
            entries.bytes -= oldest.bytes();
            for id in ids {
                if entries
                    .by_id
                    .get(&id)
                    .is_some_and(|(reply, _)| Arc::ptr_eq(reply, &oldest))
                {
                    entries.by_id.remove(&id);
                }
            }
        }
    }

    /// The reply call `id` was made in, and the call's position in it.
    pub fn reply(&self, id: &str) -> Option<(Arc<Reply>, usize)> {
        self.inner.lock().ok()?.by_id.get(id).cloned()
    }

    /// The arguments the model generated for call `id`, when they are `value`.
    pub fn arguments(&self, id: &str, value: &Value) -> Option<String> {
        let (reply, index) = self.reply(id)?;
        let text = reply.arguments(index)?;
        let same = serde_json::from_str::<Value>(text).is_ok_and(|generated| &generated == value);
        same.then(|| text.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reply(text: &str, arguments: &str) -> Reply {
        Reply {
            text: text.into(),
            content: String::new(),
            calls: vec![("write".into(), arguments.into())],
        }
    }

    #[test]
    fn a_reply_is_found_by_its_calls_and_judged_by_what_it_said() {
        let memory = ReplyMemory::default();
        let generated = r#"{"path": "notes.md", "content": "a\u00e9"}"#;
        memory.remember(
            vec!["call_1_0".into()],
            reply(
                &format!("{{\"name\": \"write\", \"arguments\": {generated}}}"),
                generated,
            ),
        );
        let reordered = json!({"content": "aé", "path": "notes.md"});
        assert_eq!(memory.arguments("call_1_0", &reordered).as_deref(), Some(generated));
        assert_eq!(
            memory.arguments("call_1_0", &json!({"path": "x"})),
            None,
            "another value"
        );
        assert_eq!(memory.arguments("call_2_0", &reordered), None, "another call");
        let (found, index) = memory.reply("call_1_0").unwrap();
        assert_eq!(index, 0);
        assert!(found.says("", &[("write", reordered.clone())]));
        assert!(!found.says("text", &[("write", reordered.clone())]), "other free text");
        assert!(!found.says("", &[("read", reordered)]), "another tool");
        assert_eq!(canonical(&json!({"b": 1, "a": [2]})), r#"{"a":[2],"b":1}"#);
    }

    #[test]
    fn the_oldest_replies_go_first() {
        let memory = ReplyMemory::default();
        for i in 0..=REMEMBERED {
            memory.remember(vec![format!("call_{i}")], reply("x", &format!("{{\"i\": {i}}}")));
        }
        assert!(memory.reply("call_0").is_none());
        assert!(memory.reply("call_1").is_some());
        let big = "x".repeat(REMEMBERED_BYTES / 2);
        for id in ["big_1", "big_2", "big_3"] {
            memory.remember(vec![id.into()], reply(&big, "{}"));
        }
        assert!(memory.reply("big_1").is_none(), "bytes are bounded");
        assert!(memory.reply("big_3").is_some());
    }
}
