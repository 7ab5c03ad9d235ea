#!/usr/bin/env bash
# Real agent harnesses on `tessera serve`, offline (issue 33): Pi over Chat Completions, Responses and
# Messages, Claude Code (print mode, ANTHROPIC_BASE_URL), Codex CLI (exec, a custom provider on the
# Responses wire) and the OpenAI Agents SDK, each installed outside the repo (npm / a venv under
# ${TESSERA_HARNESS_DIR:-~/.cache/tessera/harness}, pinned versions) and run on a few tasks of the agent
# suite in fresh workspaces, with `tessera agent` as a row of its own. Per task: pass/fail, turns, hit
# rate from turn 2, replies reused, first- and later-turn TTFT, protocol errors; the first task of each
# harness is cold, the second warm, the third warm after a server restart on a persisted cache.
#   scripts/harness-check.sh [--model M] [--harnesses pi-chat,pi-responses,pi-anthropic,claude-code,codex,agents-sdk,tessera-agent]
#                            [--tasks read-write,write-new,find-mention] [--timeout S] [--max-turns 12] [--json report.json] [--markdown table.md]
# A harness asking for more than --max-turns model requests on one task is stopped there (the task fails),
# as `tessera agent --max-steps` stops its own loop; --timeout (seconds per task, default 3600) likewise.
# M: qwen2.5-coder-1.5b (default), a shipped model's name or a .gguf. Needs node/npm for the first three.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -p tessera >&2
binary="${CARGO_TARGET_DIR:-target}/release/tessera"
# This checkout's models, whichever checkout the (possibly shared) target folder's binary was built from.
export TESSERA_MODELS_DIR="${TESSERA_MODELS_DIR:-$PWD/models}"
model="qwen2.5-coder-1.5b"
for ((i = 1; i <= $#; i++)); do
    [[ "${!i}" == "--model" ]] && { j=$((i + 1)); model="${!j}"; }
done
[[ -f "$model" ]] || scripts/fetch-model.sh "$model" >&2
exec python3 scripts/harness_check.py --binary "$binary" "$@"
