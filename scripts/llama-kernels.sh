#!/usr/bin/env bash
# The CMake flags llama.cpp is built with, by kernel set; sourced by install-llama.sh and build_llama_tools.sh.
# SPECVIZ_LLAMA_KERNELS picks the set (CMAKE_ARGS, when set, is used as given instead):
#   avx2 (the default)  AVX2/FMA/F16C kernels: one build that runs on every x86-64 CPU of the last decade.
#   native              the building CPU's own kernels (AVX-512, VNNI and, on a Xeon with AMX, ggml's AMX products),
#                       optimised at -O2. At -O3 GCC 12 drops the stores that fill the AMX tile configuration (its
#                       _tile_loadconfig intrinsic declares a read of 8 bytes, not 64), so LDTILECFG faults on the
#                       first product of more than one row; at -O2 the stores stay. Run only on the CPU it was built on.
llama_cmake_args() {
    if [ -n "${CMAKE_ARGS:-}" ]; then
        printf '%s' "$CMAKE_ARGS"
        return
    fi
    case "${SPECVIZ_LLAMA_KERNELS:-avx2}" in
        avx2) printf '%s' "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" ;;
        native)
            local at_o2="-DCMAKE_C_FLAGS_RELEASE=-O2 -DCMAKE_CXX_FLAGS_RELEASE=-O2"
            printf '%s' "-DGGML_NATIVE=ON $at_o2 -DCMAKE_C_FLAGS=-DNDEBUG -DCMAKE_CXX_FLAGS=-DNDEBUG"
            ;;
        *) echo "error: SPECVIZ_LLAMA_KERNELS is avx2 or native, not '$SPECVIZ_LLAMA_KERNELS'" >&2; return 2 ;;
    esac
}
