#!/usr/bin/env bash
# Build llama.cpp's own binaries (llama-bench, llama-completion, llama-speculative-simple, llama-server) from the source llama-cpp-python vendors, with the runtime's flags, for scripts/llama_race.py.
# The source is the pinned llama-cpp-python's source distribution (requirements-llama.txt), so the binaries and
# specviz's llama.cpp runtime compute with the same kernels; about 7 minutes on 2 cores. Usage:
#   bash scripts/build_llama_tools.sh [BUILD_DIR]   (default: ~/.cache/specviz/llama-tools; binaries in BUILD_DIR/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$HOME/.cache/specviz/llama-tools}"
pin=$(grep '^llama-cpp-python==' requirements-llama.txt | cut -d= -f3)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$pin" -d "$work"
tar -xzf "$work"/llama_cpp_python-"$pin".tar.gz -C "$work"
. scripts/llama-kernels.sh
flags=$(llama_cmake_args)
# shellcheck disable=SC2086
cmake -S "$work/llama_cpp_python-$pin/vendor/llama.cpp" -B "$out" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DBUILD_SHARED_LIBS=OFF $flags >/dev/null
cmake --build "$out" -j "$(nproc)" --target llama-bench llama-completion llama-speculative-simple llama-server >/dev/null
ls "$out/bin"
