#!/usr/bin/env bash
# Tollgate under hostile and idle clients (issue 8), nginx beside it where it compares:
#   1. memory per idle keep-alive connection: N connections each make one request and stay
#      open; resident memory before and after, per connection (Tollgate and nginx); then per
#      connection that sent half a head and stopped (2000 of them);
#   2. latency of normal clients (wrk from 127.0.0.1) without and with a slowloris attack of
#      2000 connections from one other address (127.0.0.200) held open with a never-ending
#      head, Tollgate with its default per-address cap;
#   3. peak resident memory while 10 connections send endless chunk extensions and trailers;
#   4-7. (issue 21) other clients' p99 and the gateway's memory while: one address fails a
#      login and sends garbage proofs (do its neighbours need proofs?); a trusted balancer
#      holds 400 connections for 400 clients; 5000 connections flood the admin port; eight
#      addresses of one /24 hold 150 half-sent heads each against max_connections 1000.
#
#   bash bench/hostile.sh [IDLE_CONNECTIONS [issue21]]   (default 10000; issue21: 4-7 only)
set -euo pipefail
cd "$(dirname "$0")/.."
idle_n="${1:-10000}"
only="${2:-}"
source bench/common.sh
bench_setup wrk nginx-light python3

up=$(free_port); ng=$(free_port)
build/tollgate-echo --port "$up" --threads 2 >/dev/null & pids+=($!)
wait_port "$up"

cat > "$work/gateway.yaml" <<YAML
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
limits: { max_connections: 15000, keepalive_timeout: 300s, header_timeout: 60s }
upstreams: { app: { endpoints: ["127.0.0.1:$up"] } }
default_route: { category: general, upstream: app }
policies: [$PWD/bench/open-policy.yaml]
YAML
start_tollgate() {
  build/tollgate --config "$work/gateway.yaml" >"$work/tollgate.log" 2>&1 & tg=$!; pids+=($tg)
  for _ in $(seq 50); do grep -q "listening on public" "$work/tollgate.log" && break; sleep 0.1; done
  port=$(grep "listening on public" "$work/tollgate.log" | sed 's/.*:\([0-9]*\)$/\1/')
}
stop_tollgate() { kill "$tg"; wait "$tg" 2>/dev/null || true; }

cat > "$work/nginx.conf" <<NGINX
worker_processes 2;
worker_rlimit_nofile 20000;
pid $work/nginx.pid;
error_log $work/nginx.err warn;
events { worker_connections 15000; }
http {
  access_log off;
  keepalive_timeout 300s;
  keepalive_requests 100000;
  upstream app { server 127.0.0.1:$up; keepalive 64; }
  server {
    listen 127.0.0.1:$ng reuseport;
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
nginx -p "$work" -c "$work/nginx.conf" -g 'daemon off;' & ngx=$!; pids+=($ngx)
wait_port "$ng"

if [ "$only" != issue21 ]; then
echo "== 1. memory per idle keep-alive connection ($idle_n connections, 2 workers each)"
printf '%-10s %12s %12s %14s\n' "" "RSS before" "RSS after" "bytes/conn"
start_tollgate
read -r n before after per < <(python3 bench/hostile_clients.py idle "$port" "$idle_n" "$tg")
printf '%-10s %10s K %10s K %14s\n' tollgate "$before" "$after" "$per"
stop_tollgate
start_tollgate
read -r n before after per < <(python3 bench/hostile_clients.py slowheads "$port" 2000 "$tg")
printf '%-10s %10s K %10s K %14s   (2000 connections holding half a head)\n' tollgate "$before" \
  "$after" "$per"
stop_tollgate
# nginx: its master and workers.
ngx_pids=$(pgrep -P "$ngx" | tr '\n' ' ')
read -r n before after per < <(python3 bench/hostile_clients.py idle "$ng" "$idle_n" $ngx $ngx_pids)
printf '%-10s %10s K %10s K %14s\n' nginx "$before" "$after" "$per"

echo
echo "== 2. normal clients' latency, without and with 2000 slowloris connections from one address"
start_tollgate
latency() { # label
  wrk -t2 -c32 -d8s --latency "http://127.0.0.1:$port/api/x" >"$work/wrk.txt" 2>&1
  printf '%-34s %10s req/s   p50 %8s   p99 %8s\n' "$1" \
    "$(awk '/Requests\/sec/ {print $2}' "$work/wrk.txt")" \
    "$(awk '$1 == "50%" {print $2}' "$work/wrk.txt")" "$(awk '$1 == "99%" {print $2}' "$work/wrk.txt")"
}
latency "tollgate, no attack"
python3 bench/hostile_clients.py slowloris "$port" 2000 14 >"$work/slow.txt" & attack=$!
sleep 4
latency "tollgate, 2000 slowloris connections"
wait "$attack" || true
cat "$work/slow.txt"
grep -o 'tollgate_connections_refused_total{[^}]*per_address[^}]*} [0-9]*' \
  <(curl -s "http://127.0.0.1:$(grep 'admin listening on' "$work/tollgate.log" | sed 's/.*:\([0-9]*\)$/\1/')/metrics") || true

echo
echo "== 3. peak RSS under 10 endless chunk-extension / trailer connections for 10 s"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$tg/status"; }
peak=$(rss); start_rss=$peak
python3 bench/hostile_clients.py chunkflood "$port" 10 10 >"$work/flood.txt" & flood=$!
while kill -0 "$flood" 2>/dev/null; do r=$(rss); [ "$r" -gt "$peak" ] && peak=$r; sleep 0.1; done
cat "$work/flood.txt"
printf 'tollgate RSS: %d KiB before, peak %d KiB during (%.1f MB)\n' "$start_rss" "$peak" \
  "$(awk -v p="$peak" 'BEGIN {print p / 1024}')"
stop_tollgate
fi

# ---- issue 21: neighbours, balancers, the admin port, one network's slow clients ------------
cat > "$work/policy21.yaml" <<YAML
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000000/s, burst: 1000000 } }
      ipv4_network:    { short: { rate: 1000000/s, burst: 1000000 } }
  login:
    limits:
      ipv4_individual: { short: { rate: 1000000/s, burst: 1000000 } }
      ipv4_network:    { short: { rate: 1000000/s, burst: 1000000 } }
    pow: { enabled: true, base_bits: 16, step_bits: 2, max_bits: 28 }
    status_violations: { 401: failed_auth }
violations:
  failed_auth: { levels: [individual] }
  pow_failed:  { levels: [network] }
YAML
cat > "$work/gateway.yaml" <<YAML
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
limits: { max_connections: 1000, keepalive_timeout: 300s, header_timeout: 60s }
trusted_proxies: [127.0.0.1/32]
upstreams: { app: { endpoints: ["127.0.0.1:$up"] } }
routes: [{ match: { path_prefix: /login }, category: login, upstream: app }]
default_route: { category: general, upstream: app }
policies: [$work/policy21.yaml]
YAML
start_tollgate
admin_port=$(grep 'admin listening on' "$work/tollgate.log" | sed 's/.*:\([0-9]*\)$/\1/')
others() { # label path: wrk as client 203.0.113.9 (loopback is a trusted proxy here)
  wrk -t2 -c32 -d6s --latency -H "X-Forwarded-For: ${3:-203.0.113.9}" "http://127.0.0.1:$port$2" \
    >"$work/wrk.txt" 2>&1
  printf '%-46s %9s req/s   p99 %8s   non-2xx %s   RSS %s KiB\n' "$1" \
    "$(awk '/Requests\/sec/ {print $2}' "$work/wrk.txt")" \
    "$(awk '$1 == "99%" {print $2}' "$work/wrk.txt")" \
    "$(awk '/Non-2xx/ {print $NF}' "$work/wrk.txt" | grep . || echo 0)" \
    "$(awk '/^VmRSS/ {print $2}' "/proc/$tg/status")"
}

echo
echo "== 4. one address fails a login, then sends 20 garbage proofs: its /24 neighbour's answers"
others "neighbour 127.0.3.9, before" /login 127.0.3.9
python3 bench/hostile_clients.py proofspam "$port" 127.0.3.5 20
others "neighbour 127.0.3.9, after" /login 127.0.3.9
others "the attacker 127.0.3.5 itself, after" /login 127.0.3.5

echo
echo "== 5. a trusted balancer's 400 keep-alive connections, each for another client"
python3 bench/hostile_clients.py behindlb "$port" 400

echo
echo "== 6. 5000 connections to the admin port (admin.max_connections 64), held 10 s"
others "others, no attack" /api/x
python3 bench/hostile_clients.py adminflood "$admin_port" 5000 10 >"$work/admin.txt" & attack=$!
sleep 2
others "others, admin port flooded" /api/x
curl -s -o /dev/null -w 'a scrape of /metrics during the flood: %{http_code}\n' \
  "http://127.0.0.1:$admin_port/metrics" || echo "a scrape of /metrics during the flood: refused"
wait "$attack" || true
cat "$work/admin.txt"
echo "log lines about the admin cap: $(grep -c 'admin.max_connections' "$work/tollgate.log" || true)"
grep -o 'tollgate_admin_connections_closed_total{[^}]*} [0-9]*' \
  <(curl -s "http://127.0.0.1:$admin_port/metrics") || true

echo
echo "== 7. eight addresses of one /24, 150 half-sent heads each (max_connections 1000)"
python3 bench/hostile_clients.py netslow "$port" 8 150 10 >"$work/net.txt" & attack=$!
sleep 2
others "others, one /24 holding its cap" /api/x
served=0
for i in $(seq 20); do
  code=$(curl -s -o /dev/null -w '%{http_code}' --interface "127.0.$((10 + i)).1" "http://127.0.0.1:$port/new") || true
  [ "$code" = 200 ] && served=$((served + 1))
done
echo "new clients of other networks served: $served of 20"
wait "$attack" || true
cat "$work/net.txt"
grep -o 'tollgate_connections_refused_total{[^}]*} [0-9]*' \
  <(curl -s "http://127.0.0.1:$admin_port/metrics") || true
stop_tollgate
