#!/usr/bin/env bash
# Tessera replicas behind SMG (PyPI `smg` 1.13.0, installed outside the repo by scripts/setup-smg.sh),
# all on 127.0.0.1: K agents x T turns with their own long system prompts, then with one shared
# prompt, through cache_aware, round_robin and consistent_hashing (+ X-SMG-Routing-Key), against one
# replica alone. Prints hit rate from turn 2, median/p90 TTFT and requests per replica per setup,
# and whether issue 22's targets are met. See scripts/bench_cluster.py.
#
#   scripts/bench-cluster.sh [--replicas 3] [--agents 4] [--turns 5] [--threads 1] [--smg-args "..."]
#
# Environment: TESSERA_CLUSTER_JSON and TESSERA_CLUSTER_SVG (default: under $CARGO_TARGET_DIR),
# CARGO_TARGET_DIR and TESSERA_MODELS_DIR as for `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/fetch-model.sh smollm2 >&2
smg="$(scripts/setup-smg.sh)"
cargo build --release --quiet -p tessera
target="${CARGO_TARGET_DIR:-target}"
exec python3 scripts/bench_cluster.py --tessera "$target/release/tessera" --smg "$smg" \
    --json "${TESSERA_CLUSTER_JSON:-$target/bench-cluster.json}" --svg "${TESSERA_CLUSTER_SVG:-$target/bench-cluster.svg}" "$@"
