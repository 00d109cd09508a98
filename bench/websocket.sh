#!/usr/bin/env bash
# WebSocket through Tollgate against nginx, in one run on one machine (issue: WebSocket support).
#
#   bash bench/websocket.sh [SECONDS]          (default 5 s per throughput and latency case)
#   TOLLGATE_BENCH_WORKERS=N  proxy workers, nginx's worker_processes the same (default 1)
#   TOLLGATE_BENCH_ROUNDS=N   interleaved rounds of the throughput and latency runs, medians
#                             reported (default 1)
#   TOLLGATE_BENCH_IDLE=N     idle connections of the memory case (default 10000)
#   TOLLGATE_BENCH_PIN=0      do not pin (default: proxies on CPU 1, client and echo on CPU 0)
#   TOLLGATE_BENCH_BUILD=DIR  build tree to configure, build and use (default build)
#   TOLLGATE_BENCH_ECHO=PATH  the upstream program (default DIR/tollgate-echo)
#
# bench/tollgate_ws_load (Beast, one thread, binary messages, no compression) drives
# tollgate-echo (1 thread, every message echoed) directly, through nginx (proxy_pass with the
# Upgrade and Connection headers set) and through Tollgate (a /ws/ route of the `websocket`
# category, limits that never reject). Cases:
#   - messages/s through 1 and 64 connections, 64 B and 16 KiB messages, 16 in flight per
#     connection, and the proxy's CPU time per message over the same interval;
#   - round trip p99 at 10 000 messages/s paced over 16 connections, and that p99 less the
#     direct path's (what the proxy adds);
#   - resident memory per idle WebSocket connection: the proxy's RSS (nginx: master and
#     workers) with N idle connections open less its RSS before, / N.
# A Tollgate that refuses the upgrade (no WebSocket support yet) gets n/a in its column.
#
# The upstream must send small messages at once (TCP_NODELAY): without it, a reply written while
# the previous one is unacknowledged waits for the peer's delayed ACK, which comes with the
# client's next message on that connection (1.6 ms at 10 000/s over 16 connections) or after
# 40 ms. The script warns when a p50 at 10 000/s exceeds 1 ms: such figures measure that.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-5}"
workers="${TOLLGATE_BENCH_WORKERS:-1}"
rounds="${TOLLGATE_BENCH_ROUNDS:-1}"
idle_n="${TOLLGATE_BENCH_IDLE:-10000}"
pin="${TOLLGATE_BENCH_PIN:-1}"
build="${TOLLGATE_BENCH_BUILD:-build}"

source bench/common.sh
if [ "$build" = build ]; then
  bench_setup nginx-light
else # bench_setup's steps, on another build tree and only the three programs used here
  tollgate_packages+=(nginx-light)
  install_deps >&2
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" --target tollgate tollgate-echo tollgate_ws_load >/dev/null
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
fi
load="$build/bench/tollgate_ws_load"
[ -x "$load" ] || { echo "$load missing (bench/ needs libbenchmark-dev to be configured)" >&2; exit 1; }

# 10 000 idle connections take 10 000 descriptors in the client and the echo and 20 000 in a
# proxy (nginx: worker_rlimit_nofile below). Where the hard limit is lower (a container), the
# idle case opens what fits in it and says so.
idle_note=""
if ! ulimit -n 65536 2>/dev/null; then
  ulimit -n "$(ulimit -Hn)"
  fit=$((($(ulimit -n) - 200) / 2))
  if [ "$idle_n" -gt "$fit" ]; then
    idle_note=" (ulimit -n is at most $(ulimit -n) here: $fit, not $idle_n)"
    idle_n=$fit
  fi
fi

# Pinning: a proxy alone on CPU 1, the client and the echo on CPU 0, so the proxies compete
# with the same load generator and never with it for their core.
proxy_cpu=() client_cpu=() placement="unpinned, everything shares $(nproc) cores"
if [ "$pin" = 1 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  proxy_cpu=(taskset -c 1) client_cpu=(taskset -c 0)
  placement="pinned: proxy on CPU 1, client and echo on CPU 0 of $(nproc)"
fi
load_before="$(uptime | sed 's/.*load average: //'), $(pgrep -c cc1plus || true) compilers running"

up=$(free_port); ng=$(free_port); tg=$(free_port)
echo_bin="${TOLLGATE_BENCH_ECHO:-$build/tollgate-echo}"
"${client_cpu[@]}" "$echo_bin" --port "$up" --threads 1 >/dev/null & pids+=($!)
wait_port "$up"

cat > "$work/nginx.conf" <<NGINX
worker_processes $workers;
worker_rlimit_nofile 65536;
pid $work/nginx.pid;
error_log $work/nginx.err warn;
events { worker_connections 30000; }
http {
  access_log off;
  upstream app { server 127.0.0.1:$up; }
  server {
    listen 127.0.0.1:$ng reuseport;
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Upgrade \$http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_read_timeout 300s;
      proxy_send_timeout 300s;
    }
  }
}
NGINX
"${proxy_cpu[@]}" nginx -p "$work" -c "$work/nginx.conf" -g 'daemon off;' & ngx=$!; pids+=($ngx)

# Tollgate: the open general category of the HTTP benchmark plus a websocket category that
# never rejects an upgrade or a message.
{
  cat bench/open-policy.yaml
  cat <<YAML
  websocket:
    limits:
      ipv4_individual: { short: { rate: 1000000/s, burst: 1000000 }, long: { rate: 1000000000/h, burst: 1000000 } }
      ipv4_network:    { short: { rate: 1000000/s, burst: 1000000 }, long: { rate: 1000000000/h, burst: 1000000 } }
    websocket:
      max_message_size: 1MiB
      messages: { rate: 1000000/s, burst: 1000000, cost: per_message }
      max_connections_per_address: 100000
YAML
} > "$work/policy.yaml"
cat > "$work/tollgate.yaml" <<YAML
listeners: [{ name: public, address: 127.0.0.1, port: $tg }]
admin: { address: 127.0.0.1, port: 0 }
workers: $workers
limits: { max_connections: 100000, max_connections_per_address: 100000 }
upstreams: { app: { endpoints: ["127.0.0.1:$up"] } }
routes:
  - { match: { path_prefix: /ws/, header: { Upgrade: websocket } }, category: websocket, upstream: app }
default_route: { category: general, upstream: app }
policies: [$work/policy.yaml]
logging: { level: warn }
YAML
"$build/tollgate" --check-config "$work/tollgate.yaml" >&2
"${proxy_cpu[@]}" "$build/tollgate" --config "$work/tollgate.yaml" >"$work/tollgate.log" 2>&1 & tgp=$!
pids+=($tgp)
wait_port "$ng"
wait_port "$tg"
ngx_all="$ngx,$(pgrep -P "$ngx" | paste -sd,)"

declare -A port_of=([direct]=$up [nginx]=$ng [tollgate]=$tg)
declare -A cpu_of=([direct]=${pids[0]} [nginx]=$ngx_all [tollgate]=$tgp)
declare -A result  # target|case|round -> value (n/a when the run failed)
details="$work/details"
: > "$details"

# "key=value" of a tollgate_ws_load line.
field() {
  awk -v k="$1" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) { print substr($i, length(k) + 2); exit } }' <<<"$2"
}
# Runs tollgate_ws_load against a target; its line goes to the details, and on failure its
# first errors too. Prints the line, or nothing if the run failed.
drive() { # target label args...
  local target=$1 label=$2 out err
  shift 2
  if out=$("${client_cpu[@]}" "$load" "$@" --port "${port_of[$target]}" 2>"$work/err"); then
    printf '%-9s %-16s %s\n' "$target" "$label" "$out" >>"$details"
    echo "$out"
  else
    err=$(head -3 "$work/err" | tr '\n' ' ')
    printf '%-9s %-16s FAILED: %s %s\n' "$target" "$label" "$out" "$err" >>"$details"
  fi
}

# Does Tollgate relay WebSocket yet? One short exchange.
targets=(direct nginx tollgate)
if ! "${client_cpu[@]}" "$load" throughput --port "$tg" --connections 1 --seconds 0.3 \
     --warmup 0 >/dev/null 2>"$work/probe.err"; then
  targets=(direct nginx)
fi
# Warm every path.
for t in "${targets[@]}"; do drive "$t" warm-up throughput --connections 8 --seconds 1 --warmup 0 >/dev/null; done
: > "$details"
[ "${#targets[@]}" -eq 3 ] ||
  echo "tollgate: WebSocket not relayed, column n/a: $(head -1 "$work/probe.err")" >>"$details"

cases=("1 64" "64 64" "1 16384" "64 16384")
case_label() { # connections size
  if [ "$2" -ge 1024 ]; then echo "$1 conn $(($2 / 1024)) KiB"; else echo "$1 conn $2 B"; fi
}
for round in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    read -r conns size <<<"$c"
    for t in "${targets[@]}"; do
      line=$(drive "$t" "$(case_label $conns $size)" throughput --connections "$conns" --size "$size" \
             --seconds "$duration" --cpu-pids "${cpu_of[$t]}")
      result[$t|$c|$round]=$(field 'messages/s' "$line")
      result[$t|cpu $c|$round]=$(field cpu_us_per_message "$line")
    done
  done
  for t in "${targets[@]}"; do
    line=$(drive "$t" "10k msg/s" latency --rate 10000 --connections 16 --size 64 --seconds "$duration")
    result[$t|p99|$round]=$(field p99_us "$line")
    result[$t|p50|$round]=$(field p50_us "$line")
  done
done

# Memory per idle connection: RSS (KiB) of the proxy's processes before and with N idle
# connections open (3 s after the last opened), / N. A first 100 connections warm the path
# (Tollgate's limiter tables are mapped with MADV_HUGEPAGE: the first key in a 2 MiB page
# costs 2 MiB).
rss_kib() { local s=0 p; for p in ${1//,/ }; do s=$((s + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status"))); done; echo $s; }
idle_kib() { # target
  local t=$1 before after="" rc=0 lp
  "${client_cpu[@]}" "$load" idle --port "${port_of[$t]}" --connections 100 --hold 0 >/dev/null 2>&1 || true
  sleep 2
  before=$(rss_kib "${cpu_of[$t]}")
  "${client_cpu[@]}" "$load" idle --port "${port_of[$t]}" --connections "$idle_n" --hold 6 \
    >"$work/idle.out" 2>"$work/idle.err" & lp=$!
  for _ in $(seq 1200); do
    grep -q '^open' "$work/idle.out" && break
    kill -0 "$lp" 2>/dev/null || break
    sleep 0.1
  done
  if grep -q '^open' "$work/idle.out"; then sleep 3; after=$(rss_kib "${cpu_of[$t]}"); fi
  wait "$lp" || rc=$?
  printf '%-9s %-16s RSS before %s KiB, with %s open %s KiB; %s %s\n' "$t" "idle" "$before" \
    "$idle_n" "${after:-?}" "$(tr '\n' ' ' <"$work/idle.out")" "$(head -3 "$work/idle.err" | tr '\n' ' ')" >>"$details"
  [ "$rc" -eq 0 ] && [ -n "$after" ] && awk -v a="$after" -v b="$before" -v n="$idle_n" \
    'BEGIN { printf "%.2f", (a - b) / n }'
}
for t in "${targets[@]}"; do
  [ "$t" = direct ] && continue
  result[$t|idle|1]=$(idle_kib "$t" || true)
done
load_after="$(uptime | sed 's/.*load average: //'), $(pgrep -c cc1plus || true) compilers running"

# The median over rounds of a cell; n/a if a round failed.
cell() { # target key [rounds]
  local n=${3:-$rounds} r v vals=()
  for r in $(seq "$n"); do
    v=${result[$1|$2|$r]:-}
    [ -n "$v" ] || { echo n/a; return; }
    vals+=("$v")
  done
  printf '%s\n' "${vals[@]}" | sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2fx", a / b }'; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a") print "n/a"; else printf "%.0f", a - b }'; }
fmt() { awk -v v="$1" -v d="${2:-0}" 'BEGIN { if (v == "n/a" || v == "-") print v; else printf "%.*f", d, v }'; }
row() { printf '%-34s %12s %12s %12s %15s\n' "$@"; }

echo
echo "== WebSocket benchmark: tollgate_ws_load, ${duration} s per case, $rounds round(s), $(date -u +%F)"
echo "   $workers worker(s) each (nginx worker_processes $workers, Tollgate workers: $workers), $(basename "$echo_bin") --threads 1, $placement"
echo "   load average before: $load_before; after: $load_after"
row "" direct nginx tollgate tollgate/nginx
for c in "${cases[@]}"; do
  read -r conns size <<<"$c"
  d=$(cell direct "$c") n=$(cell nginx "$c") g=$(cell tollgate "$c")
  row "$(case_label $conns $size), messages/s" "$(fmt "$d")" "$(fmt "$n")" "$(fmt "$g")" "$(ratio "$g" "$n")"
done
d=$(cell direct p99) n=$(cell nginx p99) g=$(cell tollgate p99)
row "p99 at 10k msg/s, us" "$(fmt "$d")" "$(fmt "$n")" "$(fmt "$g")" "$(ratio "$g" "$n")"
an=$(minus "$n" "$d") ag=$(minus "$g" "$d")
row "added p99 at 10k msg/s, us" - "$an" "$ag" "$(ratio "$ag" "$an")"
n=$(cell nginx idle 1) g=$(cell tollgate idle 1)
row "KiB per idle connection ($idle_n)" - "$(fmt "$n" 2)" "$(fmt "$g" 2)" "$(ratio "$g" "$n")"
echo
echo "CPU us per message (direct: the echo itself; nginx, tollgate: the proxy)"
for c in "${cases[@]}"; do
  read -r conns size <<<"$c"
  d=$(cell direct "cpu $c") n=$(cell nginx "cpu $c") g=$(cell tollgate "cpu $c")
  row "$(case_label $conns $size)" "$(fmt "$d" 2)" "$(fmt "$n" 2)" "$(fmt "$g" 2)" "$(ratio "$g" "$n")"
done
echo
[ -z "$idle_note" ] || echo "idle connections$idle_note"
for t in "${targets[@]}"; do
  p50=$(cell "$t" p50)
  if awk -v p="$p50" 'BEGIN { exit !(p != "n/a" && p > 1000) }'; then
    echo "WARNING: $t p50 at 10k msg/s is $p50 us: replies waited for ACKs (an upstream without TCP_NODELAY?); the latency rows measure that, not the proxy"
  fi
done
echo "targets: messages/s tollgate/nginx >= 1.0x; added p99 <= 1000 us; <= 16 KiB per idle connection"
echo
echo "runs:"
cat "$details"
