#!/usr/bin/env bash
# Set-up, build and every test: what CI runs (.ci/run). Works on a fresh Debian 12 as root.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
install_deps
build_tollgate
cd build
# ctest prints its summary ("100% tests passed, 0 tests failed out of N") last.
ctest --output-on-failure -j "$(nproc)" --timeout 600
