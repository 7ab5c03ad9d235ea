#!/usr/bin/env bash
# Tessera's agent task suite (issue 19 item 5): 13 small offline tasks (reading, writing, editing a
# line, finding which file mentions something, counting rows, following links in local HTML, a shell
# task with --allow-shell, a distractor, ...), each in a fresh workspace through `tessera agent`,
# checked strictly (the right file, the exact content, nothing else touched). Prints pass/fail,
# agent steps, cache hit rate from turn 2 and seconds per task, then a summary line.
#   scripts/agent-eval.sh [--model M] [--tasks a,b] [--max-steps N] [--json report.json] [--keep]
# M: smollm2 (default), qwen2.5-coder-1.5b, or a .gguf path. Exit status 0 when the suite ran
# (whatever the model passed); non-zero when the harness or the binary broke.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -p tessera >&2
binary="${CARGO_TARGET_DIR:-target}/release/tessera"
exec python3 scripts/agent_eval.py --binary "$binary" "$@"
