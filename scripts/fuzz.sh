#!/usr/bin/env bash
# Run the fuzz targets (tests/fuzz.rs: GGUF files, the persisted prefix cache,
# chat requests, the chat template with hostile text;
# crates/tessera-constrain/tests/fuzz.rs: schemas and the texts read against them) for a while, each round with fresh random seeds.
#
#   scripts/fuzz.sh [minutes]      default 10; CI runs one short round through `cargo test`
#
# Environment:
#   TESSERA_FUZZ_CASES   cases per target per round (default 2000)
#   CARGO_TARGET_DIR, TESSERA_MODELS_DIR   as for `cargo test`
#
# A failing case stops the run; proptest keeps it in tests/fuzz.proptest-regressions,
# (or crates/tessera-constrain/tests/fuzz.proptest-regressions), which `cargo test` reruns first
# from then on: commit it with the fix.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

minutes="${1:-10}"
[[ "$minutes" =~ ^[0-9]+$ && "$minutes" -gt 0 ]] || { echo "fuzz.sh: minutes must be a positive integer, got '$minutes'" >&2; exit 2; }
export TESSERA_FUZZ_CASES="${TESSERA_FUZZ_CASES:-2000}"

cargo test --release --test tests --no-run -p tessera-workspace -p tessera-constrain >/dev/null
log="$(mktemp -t tessera-fuzz.XXXXXX)"
deadline=$(( $(date +%s) + minutes * 60 ))
round=0
while (( $(date +%s) < deadline )); do
    round=$((round + 1))
    echo "fuzz.sh: round $round, $TESSERA_FUZZ_CASES cases per target"
    if ! cargo test --release -p tessera-workspace -p tessera-constrain --test tests -- fuzz:: >"$log" 2>&1; then
        grep -E "^test |panicked|minimal failing|assert" "$log" >&2 || tail -40 "$log" >&2
        echo "fuzz.sh: a case failed in round $round (full log: $log)" >&2
        exit 1
    fi
    grep -E "^test " "$log"
done
echo "fuzz.sh: $round rounds in $minutes minutes, no failure"
