#!/usr/bin/env bash
# Set-up, build, and start Tollgate with config/gateway.yaml in front of the demo upstream
# (build/tollgate-echo on 127.0.0.1:9000). Works on a fresh Debian 12 as root. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
install_deps
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${TOLLGATE_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
cmake --build build -j "$(nproc)" --target tollgate tollgate-echo

build/tollgate --check-config config/gateway.yaml
build/tollgate-echo --address 127.0.0.1 --port 9000 --threads 2 &
echo_pid=$!
trap 'kill "$echo_pid" 2>/dev/null || true' EXIT

cat <<'MSG'

Tollgate is starting on port 8080; metrics and health on 127.0.0.1:9090. Try:
  curl -i localhost:8080/api/profiles/x                       # general: 20/s, burst 50
  for i in $(seq 7); do curl -s -o /dev/null -w '%{http_code} ' -X POST localhost:8080/api/auth/login; done
                                                              # auth: burst 5, then 429
  curl -s localhost:9090/metrics | grep tollgate_requests_total
  curl -s -o /dev/null 'localhost:8080/api/profiles/x?violation=rejected'   # the API flags you
  curl -i localhost:8080/api/profiles/x                       # now 428 + a challenge; README.md
                                                              # "Proof of work" shows the rest
  python3 -m websockets ws://localhost:8080/ws/bus            # WebSocket: type a line, it echoes
MSG
build/tollgate --config config/gateway.yaml
