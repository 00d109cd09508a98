#!/usr/bin/env bash
# Micro-benchmark of the limiter core (issue: limiter core). Builds if needed, runs
# build/bench/tollgate_limiter_bench with 5 repetitions and prints the medians.
#   bash bench/limiter.sh            # summary
#   bash bench/limiter.sh --raw      # Google Benchmark's own table as well
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
install_deps >&2
build_tollgate >/dev/null

out=$(mktemp)
trap 'rm -f "$out"' EXIT
build/bench/tollgate_limiter_bench --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true 2>&1 | tee "$out" | { [ "${1:-}" = "--raw" ] && cat || cat >/dev/null; }

# "name/.../threads:N_median   <real time> ns ..." -> real time of the median.
median() { awk -v n="$1" 'index($1, n) == 1 && $1 ~ /_median$/ { print $2; exit }' "$out"; }
rate() { awk -v n="$1" 'index($1, n) == 1 && $1 ~ /_median$/ {
  for (i = 1; i <= NF; i++) if ($i ~ /^items_per_second=/) { sub(/items_per_second=/, "", $i); print $i } ; exit }' "$out"; }

echo
echo "== limiter micro-benchmark (median of 5 runs; $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
grep -E '^(memory|huge pages|evictions while filling):' "$out"
printf '%-58s %s\n' "full IPv4 decision, 1M live keys, uniform, 1 thread" "$(median 'full_ipv4_decision/min_time:2.000/real_time/threads:1_') ns"
printf '%-58s %s\n' "full IPv4 decision, 1M live keys, uniform, 2 threads" "$(median 'full_ipv4_decision/min_time:2.000/real_time/threads:2_') ns per decision (aggregate)"
printf '%-58s %s\n' "same, next request prefetched (memory_store::prepare), 1 thread" "$(median 'prefetched_ipv4_decision/min_time:2.000/real_time/threads:1_') ns"
printf '%-58s %s\n' "same, next request prefetched, 2 threads" "$(median 'prefetched_ipv4_decision/min_time:2.000/real_time/threads:2_') ns per decision (aggregate)"
printf '%-58s %s\n' "1M live keys, Zipf(1.0) traffic, 1 thread" "$(median 'skewed_ipv4_decision') ns"
printf '%-58s %s\n' "full IPv4 decision + a global limit, 1 thread" "$(median 'global_limit_decision/min_time:2.000/real_time/threads:1_') ns"
printf '%-58s %s\n' "full IPv4 decision + a global limit, 2 threads" "$(median 'global_limit_decision/min_time:2.000/real_time/threads:2_') ns per decision (aggregate)"
printf '%-58s %s\n' "one hot key (all in cache), 1 thread" "$(median 'hot_key_ipv4_decision') ns"
printf '%-58s %s\n' "rejected (429 path), 1 thread" "$(median 'rejected_ipv4_decision') ns"
one=$(rate 'full_ipv4_decision/min_time:2.000/real_time/threads:1_')
two=$(rate 'full_ipv4_decision/min_time:2.000/real_time/threads:2_')
awk -v a="$one" -v b="$two" 'function v(x) { m = 1; if (x ~ /M\/s$/) m = 1e6; else if (x ~ /k\/s$/) m = 1e3; sub(/[kM]?\/s$/, "", x); return x * m }
  BEGIN { printf "%-58s %.2fx (%.2fM/s vs %.2fM/s)\n", "2 threads / 1 thread throughput, distinct keys", v(b) / v(a), v(b) / 1e6, v(a) / 1e6 }'
one=$(rate 'global_limit_decision/min_time:2.000/real_time/threads:1_')
two=$(rate 'global_limit_decision/min_time:2.000/real_time/threads:2_')
awk -v a="$one" -v b="$two" 'function v(x) { m = 1; if (x ~ /M\/s$/) m = 1e6; else if (x ~ /k\/s$/) m = 1e3; sub(/[kM]?\/s$/, "", x); return x * m }
  BEGIN { printf "%-58s %.2fx (%.2fM/s vs %.2fM/s)\n", "2 threads / 1 thread, with a global limit (target >= 1.7x)", v(b) / v(a), v(b) / 1e6, v(a) / 1e6 }'
