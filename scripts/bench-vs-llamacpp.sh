#!/usr/bin/env bash
# Tessera vs llama.cpp on the same GGUF, same machine, one run: prefill tok/s
# at each PREFILL_TOKENS size, decode tok/s (DECODE_TOKENS tokens) at a short
# context and at DECODE_CONTEXT tokens, both engines on THREADS threads, RUNS
# alternating runs each, medians and ratios; then decode as a fraction of the
# bandwidth limit (memory read bandwidth from `tessera bench memory`, measured
# in every run, over the bytes of weights a token reads).
#
# llama.cpp comes from PyPI `llama-cpp-python`, compiled once into a cache
# folder outside the repo ($TESSERA_CACHE/llama-cpp-python) for this CPU
# (AVX2/FMA/F16C as present; AMX and native tuning off: -march=native AMX code
# dies with SIGILL in some VMs).
#
# Environment: THREADS (2), RUNS (5), PREFILL_TOKENS (512,2048), DECODE_TOKENS (128), DECODE_CONTEXT (2048),
#   TESSERA_CACHE ($HOME/.cache/tessera), MODEL (models/SmolLM2-135M-Instruct.Q4_1.gguf)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/llamacpp-env.sh
source "$repo_root/scripts/llamacpp-env.sh"
export THREADS="${THREADS:-2}" RUNS="${RUNS:-5}" PREFILL_TOKENS="${PREFILL_TOKENS:-512,2048}"
export DECODE_TOKENS="${DECODE_TOKENS:-128}" DECODE_CONTEXT="${DECODE_CONTEXT:-2048}"
export MODEL="${MODEL:-$repo_root/models/SmolLM2-135M-Instruct.Q4_1.gguf}"

[[ -f "$MODEL" ]] || "$repo_root/scripts/fetch-model.sh"
install_llama_cpp
if [[ "${1:-}" == "--install-only" ]]; then exit 0; fi

echo "bench: building tessera (release)" >&2
(cd "$repo_root" && cargo build --release --quiet -p tessera)
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}"
export TESSERA_BIN="$target_dir/release/tessera"
PYTHONPATH="$llama_dir" python3 "$repo_root/scripts/bench_vs_llamacpp.py"
