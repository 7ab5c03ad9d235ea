//! Stored responses for `previous_response_id`: each finished response with
//! `store` on keeps its whole conversation (the input it was given, earlier
//! stored turns included, then its own output as an assistant turn), so a
//! next request can send only its new items. Bounded: when full, the least
//! recently used response goes. In memory only: a restart forgets them, and
//! an unknown or forgotten id is a 400 naming `previous_response_id`.
//! O(1) lookups; O(capacity) to evict, once per insert when full.

use crate::core::request::Message;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
    conversation: Arc<Vec<Message>>,
    /// When it was last stored or read (a larger stamp is more recent).
    used: u64,
}

impl ResponseStore {
    /// A store keeping up to `capacity` responses (0 keeps none).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::default(),
        }
    }

    /// Keep `conversation` as response `id`'s.
    pub fn put(&self, id: &str, conversation: Vec<Message>) {
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
        let conversation = Arc::new(conversation);
        entries.by_id.insert(id.to_string(), Entry { conversation, used });
    }

    /// Response `id`'s conversation, if it is still kept.
    pub fn get(&self, id: &str) -> Option<Arc<Vec<Message>>> {
        let mut entries = self.inner.lock().ok()?;
        entries.clock += 1;
        let now = entries.clock;
        let entry = entries.by_id.get_mut(id)?;
        entry.used = now;
        Some(entry.conversation.clone())
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

    fn turn(text: &str) -> Vec<Message> {
        vec![Message::User(text.into())]
    }

    #[test]
    fn the_least_recently_used_response_goes_first() {
        let store = ResponseStore::new(2);
        store.put("a", turn("a"));
        store.put("b", turn("b"));
        assert!(store.get("a").is_some(), "reading a makes b the oldest");
        store.put("c", turn("c"));
        assert!(store.get("b").is_none());
        assert_eq!(store.get("a").unwrap().as_slice(), turn("a").as_slice());
        assert!(store.get("c").is_some());
        assert_eq!(store.len(), 2);
        let none = ResponseStore::new(0);
        none.put("a", turn("a"));
        assert!(none.is_empty());
    }
}
