#!/usr/bin/env bash
# ThreadSanitizer run of the tests that exercise concurrency: configures build-tsan/
# (TOLLGATE_TSAN=ON), builds the unit and integration tests (and the gateway and echo processes
# the integration tests start, also under TSan), then runs the unit tests with threads and the
# integration tests, whose multi-worker gateway serves concurrent clients, four modules of
# the WebSocket tests (tests/websocket, against the TSan gateway) and the Redis store's
# replica, Cluster and fault tests (tests/redis). Every process writes
# its race reports to build-tsan/tsan-logs/ (a pipe the harness does not drain would block
# it); the run fails when a test fails or any report was written. Works on a fresh Debian 12
# as root. A full run takes a while: TSan slows the gateway 5-15x.
#   usage: scripts/tsan.sh [catch2 test spec for the integration tests; default: all]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
install_deps
cmake -S . -B build-tsan -G Ninja -DTOLLGATE_TSAN=ON -DTOLLGATE_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-tsan --target tollgate_unit_tests tollgate_integration_tests \
  tollgate_seam_tests tollgate_redis_tests tollgate tollgate-echo -j "$(nproc)"

logs="$PWD/build-tsan/tsan-logs"
rm -rf "$logs"
mkdir -p "$logs"
export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 history_size=4 log_path=$logs/tsan"
status=0
# Threads in the unit tests: the limiter store hammered from several threads ([concurrency]),
# a global limit's slices under two threads ([global]), the state table under it ([table]; the
# 5-million-address soak, [bounds], is single-threaded and takes minutes under TSan), and proof
# of work (solve's threads, the shared caches). The seam tests complete held decisions from the
# test's thread onto a worker's event loop.
build-tsan/tests/tollgate_unit_tests "[concurrency],[global],[table]~[bounds],[pow]" || status=1
build-tsan/tests/tollgate_seam_tests || status=1
build-tsan/tests/tollgate_integration_tests "${1:-[integration]}" || status=1
# The Redis store: two-worker gateways deciding through their links, batches completed on the
# workers, a Cluster's parts and refunds, Redis killed and paused under load.
if [ -z "${1:-}" ]; then
  build-tsan/tests/tollgate_redis_tests "[replicas],[cluster],[faults]" || status=1
fi
# WebSocket tunnels on a two-worker gateway: the per-address table of open WebSockets shared by
# the workers, a stop posted to every worker (SIGTERM), many connections at once.
if [ -z "${1:-}" ]; then
  for module in relay limits signals hostile; do
    /usr/bin/python3 tests/websocket/test_$module.py build-tsan || status=1
  done
fi

if compgen -G "$logs/tsan.*" >/dev/null; then
  echo "ThreadSanitizer reports, by process:"
  grep -H -m1 "WARNING: ThreadSanitizer" "$logs"/tsan.* || true
  status=1
fi
[ "$status" -eq 0 ] && echo "ThreadSanitizer: no report, every test passed"
exit "$status"
