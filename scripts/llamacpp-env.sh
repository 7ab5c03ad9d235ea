# Sourced by the benchmark scripts: builds PyPI llama-cpp-python once into
# $TESSERA_CACHE/llama-cpp-python (outside the repo) for this CPU (AVX/AVX2/FMA/
# F16C/AVX-512 as present; native tuning and AMX off: -march=native AMX code
# dies with SIGILL in some VMs), and fetches the default model if missing.
cache="${TESSERA_CACHE:-$HOME/.cache/tessera}"
llama_dir="$cache/llama-cpp-python"
LLAMA_CPP_PYTHON_VERSION="0.3.36"

install_llama_cpp() {
    if PYTHONPATH="$llama_dir" python3 -c "import llama_cpp" 2>/dev/null; then
        return
    fi
    echo "bench: building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION into $llama_dir (once; ~20 minutes on 2 cores)" >&2
    local flags="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    local feature option
    for feature in avx avx2 fma f16c avx512f avx512_vnni avx512bw; do
        case "$feature" in
            avx512f) option=AVX512 ;;
            avx512bw) option=AVX512_BW ;;
            *) option="$(echo "$feature" | tr a-z A-Z)" ;;
        esac
        if grep -qw "$feature" /proc/cpuinfo; then flags="$flags -DGGML_$option=ON"; else flags="$flags -DGGML_$option=OFF"; fi
    done
    CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir \
        --target "$llama_dir" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >&2
}
