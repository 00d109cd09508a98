#!/usr/bin/env bash
# Resident memory of Tollgate across many proxied requests (issue: flat within 10% after
# warm-up). Drives wrk in slices until TOTAL requests have been proxied and prints the RSS
# after each slice.
#
#   bash bench/memory.sh [TOTAL]          (default 10000000)
set -euo pipefail
cd "$(dirname "$0")/.."
total="${1:-10000000}"
source bench/common.sh
bench_setup wrk

build/tollgate-echo --port 0 --threads 2 >"$work/echo.log" & pids+=($!)
for _ in $(seq 50); do grep -q listening "$work/echo.log" && break; sleep 0.1; done
up=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/echo.log" | head -1)
open_gateway_yaml "$up" 2 "$work/gateway.yaml"
build/tollgate --config "$work/gateway.yaml" >"$work/tollgate.log" 2>&1 & tg=$!; pids+=($tg)
port=$(public_port "$work/tollgate.log")

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$tg/status"; }
done_requests=0
slice=0
printf '%12s %10s %12s\n' "requests" "RSS KiB" "req/s"
while [ "$done_requests" -lt "$total" ]; do
  out=$(wrk -t2 -c64 -d20s "http://127.0.0.1:$port/api/profiles/x" 2>&1)
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  done_requests=$((done_requests + n))
  slice=$((slice + 1))
  printf '%12d %10d %12s\n' "$done_requests" "$(rss_kib)" "$rps"
done
