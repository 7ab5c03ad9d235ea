#!/usr/bin/env bash
# Tessera's device checks on a lent NVIDIA GPU (issue 8), in two steps:
#
#   scripts/gpu-check.sh prepare   # here, no GPU needed: build `tessera --features cuda`, stage .gpu/
#   scripts/gpu-check.sh run       # on the GPU machine (the `device` tool), with .gpu carried:
#                                  # checks and figures into $OUT
#
# Why two steps: the GPU machine has CUDA 13.0 (nvcc, driver 580, pip's CUDA
# libraries) but no Rust toolchain, and a call carries at most 64 MiB. So the
# binary is built here against CUDA 13.0 (nvcc and headers from PyPI; link-time
# stubs of the driver and CUDA libraries from scripts/cuda-link-stubs.py, the real
# ones are found on the GPU machine at run time), PTX for sm_90 (H100/H200).
# A call carries at most 64 MiB, the model file is 98 MB: `prepare` stages two
# folders, .gpu-1 (the model's first half) and .gpu-2 (the xz-compressed binary,
# the second half, the model's sha256), checks each fits, and prints the two
# device-tool calls to make back to back (the machine stays warm 30 s between
# calls and keeps /tmp):
#   1. carry [".gpu-1"]: mkdir -p /tmp/tessera-gpu && cp .gpu-1/model.part-00 /tmp/tessera-gpu/
#   2. carry [".gpu-2"]: bash scripts/gpu-check.sh run
#
# run does, in order (each step's output lands in $OUT):
#   1. nvidia-smi, the binary's version;
#   2. tessera check-device --device cuda: the CUDA kernels against the CPU contract on random odd
#      shapes (f32/f16/bf16 K/V, relative error per case), the real model's logits on the GPU against
#      Tessera's CPU path (every position of a 400-token prompt) and 32 greedy tokens;
#   3. tessera generate --device cuda: prefill and decode tokens/s (512-token prompt, 128 tokens);
#   4. tessera bench ttft --device cuda --quick: TTFT with and without prefix reuse.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${TESSERA_CACHE:-$HOME/.cache/tessera}
VENV=${TESSERA_CUDA_VENV:-$CACHE/cuda13.0-venv}
MODEL=${TESSERA_MODEL:-${TESSERA_MODELS_DIR:-models}/SmolLM2-135M-Instruct.Q4_1.gguf}
LIMIT_MIB=62

prepare() {
    [ -f "$MODEL" ] || scripts/fetch-model.sh
    local cuda
    cuda=$(echo "$VENV"/lib/python3*/site-packages/nvidia/cu13)
    if [ ! -x "$cuda/bin/nvcc" ]; then
        python3 -m venv "$VENV"
        # Every piece pinned to 13.0 (the GPU machine's driver is CUDA 13.0): a newer nvvm
        # writes PTX that driver refuses.
        "$VENV/bin/pip" install -q 'nvidia-cuda-nvcc==13.0.88' 'nvidia-cuda-crt==13.0.88' \
            'nvidia-nvvm==13.0.88' 'nvidia-cuda-cccl==13.0.85' 'nvidia-cuda-runtime==13.0.96'
        cuda=$(echo "$VENV"/lib/python3*/site-packages/nvidia/cu13)
    fi
    python3 scripts/cuda-link-stubs.py "$cuda/lib/stubs"
    # candle-kernels' static MoE kernels also link the CUDA runtime: pip ships the real one
    # (libcudart.so.13, the SONAME the GPU machine's pip package provides) without the dev link.
    ln -sf "$cuda/lib/libcudart.so.13" "$cuda/lib/stubs/libcudart.so"
    CUDA_ROOT="$cuda" CUDA_PATH="$cuda" PATH="$cuda/bin:$PATH" \
        CUDARC_CUDA_VERSION=13000 CUDA_COMPUTE_CAP=90 TESSERA_CUDA_ARCH=compute_90 \
        CARGO_TARGET_DIR="$CACHE/target-cuda" CARGO_PROFILE_RELEASE_DEBUG=false \
        CARGO_PROFILE_RELEASE_STRIP=true \
        cargo build --release -p tessera --features cuda
    rm -rf .gpu-1 .gpu-2
    mkdir -p .gpu-1 .gpu-2
    for dir in .gpu-1 .gpu-2; do
        grep -qx "/$dir/" .git/info/exclude 2>/dev/null || echo "/$dir/" >> .git/info/exclude
    done
    xz -T2 -6 -c "$CACHE/target-cuda/release/tessera" > .gpu-2/tessera.xz
    split -n 2 -d "$MODEL" /tmp/tessera-model.part-
    mv /tmp/tessera-model.part-00 .gpu-1/model.part-00
    mv /tmp/tessera-model.part-01 .gpu-2/model.part-01
    sha256sum "$MODEL" | cut -d' ' -f1 > .gpu-2/model.sha256
    local tracked
    tracked=$(git ls-files -z | du -c --files0-from=- -B1 | tail -1 | cut -f1)
    for dir in .gpu-1 .gpu-2; do
        local bytes=$(( $(du -sb "$dir" | cut -f1) + tracked ))
        echo "$dir with the tracked tree: $(( bytes / 1048576 )) MiB"
        [ "$bytes" -le $(( LIMIT_MIB * 1048576 )) ] || { echo "$dir is over $LIMIT_MIB MiB" >&2; exit 1; }
    done
    cat <<HELP
Staged. On a lent GPU, two device-tool calls, back to back:
  1. carry [".gpu-1"]:  mkdir -p /tmp/tessera-gpu && cp .gpu-1/model.part-00 /tmp/tessera-gpu/
  2. carry [".gpu-2"]:  bash scripts/gpu-check.sh run
HELP
}

cuda_libraries() {
    # pip's CUDA 13 libraries (cuBLAS, cuRAND, NVRTC, the runtime) live under site-packages/nvidia.
    python3 - <<'PY'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
dirs = sorted({os.path.dirname(p) for r in roots for p in glob.glob(os.path.join(r, "**", "lib*.so*"), recursive=True)})
print(":".join(dirs))
PY
}

run() {
    # DEVICE=candle-cpu dry-runs the whole flow on a machine without a GPU (slow; with the
    # link stubs named by SONAME on LD_LIBRARY_PATH, since no driver is there).
    local device=${DEVICE:-cuda} out=${OUT:-/tmp/tessera-gpu-out} work=/tmp/tessera-gpu
    local model=$work/model.gguf tessera=$work/tessera
    mkdir -p "$out" "$work"
    if [ ! -f "$model" ] || [ "$(sha256sum "$model" | cut -d' ' -f1)" != "$(cat .gpu-2/model.sha256)" ]; then
        [ -f "$work/model.part-00" ] || { echo "model part 00 missing in $work: make call 1 first" >&2; exit 2; }
        cat "$work/model.part-00" .gpu-2/model.part-01 > "$model"
        [ "$(sha256sum "$model" | cut -d' ' -f1)" = "$(cat .gpu-2/model.sha256)" ] \
            || { echo "the reassembled model's sha256 does not match" >&2; exit 2; }
    fi
    xz -d -c .gpu-2/tessera.xz > "$tessera" 2>/dev/null \
        || python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            .gpu-2/tessera.xz "$tessera"
    chmod +x "$tessera"
    LD_LIBRARY_PATH="$(cuda_libraries):/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
    export LD_LIBRARY_PATH
    { nvidia-smi -L && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv \
        || echo "nvidia-smi: not available"; "$tessera" --version; } 2>&1 | tee "$out/device.txt"
    set +e
    "$tessera" check-device --device "$device" --model "$model" --json "$out/check-device.json" 2>&1 \
        | tee "$out/check-device.txt"
    local check=${PIPESTATUS[0]}
    local prompt
    prompt=$(python3 -c 'print(" ".join(["The quick brown fox jumps over the lazy dog."] * 50))')
    for on in "$device" cpu; do
        "$tessera" generate --device "$on" --model "$model" -p "$prompt" --max-tokens 128 \
            --ignore-eos --json-stats > /dev/null 2> "$out/generate-$on.json"
        echo "generate on $on: $(tail -1 "$out/generate-$on.json")" | tee -a "$out/speed.txt"
    done
    "$tessera" bench ttft --device "$device" --model "$model" --quick --json "$out/ttft-$device.json" 2>&1 \
        | tee "$out/ttft-$device.txt"
    echo "check-device exit status: $check" | tee -a "$out/device.txt"
    return "$check"
}

case "${1:-}" in
    prepare) prepare ;;
    run) run ;;
    *) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
