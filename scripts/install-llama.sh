#!/usr/bin/env bash
# Build and install llama-cpp-python (requirements-llama.txt), the llama.cpp runtime, from its source distribution.
# AVX2 kernels (-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON) run on every x86-64 CPU of the last
# decade; a native build compiles the CPU's own kernels instead, which on an AMX Xeon include AMX kernels that crash
# at the first decode (docs/benchmarks.md, "Which llama.cpp build"). CMAKE_ARGS, when set, is used as given.
set -euo pipefail
cd "$(dirname "$0")/.."
pin=$(grep '^llama-cpp-python==' requirements-llama.txt | cut -d= -f3)
if python -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$pin')" 2>/dev/null; then
    exit 0
fi
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}"
# no wheel cache: a wheel built before with other CMAKE_ARGS would be reused as it is
python -m pip install -q --no-cache-dir -r requirements-llama.txt
