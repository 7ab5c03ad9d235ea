#!/usr/bin/env bash
# TTFT with prefix reuse, Tessera vs llama.cpp, same workloads, one run.
# Runs `tessera bench ttft` (which also writes every request's token ids), then
# replays exactly those requests on llama.cpp (llama-cpp-python, whose single
# context reuses the longest common prefix with the previous request) and
# prints both engines' TTFTs side by side with ratios.
#
# Environment: THREADS (2), QUICK (1 = --quick, the default; 0 = full run),
#   OUT (a folder for the JSON files; default a temporary one), TESSERA_CACHE.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/llamacpp-env.sh
source "$repo_root/scripts/llamacpp-env.sh"
export THREADS="${THREADS:-2}"
export MODEL="${MODEL:-$repo_root/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"

[[ -f "$MODEL" ]] || "$repo_root/scripts/fetch-model.sh"
install_llama_cpp
echo "bench: building tessera (release)" >&2
(cd "$repo_root" && cargo build --release --quiet -p tessera)
tessera="${CARGO_TARGET_DIR:-$repo_root/target}/release/tessera"
quick=()
[[ "${QUICK:-1}" == "1" ]] && quick=(--quick)
"$tessera" --threads "$THREADS" bench ttft --model "$MODEL" "${quick[@]}" \
    --json "$out/tessera-ttft.json" --plot "$out/tessera-ttft.svg" --prompts "$out/requests.json"
PYTHONPATH="$llama_dir" python3 "$repo_root/scripts/bench_ttft_vs_llamacpp.py" "$out/requests.json"
echo "bench: JSON and plot in $out" >&2
