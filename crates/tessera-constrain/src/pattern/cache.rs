//! Compiled pattern tables by source, shared by the schemas one owner
//! compiles: a [`ToolSetCache`](crate::tools::ToolSetCache) holds one for
//! every set it compiles, a lone compile gets its own. Never process-wide, so
//! what one cache learned is dropped with it.

use super::formats::{format_pattern, max_len_of};
use super::{Dfa, PatternError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Distinct pattern sources a cache keeps before starting over.
const MAX_PATTERNS: usize = 1024;

/// Pattern and format tables compiled so far, by source.
#[derive(Debug, Default)]
pub(crate) struct PatternCache {
    /// ECMA-262 `pattern`s (and `patternProperties` keys), by source.
    ecma: Mutex<HashMap<String, Arc<Dfa>>>,
    /// `format`s, by name.
    formats: Mutex<HashMap<String, Arc<Dfa>>>,
}

impl PatternCache {
    /// [`Dfa::ecma`] of `source`, compiled once per cache.
    pub fn ecma(&self, source: &str) -> Result<Arc<Dfa>, PatternError> {
        if let Some(dfa) = self.lock_ecma().get(source).cloned() {
            return Ok(dfa);
        }
        let dfa = Dfa::ecma(source)?;
        let mut cache = self.lock_ecma();
        if cache.len() >= MAX_PATTERNS {
            cache.clear();
        }
        cache.insert(source.to_string(), dfa.clone());
        Ok(dfa)
    }

    /// [`format_pattern`] of `name`, compiled once per cache.
    pub fn format(&self, name: &str) -> Option<Result<(Arc<Dfa>, u32), PatternError>> {
        let mut formats = self.formats.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(dfa) = formats.get(name) {
            return Some(Ok((dfa.clone(), max_len_of(name))));
        }
        let compiled = format_pattern(name)?;
        if let Ok((dfa, _)) = &compiled {
            formats.insert(name.to_string(), dfa.clone());
        }
        Some(compiled)
    }

    fn lock_ecma(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Dfa>>> {
        self.ecma.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
