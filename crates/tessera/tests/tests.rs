//! The `tessera` binary's tests, one binary: each module runs the CLI as a
//! user would (`CARGO_BIN_EXE_tessera`) on the real model, fetched on first use.

mod common;

// `tessera agent`, in process and against `tessera serve`.
mod cli_agent;
// `--chat` prompts never become control tokens; raw prompts keep them.
mod cli_control_tokens;
// Bad input to `tessera generate` and `check-device`: one clear line, a non-zero exit.
mod cli_errors;
// `--kv-cache-dir`: a second run reuses the saved prefix.
mod cli_kv_cache_dir;
// `--tools` and `--tool-choice`: one valid call, clear errors.
mod cli_tools;
// `tessera serve` driven by the official `openai` Python client.
mod openai_client;
// Its Messages and Responses routes driven by the official `anthropic` and `openai` clients.
mod sdk_clients;
// Two `tessera serve` replicas behind SMG (PyPI `smg`), driven by the same client.
mod smg;
// `--kv-events`: a pyzmq subscriber rebuilds the index from vLLM-format events.
mod kv_events;
