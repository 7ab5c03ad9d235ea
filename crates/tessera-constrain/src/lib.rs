//! Tool calls that are always valid. A response is constrained by a byte-level
//! automaton (free text, the model's call envelope, the tool name through a
//! trie of the allowed names, the arguments through the tool's JSON schema);
//! the tokens allowed next are found by walking the vocabulary trie against it
//! and returned as a bit set the sampler applies to the logits.
//!
//! Pure: no candle, no tokio. Per-tokenizer ([`Vocabulary`]) and per-tool-set
//! ([`CompiledTools`], keyed by [`tools_hash`]) structures are built once;
//! per-response state ([`ToolCallMatcher`]) is small.
//!
//! Why an own automaton and not llguidance (measured with
//! `scripts/compare-llguidance.sh`, figures in BENCHMARKS.md): on the official
//! JSON Schema Test Suite it enforces more groups (162 of 349 against 151)
//! with no wrong group and in any key order; budget-aware closing needs every
//! state's shortest completion, which this automaton computes through its own
//! steps and llguidance does not expose; tool-name tries, envelopes and bare
//! calls are ours anyway. llguidance's fresh-state mask is ~3× faster at p50
//! (a mask per lexer state, shared across states): the idea to borrow next.
#![deny(missing_docs)]

mod budget;
mod call;
mod choice;
mod envelope;
mod error;
mod json;
mod literal;
mod matcher;
mod pattern;
mod schema;
mod tools;
mod value;
mod vocab;

pub use choice::{AllowedTool, CallMode, ToolChoice};
pub use envelope::format::Envelope;
pub use envelope::output::{parse_response, CallParseError, ParsedResponse, ToolCall};
pub use envelope::pieces::CallFormat;
pub use envelope::stream::{CallStreamParser, StreamPiece};
pub use envelope::syntax::CallSyntax;
pub use error::ConstrainError;
pub use matcher::{GrammarDraft, RejectedToken, TokenMask, ToolCallMatcher};
pub use pattern::FORMATS as ENFORCED_FORMATS;
pub use schema::{SchemaOptions, MAX_DEPTH, MAX_PROPERTIES};
pub use tools::{tools_hash, CompiledTools, ResponseSchema, ToolDef, ToolSetCache, MAX_NAME_LEN};
pub use value::ValueSchema;
pub use vocab::{Vocabulary, SPECIAL_TOKEN_MARKER};
