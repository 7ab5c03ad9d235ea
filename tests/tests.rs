//! Tessera's cross-crate tests, one binary: the model loads once per run and
//! the binary links once. Each module is one subject, named for what it
//! checks; most run a real model, fetched on first use by `tessera-fixtures`
//! (a missing model fails loudly, never skips). `common` holds the loaders,
//! references and tiny models they share.

mod common;

// Structure: the dependency rules of ARCHITECTURE.md.
mod architecture;
// Inside the crowded crates: module floors from the sources' imports.
mod module_floors;

// The model against references: candle's kernels and models, llama.cpp's ids and text.
mod greedy_text;
mod kernels_vs_candle;
mod quant_types;
mod qwen;
mod reference_logits;
mod safetensors_tiny;
mod tokenizer;

// The paged KV cache: chunking, batching, block placement, prefix reuse, persistence.
mod kv_persistence;
mod paged_equivalence;
mod prefix_reuse;

// The engine: concurrency, preemption, cancellation, sessions, errors, and a random stress.
mod engine;
mod engine_stress;
// Speculative decoding (prompt lookup, grammar fast-forward) changes no token.
mod speculation;

// Constrained decoding: masks against brute force, valid calls in every mode.
mod constrain_masks;
// Outside text never becomes control tokens.
mod control_tokens;
mod tool_calls;

// The server: handlers, errors, streaming, and a real socket; Messages and Responses beside chat.
mod server_api;
mod server_protocols;
mod server_socket;
// Behind a router: the load report, the routing key as a session, gateway forms of tool_choice.
mod cluster;

// Fuzzing the parsers of outside bytes: GGUF, the persisted cache, requests.
mod fuzz;

// The agent in process on example tasks.
mod agent;

// The device path (candle's CPU backend standing in for a GPU) against the CPU path.
mod device_path;
