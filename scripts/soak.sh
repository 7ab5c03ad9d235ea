#!/usr/bin/env bash
# Soak `tessera serve` (issue 21): a mix of plain and streamed chat and completion requests with
# tools in every tool_choice mode, client disconnects, 429 pressure and a SIGTERM/restart on a
# persisted prefix cache half-way; at the end the KV pool must be back at baseline, RSS grown by no
# more than the pool's size, every finished request complete, and the restored cache must serve
# hits. See scripts/soak.py (the workload) and scripts/soak_checks.py (the checks).
#
#   scripts/soak.sh [minutes]      default 30; CI runs 2
#
# Environment: TESSERA_SOAK_PORT (default 8191), TESSERA_SOAK_JSON (write the summary there),
# CARGO_TARGET_DIR and TESSERA_MODELS_DIR as for `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

minutes="${1:-30}"
[[ "$minutes" =~ ^[0-9]+$ && "$minutes" -gt 0 ]] || { echo "soak.sh: minutes must be a positive integer, got '$minutes'" >&2; exit 2; }
scripts/fetch-model.sh smollm2 >&2
cargo build --release --quiet -p tessera
bin="${CARGO_TARGET_DIR:-target}/release/tessera"
json=()
[[ -n "${TESSERA_SOAK_JSON:-}" ]] && json=(--json "$TESSERA_SOAK_JSON")
exec python3 scripts/soak.py --bin "$bin" --port "${TESSERA_SOAK_PORT:-8191}" --minutes "$minutes" "${json[@]}"
