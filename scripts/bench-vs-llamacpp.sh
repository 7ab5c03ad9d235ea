#!/usr/bin/env bash
# Tessera vs llama.cpp on the same GGUF, same machine, one run: prefill tok/s
# (a PROMPT_TOKENS-token prompt) and decode tok/s (DECODE_TOKENS tokens), both
# engines on THREADS threads, RUNS alternating runs each, medians and ratios.
#
# llama.cpp comes from PyPI `llama-cpp-python`, compiled once into a cache
# folder outside the repo ($TESSERA_CACHE/llama-cpp-python) for this CPU
# (AVX2/FMA/F16C as present; AMX and native tuning off: -march=native AMX code
# dies with SIGILL in some VMs).
#
# Environment: THREADS (2), RUNS (5), PROMPT_TOKENS (512), DECODE_TOKENS (128),
#   TESSERA_CACHE ($HOME/.cache/tessera), MODEL (models/SmolLM2-135M-Instruct.Q4_1.gguf)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/llamacpp-env.sh
source "$repo_root/scripts/llamacpp-env.sh"
export THREADS="${THREADS:-2}" RUNS="${RUNS:-5}" PROMPT_TOKENS="${PROMPT_TOKENS:-512}" DECODE_TOKENS="${DECODE_TOKENS:-128}"
export MODEL="${MODEL:-$repo_root/models/SmolLM2-135M-Instruct.Q4_1.gguf}"

[[ -f "$MODEL" ]] || "$repo_root/scripts/fetch-model.sh"
install_llama_cpp
if [[ "${1:-}" == "--install-only" ]]; then exit 0; fi

echo "bench: building tessera (release)" >&2
(cd "$repo_root" && cargo build --release --quiet -p tessera)
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}"
export TESSERA_BIN="$target_dir/release/tessera"
PYTHONPATH="$llama_dir" python3 "$repo_root/scripts/bench_vs_llamacpp.py"
