#!/usr/bin/env bash
# Builds every target (gateway, tools, tests, benchmarks) with clang++-14 against libstdc++ into
# build-clang/, at -O0 and without debug information: the point is that every translation unit
# compiles and links with a second compiler, not a fast binary, so nothing here is run. The
# fuzz build (scripts/fuzz.sh) cannot share this tree: its objects carry -fsanitize=fuzzer-no-link
# coverage and ASan. Works on a fresh Debian 12 as root; .ci/run runs it.
#   usage: scripts/clang.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
tollgate_packages+=(clang-14)
install_deps
CXX=clang++-14 cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-O0" >/dev/null
# -k 0: every translation unit that fails is reported, not only the first.
cmake --build build-clang -j "$(nproc)" -- -k 0
