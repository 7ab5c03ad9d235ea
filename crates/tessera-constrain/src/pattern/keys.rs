//! The keys of an object with `patternProperties` or `propertyNames`: one
//! table over the decoded key text, the product of every key pattern, the
//! `propertyNames` pattern and a trie of the declared names. Each state knows
//! how a key ending there is read (a declared property, or an undeclared one
//! and which patterns it matches) and, for liveness, which declared names and
//! which pattern sets it can still reach, so the automaton starts or extends a
//! key only while a key the object still takes can come of it.

use super::{explore, Dfa, PatternError, DEAD, MAX_STATES};
use std::collections::HashMap;
use std::sync::Arc;

/// Most `patternProperties` entries on one object (sets of them are bits of a u64).
pub(crate) const MAX_KEY_PATTERNS: usize = 6;

const NOT_DECLARED: u32 = u32::MAX;

/// How a key that ends in a state is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyEnd {
    /// The declared property with this index.
    Declared(u32),
    /// An undeclared property matching this set of key patterns.
    Undeclared(u8),
}

/// The key table of one object shape.
#[derive(Debug)]
pub(crate) struct KeyDfa {
    classes: [u8; 256],
    class_count: usize,
    next: Vec<u32>,
    /// Per state: how a key ending here is read (`None`: `propertyNames` refuses it).
    ends: Vec<Option<KeyEnd>>,
    /// Per state: declared names reachable (bits), and pattern sets reachable
    /// with undeclared keys (bit `m` for set `m`).
    reach_declared: Vec<u64>,
    reach_sets: Vec<u64>,
    /// Declared names `propertyNames` accepts (bits).
    declared_ok: u64,
}

/// A trie over the declared names (their decoded bytes).
struct NameTrie {
    children: Vec<HashMap<u8, u32>>,
    terminal: Vec<u32>,
}

impl NameTrie {
    fn new(names: &[String]) -> Self {
        let mut trie = Self {
            children: vec![HashMap::new()],
            terminal: vec![NOT_DECLARED],
        };
        for (i, name) in names.iter().enumerate() {
            let mut node = 0;
            for &byte in name.as_bytes() {
                let fresh = trie.children.len() as u32;
                node = *trie.children[node as usize].entry(byte).or_insert(fresh);
                if node == fresh {
                    trie.children.push(HashMap::new());
                    trie.terminal.push(NOT_DECLARED);
                }
            }
            trie.terminal[node as usize] = i as u32;
        }
        trie
    }

    fn step(&self, node: u32, byte: u8) -> u32 {
        if node == DEAD {
            return DEAD;
        }
        self.children[node as usize].get(&byte).copied().unwrap_or(DEAD)
    }

    fn terminal(&self, node: u32) -> u32 {
        if node == DEAD {
            NOT_DECLARED
        } else {
            self.terminal[node as usize]
        }
    }
}

impl KeyDfa {
    /// The table for declared `names`, key `patterns` and the `propertyNames`
    /// table (`None`: every name).
    pub fn build(names: &[String], patterns: &[Arc<Dfa>], allowed: Option<&Dfa>) -> Result<Self, PatternError> {
        let trie = NameTrie::new(names);
        let (classes, class_count, representatives) = classes(names, patterns, allowed);
        // A state: each pattern's state, then the propertyNames state, then the trie node.
        let start: Vec<u32> = vec![0; patterns.len() + 2];
        let step = |state: &Vec<u32>, byte: u8| {
            let named = allowed.map_or(0, |a| a.step(state[patterns.len()], byte));
            if named == DEAD {
                return None;
            }
            let mut to: Vec<u32> = patterns.iter().zip(state).map(|(p, &s)| p.step(s, byte)).collect();
            to.push(named);
            to.push(trie.step(state[patterns.len() + 1], byte));
            Some(to)
        };
        let label = |state: &Vec<u32>| end_of(state, &trie, patterns, allowed);
        let (next, ends) = explore(start, &representatives, step, label).map_err(|_| {
            PatternError(format!(
                "the object's key patterns together need more than {MAX_STATES} automaton states"
            ))
        })?;
        let mut table = Self {
            classes,
            class_count,
            next,
            ends,
            reach_declared: Vec::new(),
            reach_sets: Vec::new(),
            declared_ok: 0,
        };
        table.reach();
        for (i, name) in names.iter().enumerate() {
            let end = name.bytes().fold(0, |state, byte| table.step(state, byte));
            if table.end(end) == Some(KeyEnd::Declared(i as u32)) {
                table.declared_ok |= 1 << i;
            }
        }
        Ok(table)
    }

    /// Fills the reachable names and sets (a fixpoint over reversed edges).
    fn reach(&mut self) {
        let n = self.ends.len();
        let mut incoming: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (from, row) in self.next.chunks(self.class_count).enumerate() {
            for &to in row.iter().filter(|&&to| to != DEAD) {
                incoming[to as usize].push(from as u32);
            }
        }
        (self.reach_declared, self.reach_sets) = self
            .ends
            .iter()
            .map(|end| match end {
                Some(KeyEnd::Declared(i)) => (1 << i, 0),
                Some(KeyEnd::Undeclared(set)) => (0, 1 << set),
                None => (0, 0),
            })
            .unzip();
        let mut todo: Vec<u32> = (0..n as u32).collect();
        while let Some(state) = todo.pop() {
            let (declared, sets) = (self.reach_declared[state as usize], self.reach_sets[state as usize]);
            for &from in &incoming[state as usize] {
                let f = from as usize;
                if self.reach_declared[f] | declared != self.reach_declared[f]
                    || self.reach_sets[f] | sets != self.reach_sets[f]
                {
                    self.reach_declared[f] |= declared;
                    self.reach_sets[f] |= sets;
                    todo.push(from);
                }
            }
        }
    }

    /// The state after a decoded key byte.
    pub fn step(&self, state: u32, byte: u8) -> u32 {
        if state == DEAD {
            return DEAD;
        }
        self.next[state as usize * self.class_count + self.classes[byte as usize] as usize]
    }

    /// Whether a key allowed now can still come from `state`: a declared name
    /// among `declared`, or an undeclared key whose pattern set is among `sets`.
    pub fn live(&self, state: u32, declared: u64, sets: u64) -> bool {
        state != DEAD
            && (self.reach_declared[state as usize] & declared != 0 || self.reach_sets[state as usize] & sets != 0)
    }

    /// How a key ending in `state` is read.
    pub fn end(&self, state: u32) -> Option<KeyEnd> {
        if state == DEAD {
            return None;
        }
        self.ends[state as usize]
    }

    /// Whether `propertyNames` accepts declared name `i`.
    pub fn names_allowed(&self, i: usize) -> bool {
        self.declared_ok >> i & 1 != 0
    }

    /// Whether keys whose pattern set is among `sets` exist at all.
    pub fn has_undeclared(&self, sets: u64) -> bool {
        self.reach_sets[0] & sets != 0
    }
}

/// How a key ending in the product `state` is read.
fn end_of(state: &[u32], trie: &NameTrie, patterns: &[Arc<Dfa>], allowed: Option<&Dfa>) -> Option<KeyEnd> {
    let named = allowed.is_none_or(|a| a.accepts(state[patterns.len()]));
    if !named {
        return None;
    }
    let declared = trie.terminal(state[patterns.len() + 1]);
    if declared != NOT_DECLARED {
        return Some(KeyEnd::Declared(declared));
    }
    let set = patterns
        .iter()
        .zip(state)
        .enumerate()
        .filter(|(_, (p, &s))| p.accepts(s))
        .fold(0u8, |set, (i, _)| set | 1 << i);
    Some(KeyEnd::Undeclared(set))
}

/// Byte classes that no component tells apart (bytes of declared names are
/// each their own class).
fn classes(names: &[String], patterns: &[Arc<Dfa>], allowed: Option<&Dfa>) -> ([u8; 256], usize, Vec<u8>) {
    let mut in_names = [false; 256];
    for byte in names.iter().flat_map(|n| n.bytes()) {
        in_names[byte as usize] = true;
    }
    let mut classes = [0u8; 256];
    let mut index: HashMap<Vec<u32>, u8> = HashMap::new();
    let mut representatives = Vec::new();
    for byte in 0..=255u8 {
        let mut signature: Vec<u32> = patterns.iter().map(|p| p.classes[byte as usize] as u32).collect();
        signature.push(allowed.map_or(0, |a| a.classes[byte as usize] as u32));
        signature.push(if in_names[byte as usize] { 256 + byte as u32 } else { 0 });
        signature.push((0x80..0xC0).contains(&byte) as u32);
        let class = *index.entry(signature).or_insert_with(|| {
            representatives.push(byte);
            (representatives.len() - 1) as u8
        });
        classes[byte as usize] = class;
    }
    (classes, representatives.len(), representatives)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(keys: &KeyDfa, text: &str) -> u32 {
        text.bytes().fold(0, |s, b| keys.step(s, b))
    }

    #[test]
    fn keys_are_read_as_declared_or_by_the_patterns_they_match() {
        let names = vec!["foo".to_string()];
        let patterns = vec![Dfa::ecma("f.*o").unwrap(), Dfa::ecma("^b").unwrap()];
        let keys = KeyDfa::build(&names, &patterns, None).unwrap();
        assert_eq!(keys.end(walk(&keys, "foo")), Some(KeyEnd::Declared(0)));
        assert_eq!(keys.end(walk(&keys, "fooo")), Some(KeyEnd::Undeclared(0b01)));
        assert_eq!(keys.end(walk(&keys, "bfo")), Some(KeyEnd::Undeclared(0b11)));
        assert_eq!(keys.end(walk(&keys, "x")), Some(KeyEnd::Undeclared(0)));
    }

    #[test]
    fn property_names_cut_keys_and_liveness_sees_what_is_left() {
        let names = vec!["a".to_string()];
        let allowed = Dfa::ecma("^a+$").unwrap();
        let keys = KeyDfa::build(&names, &[], Some(&allowed)).unwrap();
        assert_eq!(keys.step(0, b'b'), DEAD);
        let a = walk(&keys, "a");
        assert!(keys.live(a, 1, 0), "`a` itself");
        assert!(keys.live(a, 0, 1), "`aa` and longer, undeclared");
        // `a` already given and no undeclared keys taken: nothing can start.
        assert!(!keys.live(0, 0, 0));
    }
}
