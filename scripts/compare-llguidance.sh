#!/usr/bin/env bash
# Issue 18 item 5: llguidance (crates.io 1.9.1) against Tessera's own automaton on SmolLM2's
# vocabulary: the JSON Schema Test Suite (draft 2020-12) through both, and every step's mask time
# along one tool call's arguments. tools/llg-compare is its own package (not a workspace member), so
# CI never builds llguidance. LLG_COMPARE_STEPS=1 prints each step's times.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
models="${TESSERA_MODELS_DIR:-$PWD/models}"
scripts/fetch-model.sh smollm2 >&2
suite="$(scripts/fetch-schema-suite.sh | tail -n 1)"
cargo build --release --manifest-path tools/llg-compare/Cargo.toml >&2
target="${CARGO_TARGET_DIR:-tools/llg-compare/target}"
"$target/release/llg-compare" "$models/SmolLM2-135M-Instruct.Q4_1.gguf" "$suite/draft2020-12"
