#!/usr/bin/env bash
# User-space instructions and system calls per proxied request (bench/README's method): a
# 1-worker Tollgate under callgrind, counters zeroed after a warm-up, wrk for SECONDS, total
# instructions / requests; then the same gateway without valgrind under strace -c for system
# calls per request. Steady where wall-clock times are not.
#
#   bash bench/instructions.sh [SECONDS] [TOLLGATE_BINARY]   (defaults: 10, build/tollgate)
#   CALLGRIND_KEEP=DIR bash bench/instructions.sh ...        (keeps the profile parts)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
binary="$(realpath "${2:-build/tollgate}")"
source bench/common.sh
bench_setup wrk valgrind strace

up=$(free_port)
build/tollgate-echo --port "$up" --threads 2 >/dev/null & pids+=($!)
wait_port "$up"
cat > "$work/gateway.yaml" <<YAML
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
upstreams: { app: { endpoints: ["127.0.0.1:$up"] } }
default_route: { category: general, upstream: app }
policies: [$PWD/bench/open-policy.yaml]
YAML
port_of() { grep "listening on public" "$1" | sed 's/.*:\([0-9]*\)$/\1/'; }
url_path=/api/profiles/x

valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$binary" \
  --config "$work/gateway.yaml" >"$work/cg.log" 2>&1 & cg=$!; pids+=($cg)
for _ in $(seq 100); do grep -q "listening on public" "$work/cg.log" && break; sleep 0.2; done
port=$(port_of "$work/cg.log")
wrk -t1 -c16 -d3s "http://127.0.0.1:$port$url_path" >/dev/null 2>&1
callgrind_control -z "$cg" >/dev/null
requests=$(wrk -t1 -c16 -d"${seconds}s" "http://127.0.0.1:$port$url_path" | awk '/requests in/ {print $1}')
callgrind_control -d "$cg" >/dev/null
kill "$cg"; wait "$cg" 2>/dev/null || true
ir=$(cat "$work"/cg.out* | awk '/^summary:/ {s += $2} END {print s}')
# CALLGRIND_KEEP=DIR keeps the profile parts, for callgrind_annotate (where the instructions go).
if [ -n "${CALLGRIND_KEEP:-}" ]; then mkdir -p "$CALLGRIND_KEEP" && cp "$work"/cg.out* "$CALLGRIND_KEEP"/; fi
printf 'instructions per request: %.0f  (%s requests under callgrind)\n' \
  "$(awk -v i="$ir" -v n="$requests" 'BEGIN {print i / n}')" "$requests"

"$binary" --config "$work/gateway.yaml" >"$work/st.log" 2>&1 & tg=$!; pids+=($tg)
for _ in $(seq 50); do grep -q "listening on public" "$work/st.log" && break; sleep 0.1; done
port=$(port_of "$work/st.log")
wrk -t1 -c16 -d2s "http://127.0.0.1:$port$url_path" >/dev/null 2>&1
strace -c -f -p "$tg" -o "$work/strace.txt" & st=$!
sleep 0.5
requests=$(wrk -t1 -c16 -d"${seconds}s" "http://127.0.0.1:$port$url_path" | awk '/requests in/ {print $1}')
kill -INT "$st"; wait "$st" 2>/dev/null || true
calls=$(awk '$NF == "total" {print $(NF-2)}' "$work/strace.txt")
printf 'system calls per request: %.2f\n' "$(awk -v c="$calls" -v n="$requests" 'BEGIN {print c / n}')"
awk 'NR > 2 && $NF != "total" && $NF !~ /^-/ && $4 > 0 {printf "  %-14s %s\n", $NF, $4}' \
  "$work/strace.txt" | sort -k2 -n -r | head -8
