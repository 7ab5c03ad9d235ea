#!/usr/bin/env bash
# A virtualenv outside the repo with the official `openai` and `anthropic` Python clients and
# `jsonschema` (the client tests, crates/tessera/tests/openai_client.rs and sdk_clients.rs, and the
# load test, scripts/load_test.py), and `pyzmq` and `msgpack` (the KV-event subscriber,
# scripts/kv_events_check.py).
# Prints the interpreter's path. Reuses the venv when it already has both packages.
set -euo pipefail
venv="${TESSERA_OPENAI_VENV:-$HOME/.cache/tessera/openai-venv}"
if ! "$venv/bin/python" -c "import openai, anthropic, jsonschema, zmq, msgpack" 2>/dev/null; then
    # Parallel test binaries may call this together: one makes the venv, the others wait.
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    flock 9
    if ! "$venv/bin/python" -c "import openai, anthropic, jsonschema, zmq, msgpack" 2>/dev/null; then
        echo "setup-openai-client: making $venv (openai, anthropic, jsonschema, pyzmq, msgpack from PyPI)" >&2
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet --disable-pip-version-check "openai>=1.99,<4" "anthropic>=0.60,<3" "jsonschema>=4" "pyzmq>=26" "msgpack>=1.0" >&2
    fi
fi
echo "$venv/bin/python"
