#!/usr/bin/env bash
# Start `tessera serve` (release build) on a free port, run scripts/load_test.py against it
# (default: 32 concurrent streaming clients x 10 requests), stop the server with SIGTERM.
# Extra arguments go to load_test.py (e.g. --clients 8 --requests 2 --json out.json).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="$(scripts/setup-openai-client.sh)"
cargo build --release --quiet -p tessera
bin="${CARGO_TARGET_DIR:-target}/release/tessera"
port="${TESSERA_LOAD_PORT:-8181}"
log="$(mktemp)"
"$bin" serve --port "$port" 2>"$log" &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 600); do
    grep -q "serving" "$log" && break
    kill -0 $server 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.2
done
"$python" scripts/load_test.py "http://127.0.0.1:$port" "$@"
