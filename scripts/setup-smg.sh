#!/usr/bin/env bash
# A virtualenv outside the repo with SMG, the Shepherd Model Gateway (PyPI `smg` 1.13.0, a Rust
# binary in a wheel), for the test that runs Tessera replicas behind it
# (crates/tessera/tests/smg.rs) and for scripts/bench-cluster.sh. Prints the `smg` binary's path.
# Reuses the venv when it already holds that version.
set -euo pipefail
version="1.13.0"
venv="${TESSERA_SMG_VENV:-$HOME/.cache/tessera/smg-venv}"
installed() { "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('smg') == '$version'" 2>/dev/null; }
if ! installed; then
    # Parallel test binaries may call this together: one makes the venv, the others wait.
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    flock 9
    if ! installed; then
        echo "setup-smg: making $venv (smg==$version from PyPI)" >&2
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet --disable-pip-version-check "smg==$version" >&2
    fi
fi
[[ -x "$venv/bin/smg" ]] || { echo "setup-smg: $venv/bin/smg is missing after the install" >&2; exit 1; }
echo "$venv/bin/smg"
