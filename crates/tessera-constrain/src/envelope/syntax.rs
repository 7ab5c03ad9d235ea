//! How calls appear in one response's text ([`CallSyntax`]): read by the
//! whole-text parser ([`super::output`]) and the streaming one
//! ([`super::stream`]) alike.

use super::bare::BareForm;
use super::pieces::CallFormat;
use std::sync::Arc;

/// How calls appear in one response's text: the template's envelope and, in
/// `auto` mode, the family's bare forms (calls to the allowed names only, at
/// the reply's start and after a bare call; see [`super::bare`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSyntax {
    format: CallFormat,
    /// Names a bare call may use; empty = bare calls are text.
    bare_names: Arc<[String]>,
}

impl CallSyntax {
    /// Calls in `format`'s envelope only.
    pub fn new(format: CallFormat) -> Self {
        Self {
            format,
            bare_names: Arc::from(Vec::new()),
        }
    }

    /// Bare calls to `names` are calls too.
    pub fn with_bare_calls(self, names: impl IntoIterator<Item = String>) -> Self {
        Self {
            bare_names: names.into_iter().collect(),
            ..self
        }
    }

    /// The envelope's family.
    pub fn format(&self) -> CallFormat {
        self.format
    }

    /// The bare forms in effect and the names they may call (none outside `auto`).
    pub(crate) fn bare(&self) -> (Vec<BareForm>, &[String]) {
        match self.bare_names.is_empty() {
            true => (Vec::new(), &[]),
            false => (BareForm::of(self.format), &self.bare_names),
        }
    }
}
