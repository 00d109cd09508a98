#!/usr/bin/env bash
# Proof of work (issue: proof of work, violation counters and bans).
#   bash bench/pow.sh [SECONDS]     (default 10 s per wrk run)
#
# 1. Micro-benchmark (build/bench/tollgate_pow_bench, median of 5): issuing a challenge (the
#    whole 428 answer) and verifying a proof, on one core, the client's work excluded.
# 2. A flood of invalid proofs from one address against the gateway, next to a flood of
#    requests past a rate limit (429s): requests/s of each, and how many reached the upstream.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-10}"
source bench/common.sh
bench_setup wrk
out="$work/bench.out"

build/bench/tollgate_pow_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  >"$out" 2>&1
median() { awk -v n="$1" 'index($1, n) == 1 && $1 ~ /_median$/ { print $2; exit }' "$out"; }
echo "== PoW micro-benchmark (median of 5; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
printf '%-52s %s ns\n' "issue a challenge (the whole 428 answer)" "$(median issue_challenge)"
printf '%-52s %s ns\n' "verify and spend a valid proof" "$(median verify_valid_proof)"
printf '%-52s %s ns\n' "refuse a forged proof (bad signature)" "$(median verify_forged_proof)"

up=$(free_port); tg=$(free_port)
build/tollgate-echo --port "$up" --threads 2 >/dev/null & pids+=($!)
wait_port "$up"
cat > "$work/policy.yaml" <<YAML
categories:
  guarded:
    limits:
      ipv4_individual: { short: { rate: 1000000/s, burst: 1000000 } }
    pow: { enabled: true }
  limited:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
violations:
  abuse: { levels: [individual] }
YAML
cat > "$work/gateway.yaml" <<YAML
listeners: [{ name: public, address: 127.0.0.1, port: $tg }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
upstreams: { app: { endpoints: ["127.0.0.1:$up"] } }
routes:
  - { match: { path_prefix: /guarded }, category: guarded, upstream: app }
default_route: { category: limited, upstream: app }
policies: [$work/policy.yaml]
logging: { level: warn }
YAML
TOLLGATE_POW_SECRET=bench build/tollgate --config "$work/gateway.yaml" >"$work/tollgate.log" 2>&1 & pids+=($!)
wait_port "$tg"
curl -s -o /dev/null "http://127.0.0.1:$tg/guarded/x?violation=abuse"   # now a proof is required
curl -s -o /dev/null "http://127.0.0.1:$tg/x"                            # the limit's one request
# A challenge the gateway issued, altered: well formed, refused at the signature every time.
challenge="$(curl -s -D - -o /dev/null "http://127.0.0.1:$tg/guarded/x" |
  awk -F': ' 'tolower($1) == "x-pow-challenge" { print $2 }' | tr -d '\r')"
forged="${challenge:0:40}AAAA${challenge:44}:1"
upstream_requests() { curl -s "http://127.0.0.1:$up/_echo/stats" | sed 's/.*"requests":\([0-9]*\).*/\1/'; }
rate() { wrk -t2 -c64 -d"${duration}s" "$@" 2>&1 | awk '/Requests\/sec/ { printf "%.0f", $2 }'; }
before=$(upstream_requests)
flood=$(rate -H "X-PoW-Solution: $forged" "http://127.0.0.1:$tg/guarded/x")
after=$(upstream_requests)
limited=$(rate "http://127.0.0.1:$tg/x")
echo
echo "== one address flooding (wrk -t2 -c64 -d${duration}s, 2 workers)"
printf '%-52s %s req/s\n' "invalid proofs (each answered 428)" "$flood"
printf '%-52s %s req/s\n' "past its rate limit (each answered 429)" "$limited"
printf '%-52s %s\n' "requests of the proof flood that reached the upstream" "$((after - before))"
awk -v a="$flood" -v b="$limited" 'BEGIN { printf "%-52s %.2fx\n", "428 flood rate / 429 flood rate", a / b }'
