//! Stored responses for `previous_response_id`: each finished response with
//! `store` on keeps its own turn (this request's input, then its output as
//! the model generated it) and a link to the response it continued, so a
//! next request can send only its new items and a chain of n turns holds
//! each turn once. Bounded: when full, the least recently used response
//! leaves the index (a response a kept one continues stays reachable
//! through it). In memory only: a restart forgets them, and an unknown or
//! forgotten id is a 400 naming `previous_response_id`. Response ids carry a
//! random part, so one client cannot guess another's. O(1) lookups;
//! O(capacity) to evict, once per insert when full.

use crate::core::request::Message;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};

/// One stored turn and the turn it continued.
#[derive(Debug)]
pub struct Stored {
    previous: Option<Arc<Stored>>,
    messages: Vec<Message>,
}

impl Stored {
    /// A turn of `messages` after `previous`.
    pub fn new(previous: Option<Arc<Stored>>, messages: Vec<Message>) -> Self {
        Self { previous, messages }
    }

    /// The whole conversation up to and including this turn.
    pub fn conversation(&self) -> Vec<Message> {
        let mut turns = vec![&self.messages];
        let mut at = self.previous.as_deref();
        while let Some(turn) = at {
            turns.push(&turn.messages);
            at = turn.previous.as_deref();
        }
        turns.into_iter().rev().flatten().cloned().collect()
    }
}

/// The responses kept.
#[derive(Debug)]
pub struct ResponseStore {
    capacity: usize,
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_id: HashMap<String, Entry>,
    clock: u64,
}

#[derive(Debug)]
struct Entry {
    turn: Arc<Stored>,
    /// When it was last stored or read (a larger stamp is more recent).
    used: u64,
}

/// 64 random bits for a response id (std's per-process random hash keys).
pub fn unguessable() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    hasher.finish()
}

impl ResponseStore {
    /// A store keeping up to `capacity` responses (0 keeps none).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::default(),
        }
    }

    /// Keep `turn` as response `id`'s.
    pub fn put(&self, id: &str, turn: Stored) {
        if self.capacity == 0 {
            return;
        }
        let Ok(mut entries) = self.inner.lock() else {
            return;
        };
        if entries.by_id.len() >= self.capacity && !entries.by_id.contains_key(id) {
            let oldest = entries
                .by_id
                .iter()
                .min_by_key(|(_, entry)| entry.used)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                entries.by_id.remove(&oldest);
            }
        }
        entries.clock += 1;
        let used = entries.clock;
        let turn = Arc::new(turn);
        entries.by_id.insert(id.to_string(), Entry { turn, used });
    }

    /// Response `id`'s turn, if it is still kept.
    pub fn get(&self, id: &str) -> Option<Arc<Stored>> {
        let mut entries = self.inner.lock().ok()?;
        entries.clock += 1;
        let now = entries.clock;
        let entry = entries.by_id.get_mut(id)?;
        entry.used = now;
        Some(entry.turn.clone())
    }

    /// Responses kept.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|entries| entries.by_id.len()).unwrap_or(0)
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(text: &str) -> Stored {
        Stored::new(None, vec![Message::User(text.into())])
    }

    #[test]
    fn the_least_recently_used_response_goes_first() {
        let store = ResponseStore::new(2);
        store.put("a", turn("a"));
        store.put("b", turn("b"));
        assert!(store.get("a").is_some(), "reading a makes b the oldest");
        store.put("c", turn("c"));
        assert!(store.get("b").is_none());
        assert_eq!(store.get("a").unwrap().conversation(), vec![Message::User("a".into())]);
        assert!(store.get("c").is_some());
        assert_eq!(store.len(), 2);
        let none = ResponseStore::new(0);
        none.put("a", turn("a"));
        assert!(none.is_empty());
        assert_ne!(unguessable(), unguessable());
    }

    #[test]
    fn a_chain_keeps_each_turn_once_and_outlives_its_evicted_start() {
        let store = ResponseStore::new(1);
        store.put("first", turn("one"));
        let first = store.get("first");
        store.put("second", Stored::new(first, vec![Message::User("two".into())]));
        assert!(store.get("first").is_none(), "evicted from the index");
        let conversation = store.get("second").unwrap().conversation();
        assert_eq!(
            conversation,
            vec![Message::User("one".into()), Message::User("two".into())]
        );
    }
}
