#!/usr/bin/env bash
# Decode speed, Tessera vs llama.cpp's own server, same GGUF, same machine, one run.
# Runs `tessera bench decode` (one stream, 1-16 streams at once, agent turns that write files
# they read; with speculation and without), which also writes every request's token ids; then
# replays exactly those requests on `llama-server -np N` (plain, and with its n-gram
# speculation `--spec-type ngram-simple` where the build has it) and prints both side by side.
#
# Environment: MODEL (a shipped name or a GGUF path; default qwen2.5-coder-1.5b), THREADS (2),
#   QUICK (1 = --quick; default 0), OUT (a folder for the JSON files and the plot; default a
#   temporary one), TESSERA_CACHE (where llama-server is built, once, ~20 minutes).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/llama-server-env.sh
source "$repo_root/scripts/llama-server-env.sh"
export THREADS="${THREADS:-2}"
MODEL="${MODEL:-qwen2.5-coder-1.5b}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"

case "$MODEL" in
    qwen2.5-coder-1.5b) file="Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf" ;;
    qwen2.5-coder-0.5b) file="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf" ;;
    smollm2) file="SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    *) file="" ;;
esac
if [[ -n "$file" ]]; then
    gguf="${TESSERA_MODELS_DIR:-$repo_root/models}/$file"
    [[ -f "$gguf" ]] || "$repo_root/scripts/fetch-model.sh" "$MODEL"
else
    gguf="$MODEL"
fi
[[ -f "$gguf" ]] || { echo "bench: no model file at $gguf" >&2; exit 1; }

install_llama_server
echo "bench: building tessera (release)" >&2
(cd "$repo_root" && cargo build --release --quiet -p tessera)
tessera="${CARGO_TARGET_DIR:-$repo_root/target}/release/tessera"
quick=()
[[ "${QUICK:-0}" == "1" ]] && quick=(--quick)
"$tessera" --threads "$THREADS" bench decode --model "$gguf" "${quick[@]}" \
    --json "$out/tessera-decode.json" --plot "$out/tessera-decode.svg" --prompts "$out/requests.json"
python3 "$repo_root/scripts/bench_decode_vs_llamacpp.py" \
    --llama-bin "$LLAMA_BIN" --model "$gguf" --threads "$THREADS" \
    --requests "$out/requests.json" --tessera "$out/tessera-decode.json" --json "$out/llama-server-decode.json"
echo "bench: JSON and plot in $out" >&2
