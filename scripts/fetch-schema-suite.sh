#!/usr/bin/env bash
# Fetch the official JSON Schema Test Suite (draft 2020-12) into the model cache.
#
#   scripts/fetch-schema-suite.sh          prints the folder holding draft2020-12/*.json
#
# The suite ships inside the PyPI sdist of `jsonschema` 4.26.0 (json/tests/); like the models it
# is downloaded with pip, verified by SHA-256 and never committed. Idempotent: a verified copy is
# left alone. Concurrent calls (parallel test binaries) wait for each other on a lock.
#
# Environment:
#   TESSERA_MODELS_DIR   where it lands (default: <repo>/models), as
#                        json-schema-test-suite-4.26.0/{draft2020-12/,VERIFIED}
#   TESSERA_PIP_CACHE    where the sdist is downloaded (default: $HOME/.cache/tessera/pip)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
models_dir="${TESSERA_MODELS_DIR:-$repo_root/models}"
pip_root="${TESSERA_PIP_CACHE:-$HOME/.cache/tessera/pip}"

version="4.26.0"
sha="0c26707e2efad8aa1bfc5b7ce170f3fccc2e4918ff85989ba9ffa9facb2be326"
target="$models_dir/json-schema-test-suite-$version"

say() { echo "fetch-schema-suite: $*" >&2; }
die() { echo "fetch-schema-suite: error: $*" >&2; exit 1; }

mkdir -p "$models_dir"
exec 9>"$models_dir/.fetch-schema-suite.lock"
if ! flock -n 9; then
    say "another fetch is running in $models_dir; waiting for it"
    flock 9
fi

if [[ -f "$target/VERIFIED" && "$(cat "$target/VERIFIED")" == "$sha" && -d "$target/draft2020-12" ]]; then
    say "$target is present and verified"
    echo "$target"
    exit 0
fi

if command -v pip3 >/dev/null 2>&1; then pip=(pip3)
elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then pip=(python3 -m pip)
else die "pip is not installed; install Python 3 with pip (e.g. 'apt-get install python3-pip') and re-run"
fi

download="$pip_root/jsonschema-sdist"
mkdir -p "$download"
sdist="$download/jsonschema-$version.tar.gz"
if [[ ! -f "$sdist" ]]; then
    say "downloading the jsonschema $version sdist (0.4 MB) from PyPI"
    "${pip[@]}" download --no-deps --no-binary :all: --disable-pip-version-check --progress-bar off \
        --dest "$download" "jsonschema==$version" >&2 || die "pip could not download jsonschema==$version"
fi
got="$(sha256sum "$sdist" | cut -d' ' -f1)"
[[ "$got" == "$sha" ]] || { rm -f "$sdist"; die "SHA-256 mismatch for $sdist: expected $sha, got $got (deleted; rerun)"; }

tmp="$(mktemp -d "$models_dir/.schema-suite.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$sdist" -C "$tmp" "jsonschema-$version/json/tests/draft2020-12" \
    || die "$sdist has no json/tests/draft2020-12"
rm -rf "$target"
mkdir -p "$target"
mv "$tmp/jsonschema-$version/json/tests/draft2020-12" "$target/draft2020-12"
echo "$sha" > "$target/VERIFIED"
say "$target ready ($(ls "$target/draft2020-12" | wc -l) entries)"
echo "$target"
