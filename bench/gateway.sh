#!/usr/bin/env bash
# Tollgate against nginx, in one run on one machine (issue: the gateway at nginx speed).
#
#   bash bench/gateway.sh [SECONDS] [CONNECTIONS]     (defaults: 10 s, 64 connections)
#   TOLLGATE_BENCH_ROUNDS=N (default 3): rounds of every run, interleaved
#
# wrk (2 threads) drives, in turn: the upstream directly; nginx as a keep-alive reverse proxy
# with two limit_req zones keyed per address; Tollgate with 2 levels x 2 tiers per request
# (limits high enough that nothing is rejected); and the rejection path of both (one address
# far past its limit). nginx's worker_processes equals Tollgate's workers. Prints requests/s
# and p50/p99 latency for each and the Tollgate/nginx ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-10}"
connections="${2:-64}"
workers="${TOLLGATE_BENCH_WORKERS:-2}"
rounds="${TOLLGATE_BENCH_ROUNDS:-3}"

source bench/common.sh
bench_setup wrk nginx-light

up=$(free_port); ng=$(free_port); ng_limited=$(free_port); tg=$(free_port); tg_limited=$(free_port)
build/tollgate-echo --port "$up" --threads 2 >/dev/null & pids+=($!)
wait_port "$up"

# nginx: two limit_req zones per address, keep-alive to the upstream, no logging.
nginx_conf() { # port rate burst-individual burst-network
  cat <<NGINX
worker_processes $workers;
pid $work/nginx-$1.pid;
error_log $work/nginx-$1.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  limit_req_zone \$binary_remote_addr zone=individual:16m rate=$2;
  limit_req_zone \$binary_remote_addr zone=network:16m rate=$2;
  limit_req_status 429;
  upstream app { server 127.0.0.1:$up; keepalive 64; }
  server {
    listen 127.0.0.1:$1 reuseport;
    location / {
      limit_req zone=individual burst=$3 nodelay;
      limit_req zone=network burst=$4 nodelay;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_request_buffering off;   # stream request bodies, as Tollgate does
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Real-IP \$remote_addr;
    }
  }
}
NGINX
}
# Open: nginx counts in whole milliseconds, so a large burst keeps same-millisecond requests in.
nginx_conf "$ng" "1000000r/s" 1000000 1000000 > "$work/nginx.conf"
nginx_conf "$ng_limited" "1r/m" 50 250 > "$work/nginx-limited.conf"
for c in nginx nginx-limited; do
  nginx -p "$work" -c "$work/$c.conf" -g 'daemon off;' & pids+=($!)
done

# Tollgate: the same two-level shape, 2 tiers each.
tollgate_conf() { # port policy
  cat <<YAML
listeners: [{ name: public, address: 127.0.0.1, port: $1 }]
admin: { address: 127.0.0.1, port: 0 }
workers: $workers
upstreams: { app: { endpoints: ["127.0.0.1:$up"], max_idle_connections: 64 } }
default_route: { category: general, upstream: app }
policies: [$2]
logging: { level: warn }
YAML
}
tollgate_conf "$tg" "$PWD/bench/open-policy.yaml" > "$work/tollgate.yaml"
tollgate_conf "$tg_limited" "$PWD/bench/limited-policy.yaml" > "$work/tollgate-limited.yaml"
for c in tollgate tollgate-limited; do
  build/tollgate --config "$work/$c.yaml" >"$work/$c.log" 2>&1 & pids+=($!)
done
for p in "$ng" "$ng_limited" "$tg" "$tg_limited"; do wait_port "$p"; done

# wrk's summary -> "rps p50 p99 non2xx cpu_us_per_request" (latencies in ms); $2 is the pid of
# the process under test, whose CPU time per request is measured over the run; $3 the request
# (small: a small GET; download: 100 KB responses; upload: 100 KB request bodies).
echo 'wrk.method = "POST"; wrk.body = string.rep("a", 100000)' > "$work/upload.lua"
measure() {
  local before after args=("http://127.0.0.1:$1/api/profiles/x")
  case $3 in
    download) args=("http://127.0.0.1:$1/api/files/x?size=100000") ;;
    upload) args=(-s "$work/upload.lua" "http://127.0.0.1:$1/api/upload") ;;
  esac
  before=$(cpu_ticks "$2")
  wrk -t2 -c"$connections" -d"${duration}s" --latency "${args[@]}" >"$work/wrk.out" 2>&1
  after=$(cpu_ticks "$2")
  awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v secs="$duration" \
    'function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
     /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) } /^Requests\/sec/ { rps = $2 }
     /Non-2xx/ { non2xx = $NF }
     END { printf "%.0f %.3f %.3f %s %.1f\n", rps, p50, p99, (non2xx == "" ? 0 : non2xx),
                  (rps > 0 ? ticks / hz * 1e6 / (rps * secs) : 0) }' "$work/wrk.out"
}
# Warm every path (pools, caches), then measure.
for p in "$up" "$ng" "$tg"; do wrk -t1 -c8 -d1s "http://127.0.0.1:$p/" >/dev/null 2>&1 || true; done

declare -A result
targets=(upstream nginx tollgate nginx_429 tollgate_429 nginx_download tollgate_download
         nginx_upload tollgate_upload)
for round in $(seq "$rounds"); do
  for target in "${targets[@]}"; do
    kind=small
    case $target in *_download) kind=download ;; *_upload) kind=upload ;; esac
    case $target in
      upstream) port=$up pid=${pids[0]} ;; nginx) port=$ng pid=${pids[1]} ;;
      tollgate) port=$tg pid=${pids[3]} ;; nginx_429) port=$ng_limited pid=${pids[2]} ;;
      tollgate_429) port=$tg_limited pid=${pids[4]} ;;
      nginx_*) port=$ng pid=${pids[1]} ;; tollgate_*) port=$tg pid=${pids[3]} ;;
    esac
    result[$target.$round]=$(measure "$port" "$pid" "$kind")
  done
done

echo
echo "== gateway benchmark: wrk -t2 -c$connections -d${duration}s, $workers workers each, $(nproc) cores, $(date -u +%F)"
printf '%-26s %12s %10s %10s %10s %12s\n' "" "requests/s" "p50 ms" "p99 ms" "non-2xx" "CPU us/req"
for target in "${targets[@]}"; do
  for round in $(seq "$rounds"); do
    read -r rps p50 p99 bad cpu <<<"${result[$target.$round]}"
    printf '%-26s %12s %10s %10s %10s %12s\n' "$target (round $round)" "$rps" "$p50" "$p99" "$bad" "$cpu"
  done
done
best() { for r in $(seq "$rounds"); do echo "${result[$1.$r]}"; done | sort -n | tail -1; }
read -r n_rps n_p50 n_p99 _ <<<"$(best nginx)"
read -r t_rps t_p50 t_p99 _ <<<"$(best tollgate)"
read -r t429_rps _ _ _ <<<"$(best tollgate_429)"
read -r n429_rps _ _ _ <<<"$(best nginx_429)"
echo
awk -v a="$t_rps" -v b="$n_rps" 'BEGIN { printf "throughput Tollgate / nginx (best rounds):  %.2fx\n", a / b }'
awk -v a="$t_p99" -v b="$n_p99" 'BEGIN { printf "p99 latency Tollgate / nginx:              %.2fx\n", a / b }'
awk -v a="$t429_rps" -v b="$t_rps" 'BEGIN { printf "Tollgate 429 rate / proxied rate:          %.2fx\n", a / b }'
awk -v a="$t429_rps" -v b="$n429_rps" 'BEGIN { printf "429 rate Tollgate / nginx:                 %.2fx\n", a / b }'
mean_cpu() { for r in $(seq "$rounds"); do echo "${result[$1.$r]}"; done | awk '{ s += $5 } END { printf "%.1f", s / NR }'; }
# nginx and Tollgate run back to back within a round: the ratio of each round's pair is less
# exposed to the machine's drift than the best of all rounds.
median_ratio() { # field target-a target-b
  for r in $(seq "$rounds"); do
    read -r -a x <<<"${result[$2.$r]}"
    read -r -a y <<<"${result[$3.$r]}"
    awk -v a="${x[$1]}" -v b="${y[$1]}" 'BEGIN { printf "%.4f\n", a / b }'
  done | sort -n | awk '{ v[NR] = $1 } END { printf "%.2fx", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo "throughput Tollgate / nginx, median of rounds: $(median_ratio 0 tollgate nginx)"
echo "p99 Tollgate / nginx, median of rounds:        $(median_ratio 2 tollgate nginx)"
echo "CPU per request Tollgate / nginx, median:      $(median_ratio 4 tollgate nginx)"
awk -v a="$(mean_cpu tollgate)" -v b="$(mean_cpu nginx)" \
  'BEGIN { printf "CPU per proxied request Tollgate / nginx:  %.2fx (%s / %s us)\n", a / b, a, b }'
for kind in download upload; do
  read -r a _ <<<"$(best tollgate_$kind)"
  read -r b _ <<<"$(best nginx_$kind)"
  awk -v k="$kind" -v a="$a" -v b="$b" 'BEGIN { printf "100 KB %-8s Tollgate / nginx:         %.2fx\n", k, a / b }'
done
