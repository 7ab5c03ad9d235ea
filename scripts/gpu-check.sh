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
# The model file (98 MB) is split in two parts of < 64 MiB; `prepare` prints the
# two device calls to make (the first leaves part 1 in /tmp on the machine,
# which stays warm for 30 s between calls).
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

STAGE=.gpu
CACHE=${TESSERA_CACHE:-$HOME/.cache/tessera}
VENV=${TESSERA_CUDA_VENV:-$CACHE/cuda13.0-venv}
MODEL=${TESSERA_MODEL:-${TESSERA_MODELS_DIR:-models}/SmolLM2-135M-Instruct.Q4_1.gguf}

prepare() {
    [ -f "$MODEL" ] || scripts/fetch-model.sh
    if [ ! -x "$VENV/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc" ]; then
        python3 -m venv "$VENV"
        # Every piece pinned to 13.0: a newer nvvm writes PTX the 13.0 driver refuses.
        "$VENV/bin/pip" install -q 'nvidia-cuda-nvcc==13.0.88' 'nvidia-cuda-crt==13.0.88' \
            'nvidia-nvvm==13.0.88' 'nvidia-cuda-cccl==13.0.85' 'nvidia-cuda-runtime==13.0.96'
    fi
    local cuda
    cuda=$(echo "$VENV"/lib/python3*/site-packages/nvidia/cu13)
    python3 scripts/cuda-link-stubs.py "$cuda/lib/stubs"
    CUDA_ROOT="$cuda" CUDA_PATH="$cuda" PATH="$cuda/bin:$PATH" \
        CUDARC_CUDA_VERSION=13000 CUDA_COMPUTE_CAP=90 TESSERA_CUDA_ARCH=compute_90 \
        CARGO_TARGET_DIR="$CACHE/target-cuda" CARGO_PROFILE_RELEASE_DEBUG=false \
        CARGO_PROFILE_RELEASE_STRIP=true \
        cargo build --release -p tessera --features cuda
    mkdir -p "$STAGE"
    grep -qx "/$STAGE/" .git/info/exclude 2>/dev/null || echo "/$STAGE/" >> .git/info/exclude
    cp "$CACHE/target-cuda/release/tessera" "$STAGE/tessera"
    rm -f "$STAGE"/model.part-*
    split -n 2 -d "$MODEL" "$STAGE/model.part-"
    ls -l "$STAGE"
    cat <<HELP
Staged. On a lent GPU, two device-tool calls (carry ".gpu" in both; move the part not sent aside):
  1. with only .gpu/model.part-00 there:  mkdir -p /tmp/tessera-gpu && cp .gpu/model.part-00 /tmp/tessera-gpu/
  2. with .gpu/tessera and .gpu/model.part-01:  bash scripts/gpu-check.sh run
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
    local out=${OUT:-/tmp/tessera-gpu-out} model=/tmp/tessera-gpu/model.gguf
    mkdir -p "$out" /tmp/tessera-gpu
    if [ ! -f "$model" ]; then
        [ -f /tmp/tessera-gpu/model.part-00 ] || { echo "model part 00 missing: make call 1 first" >&2; exit 2; }
        cat /tmp/tessera-gpu/model.part-00 "$STAGE/model.part-01" > "$model"
    fi
    export LD_LIBRARY_PATH="$(cuda_libraries):/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
    local tessera="$STAGE/tessera"
    chmod +x "$tessera"
    { nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; "$tessera" --version; } \
        2>&1 | tee "$out/device.txt"
    set +e
    "$tessera" check-device --device cuda --model "$model" --json "$out/check-device.json" 2>&1 \
        | tee "$out/check-device.txt"
    local check=${PIPESTATUS[0]}
    local prompt
    prompt=$(python3 -c 'print(" ".join(["The quick brown fox jumps over the lazy dog."] * 50))')
    for device in cuda cpu; do
        "$tessera" generate --device "$device" --model "$model" -p "$prompt" --max-tokens 128 \
            --ignore-eos --json > /dev/null 2> "$out/generate-$device.json"
        echo "generate on $device: $(tail -1 "$out/generate-$device.json")" | tee -a "$out/speed.txt"
    done
    "$tessera" bench ttft --device cuda --model "$model" --quick --json "$out/ttft-cuda.json" 2>&1 \
        | tee "$out/ttft-cuda.txt"
    echo "check-device exit status: $check" | tee -a "$out/device.txt"
    return "$check"
}

case "${1:-}" in
    prepare) prepare ;;
    run) run ;;
    *) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
