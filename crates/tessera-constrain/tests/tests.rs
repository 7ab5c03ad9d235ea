//! `tessera-constrain`'s integration tests, one binary.

// The automaton against hand-checked tables: values, envelopes, names, modes.
mod automaton;
// Calls a model writes without their opener (`auto` mode).
mod bare_calls;
// Budget-aware closing: random schemas never empty the mask.
mod budget;
// Nesting depth up to `MAX_DEPTH`, and refusals past it.
mod depth;
// Grammar fast-forward: the forced bytes, tokenized, with the tail held back.
mod forced;
// Drafts from the constraint: forced bytes, then a call's likely punctuation.
mod likely;
// Fuzzing: random schemas compile or are refused; any text is read without a panic.
mod fuzz;
// Overlapping `oneOf`: a value only where exactly one alternative accepts it.
mod one_of;
// The official JSON Schema Test Suite, draft 2020-12.
mod schema_suite;
