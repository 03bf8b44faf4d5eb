#!/usr/bin/env bash
# Build and install llama-cpp-python (requirements-llama.txt), the llama.cpp runtime, from its source distribution.
# The kernels are scripts/llama-kernels.sh's: AVX2 by default, which run on every x86-64 CPU of the last decade;
# SPECVIZ_LLAMA_KERNELS=native builds this CPU's own (docs/benchmarks.md, "Which llama.cpp build").
set -euo pipefail
cd "$(dirname "$0")/.."
pin=$(grep '^llama-cpp-python==' requirements-llama.txt | cut -d= -f3)
if python -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$pin')" 2>/dev/null; then
    exit 0
fi
. scripts/llama-kernels.sh
CMAKE_ARGS=$(llama_cmake_args)
export CMAKE_ARGS
# no wheel cache: a wheel built before with other CMAKE_ARGS would be reused as it is
python -m pip install -q --no-cache-dir -r requirements-llama.txt
