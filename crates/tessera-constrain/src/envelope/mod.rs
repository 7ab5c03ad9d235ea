//! The call envelope, in floors: the family and the byte strings around a
//! call ([`pieces`]); the bare forms a family writes without its opener
//! ([`bare`]); the envelope of a template with its bare forms ([`format`]);
//! how calls appear in one response ([`syntax`]); and its two readers, the
//! streaming parser ([`stream`]) and the whole-text one ([`output`]). Each
//! file imports only from the ones listed before it.

pub(crate) mod bare;
pub(crate) mod format;
pub(crate) mod output;
pub(crate) mod pieces;
pub(crate) mod stream;
pub(crate) mod syntax;
