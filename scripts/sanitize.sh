#!/usr/bin/env bash
# AddressSanitizer and UBSan over the whole suite: configures build-asan/ (TOLLGATE_SANITIZE=ON),
# builds the tests and the processes they start, and runs every test. Works on a fresh Debian 12
# as root; .ci/run runs it after scripts/test.sh.
#   usage: scripts/sanitize.sh [ctest arguments, e.g. -R hostile]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
install_deps
cmake -S . -B build-asan -G Ninja -DTOLLGATE_SANITIZE=ON -DTOLLGATE_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-asan -j "$(nproc)"
# Any report ends the process with an error, so a finding fails the test that provoked it.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
cd build-asan
ctest --output-on-failure -j "$(nproc)" --timeout 600 "$@"
