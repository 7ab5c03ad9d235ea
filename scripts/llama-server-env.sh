# Sourced by the benchmark scripts that run llama.cpp's own tools (llama-server, llama-bench,
# llama-batched-bench): builds them once from the llama.cpp tree that the PyPI sdist of
# llama-cpp-python vendors, for this CPU's ISA (native tuning and AMX off: -march=native AMX
# code dies with SIGILL in some VMs), into $TESSERA_CACHE/llama-server (outside the repo;
# ~20 minutes on 2 cores). After `install_llama_server`, $LLAMA_BIN holds the binaries; run
# them with LD_LIBRARY_PATH=$LLAMA_BIN.
cache="${TESSERA_CACHE:-$HOME/.cache/tessera}"
llama_server_dir="$cache/llama-server"
LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
LLAMA_BIN="$llama_server_dir/build/bin"

install_llama_server() {
    if [ -x "$LLAMA_BIN/llama-server" ] && [ -x "$LLAMA_BIN/llama-batched-bench" ]; then
        return
    fi
    echo "bench: building llama-server $LLAMA_CPP_PYTHON_VERSION's llama.cpp into $llama_server_dir (once; ~20 minutes on 2 cores)" >&2
    mkdir -p "$llama_server_dir"
    (
        set -euo pipefail
        cd "$llama_server_dir"
        local sdist="llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
        [ -f "$sdist" ] || python3 -m pip download --quiet --disable-pip-version-check --no-deps \
            --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d .
        if [ ! -d src ]; then
            mkdir -p src
            tar -xzf "$sdist" -C src --strip-components=3 "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
        fi
        [ -x venv/bin/cmake ] || { python3 -m venv venv && venv/bin/pip install --quiet cmake ninja; }
        export PATH="$llama_server_dir/venv/bin:$PATH"
        local flags="" pair
        for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI avx512f:AVX512 \
            avx512_vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
            if grep -qw "${pair%%:*}" /proc/cpuinfo; then flags="$flags -DGGML_${pair#*:}=ON"; else flags="$flags -DGGML_${pair#*:}=OFF"; fi
        done
        # shellcheck disable=SC2086 # $flags is a list of options
        cmake -S src -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF \
            -DGGML_BACKEND_DL=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_CUDA=OFF \
            -DGGML_METAL=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF \
            -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF $flags >cmake.log 2>&1 \
            || { tail -20 cmake.log >&2; exit 1; }
        cmake --build build -j"$(nproc)" --target llama-server llama-bench llama-batched-bench >build.log 2>&1 \
            || { tail -20 build.log >&2; exit 1; }
    )
}
