#!/usr/bin/env bash
# A/B of two Tollgate binaries on one machine: same upstream, same policy (bench/open-policy.yaml,
# 2 levels x 2 tiers, nothing rejected), 2 workers each, wrk -t2 -c64 runs alternating between
# them; prints req/s, p99 and CPU microseconds per request of each run. The steadier comparison
# on a noisy VM: both binaries see the same background in every round.
#
#   bash bench/ab.sh BINARY_A BINARY_B [SECONDS]     (ROUNDS=N, default 4)
set -euo pipefail
binary_a="$(realpath "$1")"
binary_b="$(realpath "$2")"
seconds="${3:-8}"
cd "$(dirname "$0")/.."
source bench/common.sh
bench_setup wrk
up=$(free_port)
build/tollgate-echo --port "$up" --threads 2 >/dev/null & pids+=($!)
wait_port "$up"
start() { # binary name
  open_gateway_yaml "$up" 2 "$work/$2.yaml"
  "$1" --config "$work/$2.yaml" >"$work/$2.log" 2>&1 & pids+=($!); eval "pid_$2=$!"
  eval "port_$2=$(public_port "$work/$2.log")"
}
start "$binary_a" A; start "$binary_b" B
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
hz=$(getconf CLK_TCK)
for round in $(seq ${ROUNDS:-4}); do
  for g in A B; do
    eval "p=\$port_$g; pid=\$pid_$g"
    c0=$(cpu $pid)
    out=$(wrk -t2 -c64 -d${seconds}s --latency "http://127.0.0.1:$p/api/profiles/x")
    c1=$(cpu $pid)
    n=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
    printf '%s round %d: %9s req/s  p99 %8s  CPU %.2f us/req\n' $g $round $rps $p99 $(awk -v a=$c0 -v b=$c1 -v n=$n -v hz=$hz 'BEGIN {print (b-a)/hz*1e6/n}')
  done
done
