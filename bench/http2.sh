#!/usr/bin/env bash
# HTTP/2 to clients (docs/design.md §17): Tollgate against nginx (`listen ... http2`, h2c with
# prior knowledge), both proxying the same tollgate-echo upstream over HTTP/1.1 with keep-alive,
# one worker each, in one run on one machine.
#
# h2load (nghttp2-client) sends each REQUESTS requests on 4 connections, first one stream at a time per
# connection (-m 1), then 100 concurrent streams per connection (-m 100), BENCH_ROUNDS (3) times
# each, nginx and Tollgate in turn; prints the medians of requests/s and of the CPU time per
# request of the process under test (and its workers), and their ratios. And memory per idle
# HTTP/2 connection: connections that sent the preface and SETTINGS and got the server's, held
# open, the growth of the server's RSS from 1000 held to 2000.
#   usage: bench/http2.sh [REQUESTS per run, default 200000]
#   BENCH_PIN=1: the server under test on CPU 1, h2load and the upstream on CPU 0 (on a 2-core
#   machine, each server then has a core to itself, as it would in production, and the figures
#   do not depend on where the scheduler happens to put the three processes)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
requests="${1:-200000}"
bench_setup nginx-light nghttp2-client python3-h2

up=$(free_port); ng=$(free_port); tg=$(free_port)
server=() client=()
if [ "${BENCH_PIN:-0}" = 1 ]; then server=(taskset -c 1) client=(taskset -c 0); fi
"${client[@]}" build/tollgate-echo --port "$up" --threads 1 >/dev/null & pids+=($!)
wait_port "$up"

cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  limit_req_zone \$binary_remote_addr zone=individual:16m rate=1000000r/s;
  limit_req_zone \$binary_remote_addr zone=network:16m rate=1000000r/s;
  limit_req_status 429;
  http2_max_concurrent_streams 100;
  keepalive_requests 10000000;   # nginx ends an HTTP/2 connection after 1000 requests otherwise
  upstream app { server 127.0.0.1:$up; keepalive 512; }
  server {
    listen 127.0.0.1:$ng http2;
    location / {
      limit_req zone=individual burst=1000000 nodelay;
      limit_req zone=network burst=1000000 nodelay;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Real-IP \$remote_addr;
    }
  }
}
NGINX
"${server[@]}" nginx -p "$work" -c "$work/nginx.conf" -g 'daemon off;' & pids+=($!)
ngpid=$!
cat > "$work/tollgate.yaml" <<YAML
listeners: [{ name: public, address: 127.0.0.1, port: $tg, http2: true }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
limits: { max_connections_per_address: 5000 }
upstreams: { app: { endpoints: ["127.0.0.1:$up"], max_idle_connections: 512 } }
default_route: { category: general, upstream: app }
policies: [$PWD/bench/open-policy.yaml]
logging: { level: warn }
YAML
"${server[@]}" build/tollgate --config "$work/tollgate.yaml" >"$work/tollgate.log" 2>&1 & pids+=($!)
tgpid=$!
wait_port "$ng"
wait_port "$tg"

rss_kib() {
  local total=0 pid
  for pid in "$1" $(pgrep -P "$1" || true); do
    total=$((total + $(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")))
  done
  echo "$total"
}
# h2load sending $requests requests -> "rps cpu_us_per_request non2xx". (Its timing mode, -D,
# counts no request at all against nginx in nghttp2 1.52: a count it is.)
measure() { # port pid streams
  local before after
  before=$(cpu_ticks "$2")
  "${client[@]}" h2load -t1 -c4 -m"$3" -n"$requests" "http://127.0.0.1:$1/api/profiles/x" \
    >"$work/h2load.out" 2>&1
  after=$(cpu_ticks "$2")
  cp "$work/h2load.out" "$work/h2load-$1-$3.out"
  awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" \
    '/^finished in/ { rps = $4 + 0 } /^status codes:/ { ok = $3 + 0 }
     /^requests:/ { total = $2 + 0 }
     END { printf "%.0f %.1f %d\n", rps, (total > 0 ? ticks / hz * 1e6 / total : 0), total - ok }' \
    "$work/h2load.out"
}
# Memory per idle HTTP/2 connection, first, before any request (what the runs leave, spare
# buffers freed at a later connection among it, would move the figure): the growth of the
# server's RSS from 1000 connections held to 2000, so that what the first connections cost once
# (the heap's first pages, the worker's read buffer) is not counted per connection.
idle() { # port pid
  local first second
  rm -f "$work/idle.go"
  /usr/bin/python3 - "$1" 1000 "$work/idle.go" >"$work/idle.out" <<'PY' &
import os, socket, sys, time
import h2.config, h2.connection
port, n, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = []
def hold(count):
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        s.sendall(c.data_to_send())
        s.settimeout(5)
        c.receive_data(s.recv(65536))   # the server's SETTINGS
        s.sendall(c.data_to_send())     # our ACK
        held.append(s)
hold(n)
print("first", flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
hold(n)
print("second", flush=True)
time.sleep(8)
PY
  local py=$!
  for _ in $(seq 200); do grep -q first "$work/idle.out" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  first=$(rss_kib "$2")
  touch "$work/idle.go"
  for _ in $(seq 200); do grep -q second "$work/idle.out" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  second=$(rss_kib "$2")
  kill "$py" 2>/dev/null || true
  wait "$py" 2>/dev/null || true
  echo $(((second - first) * 1024 / 1000))
}
idle_line="memory per idle HTTP/2 connection (RSS growth from 1000 to 2000 held): nginx $(idle "$ng" "$ngpid") B, tollgate $(idle "$tg" "$tgpid") B"

for p in "$ng" "$tg"; do h2load -c2 -m10 -n2000 "http://127.0.0.1:$p/" >/dev/null 2>&1 || true; done

rounds="${BENCH_ROUNDS:-3}"
echo "# bench/http2.sh $requests requests per run, h2load -t1 -c4, one worker each," \
  "medians of $rounds rounds (nginx and tollgate in turn), $(date -u +%F)" \
  "$([ "${BENCH_PIN:-0}" = 1 ] && echo "(pinned: servers on CPU 1, h2load and the upstream on CPU 0)")"
printf '%-22s %10s %14s %8s\n' target 'req/s' 'cpu us/req' non2xx
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for m in 1 100; do
  declare -A rps=() cpu=() bad=()
  for _ in $(seq "$rounds"); do
    for t in nginx tollgate; do
      if [ "$t" = nginx ]; then port=$ng pid=$ngpid; else port=$tg pid=$tgpid; fi
      read -r r c n < <(measure "$port" "$pid" "$m")
      rps[$t]+="$r " cpu[$t]+="$c " bad[$t]=$((${bad[$t]:-0} + n))
    done
  done
  for t in nginx tollgate; do
    rps[$t]=$(echo "${rps[$t]}" | median) cpu[$t]=$(echo "${cpu[$t]}" | median)
    printf '%-22s %10s %14s %8s\n' "$t -m $m" "${rps[$t]}" "${cpu[$t]}" "${bad[$t]}"
  done
  awk -v a="${rps[tollgate]}" -v b="${rps[nginx]}" -v c="${cpu[tollgate]}" \
    -v d="${cpu[nginx]}" 'BEGIN { printf "%-22s %10.2f %14.2f\n", "tollgate/nginx -m '"$m"'", a / b, c / d }'
done

echo "$idle_line"
