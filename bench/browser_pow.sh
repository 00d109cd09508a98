#!/usr/bin/env bash
# How long a browser takes to pass the proof-of-work page: headless Chromium (Debian's
# `chromium`), 16- and 20-bit challenges, the page's hash rate and responsiveness.
# Usage: bash bench/browser_pow.sh [ROUNDS16=20] [ROUNDS20=10]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
install_deps
[ -x build/tollgate ] || build_tollgate
exec /usr/bin/python3 bench/browser_pow.py "$@"
