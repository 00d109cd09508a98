#!/usr/bin/env bash
# Set-up, build, and start Tollgate with config/gateway.yaml in front of the demo upstream
# (build/tollgate-echo on 127.0.0.1:9000). Works on a fresh Debian 12 as root. Ctrl-C stops both.
# Installs only what building and the tour below need (scripts/deps.sh's tollgate_run_packages);
# scripts/test.sh adds the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
tollgate_packages=("${tollgate_run_packages[@]}")
install_deps
# BUILD_TESTING=OFF: the tests' Catch2 is a test package (scripts/test.sh turns it back on).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${TOLLGATE_BUILD_TYPE:-RelWithDebInfo}" \
  -DBUILD_TESTING=OFF >/dev/null
cmake --build build -j "$(nproc)" --target tollgate tollgate-echo

build/tollgate --check-config config/gateway.yaml
build/tollgate-echo --address 127.0.0.1 --port 9000 --threads 2 &
echo_pid=$!
trap 'kill "$echo_pid" 2>/dev/null || true' EXIT

# The admin API (/admin/*) asks for the bearer token in TOLLGATE_ADMIN_TOKEN when it is set;
# /metrics and the health checks never do.
if [ -n "${TOLLGATE_ADMIN_TOKEN:-}" ]; then
  admin_curl="curl -s -H \"Authorization: Bearer \$TOLLGATE_ADMIN_TOKEN\""
  admin_note="with the token this script was started with (TOLLGATE_ADMIN_TOKEN)"
else
  admin_curl="curl -s"
  admin_note="no token: TOLLGATE_ADMIN_TOKEN is not set (export it before this script for one)"
fi

# The WebSocket line comes before the violation: after it, this client needs a proof of work.
cat <<MSG

Tollgate is starting on port 8080; metrics, health and the admin API on 127.0.0.1:9090. Try:
  curl -i localhost:8080/api/profiles/x                       # general: 20/s, burst 50
  for i in \$(seq 7); do curl -s -o /dev/null -w '%{http_code} ' -X POST localhost:8080/api/auth/login; done
                                                              # auth: burst 5, then 429
  curl -s localhost:9090/metrics | grep tollgate_requests_total
  ${admin_curl} localhost:9090/admin/limited
                                 # who was limited; ${admin_note}
  /usr/bin/python3 -m websockets ws://localhost:8080/ws/bus   # WebSocket: type a line, it echoes
                                                              # (Debian's python3-websockets)
  curl -s -o /dev/null 'localhost:8080/api/profiles/x?violation=rejected'   # the API flags you
  curl -i localhost:8080/api/profiles/x                       # now 428 + a challenge; docs/pow.md
                                                              # shows the rest
  build/tollgate simulate --config config/gateway.yaml --log build/access.log
                                 # replays build/access.log (this gateway's access log) offline
MSG
build/tollgate --config config/gateway.yaml
