#!/usr/bin/env bash
# The Redis store against the in-process store, in one run on one machine (issue: several
# gateways, one limit), with nginx's limit_req as the reference.
#
#   bash bench/redis.sh [SECONDS] [CONNECTIONS]     (defaults: 10 s, 64 connections)
#   TOLLGATE_BENCH_ROUNDS=N (default 3): rounds of every run, interleaved
#   TOLLGATE_BENCH_BASELINE=path/to/tollgate: also runs the Redis gateways of another build
#     (for example an older commit's) in the same rounds, and prints the ratios to them
#
# wrk (2 threads) drives, in turn: nginx (two limit_req zones per address, nothing rejected);
# Tollgate with store: memory and with store: redis (a local redis-server, no persistence),
# both with 2 levels x 2 tiers per request and nothing rejected, from one address and from
# random addresses of 10.0.0.0/8 (X-Forwarded-For); then the rejection path of both (one
# address far past its limit). Prints requests/s and p50/p99 latency of each, the
# Redis decisions (EVALSHA) and all Redis commands per proxied request and per 429 (INFO
# commandstats; the replicas' standing journal polls with XREAD), the Redis memory a million
# random addresses with a violation each leave behind, and the script alone
# under redis-benchmark (decisions/s and Redis CPU per call, 2 and 4 limits, unpipelined and
# 16 deep).
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-10}"
connections="${2:-64}"
workers="${TOLLGATE_BENCH_WORKERS:-2}"
rounds="${TOLLGATE_BENCH_ROUNDS:-3}"
baseline="${TOLLGATE_BENCH_BASELINE:-}"

source bench/common.sh
bench_setup wrk nginx-light

up=$(free_port); ng=$(free_port); rd=$(free_port)
build/tollgate-echo --port "$up" --threads 2 >/dev/null & pids+=($!)
redis-server --port "$rd" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  --dir "$work" >"$work/redis-server.log" 2>&1 & pids+=($!)
wait_port "$up"
wait_port "$rd"
rcli() { redis-cli -p "$rd" "$@"; }

cat > "$work/nginx.conf" <<NGINX
worker_processes $workers;
pid $work/nginx.pid;
error_log $work/nginx.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  limit_req_zone \$binary_remote_addr zone=individual:16m rate=1000000r/s;
  limit_req_zone \$binary_remote_addr zone=network:16m rate=1000000r/s;
  upstream app { server 127.0.0.1:$up; keepalive 64; }
  server {
    listen 127.0.0.1:$ng reuseport;
    location / {
      limit_req zone=individual burst=1000000 nodelay;
      limit_req zone=network burst=1000000 nodelay;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
  }
}
NGINX
nginx -p "$work" -c "$work/nginx.conf" -g 'daemon off;' & pids+=($!)

declare -A port pid
tollgate_conf() { # name policy store [binary]
  cat > "$work/$1.yaml" <<YAML
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: $workers
trusted_proxies: [127.0.0.1/32]
upstreams: { app: { endpoints: ["127.0.0.1:$up"], max_idle_connections: 64 } }
default_route: { category: general, upstream: app }
policies: [$2]
store: $3
logging: { level: info }
YAML
  "${4:-build/tollgate}" --config "$work/$1.yaml" >"$work/$1.log" 2>&1 & pids+=($!)
  pid[$1]=$!
}
# The two Redis gateways have different policies for one category: their keys must differ.
redis_store() { echo "{ type: redis, address: \"127.0.0.1:$rd\", timeout: 50ms, fail_mode: closed, key_prefix: \"$1\" }"; }
tollgate_conf memory "$PWD/bench/open-policy.yaml" "{ type: memory }"
tollgate_conf redis "$PWD/bench/open-policy.yaml" "$(redis_store open:)"
tollgate_conf memory_429 "$PWD/bench/limited-policy.yaml" "{ type: memory }"
tollgate_conf redis_429 "$PWD/bench/limited-policy.yaml" "$(redis_store limited:)"
if [ -n "$baseline" ]; then
  tollgate_conf redis_base "$PWD/bench/open-policy.yaml" "$(redis_store base-open:)" "$baseline"
  tollgate_conf redis_429_base "$PWD/bench/limited-policy.yaml" "$(redis_store base-limited:)" "$baseline"
fi
# Memory: a gateway whose keys live a minute (1/m, burst 1 per address), and whose upstream
# reports a violation on every request (tollgate-echo's ?violation=): each goes into the
# replicas' standing journal, one in three bans for 10 s.
cat > "$work/expiry.yaml" <<YAML
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 1 } }
      ipv4_network:    { short: { rate: 1000000/m, burst: 1000000 } }
violations:
  abuse: { levels: [individual], ban: { threshold: 3, duration: 10s, max_duration: 10s } }
YAML
tollgate_conf redis_expiry "$work/expiry.yaml" "$(redis_store expiry:)"
# Many clients: every request from a random address of 10.0.0.0/8 (X-Forwarded-For from the
# trusted loopback), so that nearly every decision reads and writes keys of its own.
# Each wrk thread seeds its own generator (by thread and by second: wrk's threads would
# otherwise draw the same addresses, and so would each run).
cat > "$work/many.lua" <<'LUA'
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end
function init(args)
  math.randomseed(os.time() * 7919 + id * 104729)
end
request = function()
  local n = math.random(0, 16777215)
  local a = "10." .. math.floor(n / 65536) .. "." .. (math.floor(n / 256) % 256) .. "." .. (n % 256)
  return wrk.format(nil, nil, { ["X-Forwarded-For"] = a })
end
LUA
pid[nginx]=${pids[2]}; port[nginx]=$ng
gateways=(memory redis memory_429 redis_429 redis_expiry)
[ -n "$baseline" ] && gateways+=(redis_base redis_429_base)
for name in "${gateways[@]}"; do port[$name]=$(public_port "$work/$name.log"); done
many=(memory redis)
[ -n "$baseline" ] && many+=(redis_base)
for name in "${many[@]}"; do pid[${name}_many]=${pid[$name]}; port[${name}_many]=${port[$name]}; done
wait_port "$ng"

evalsha_calls() { rcli info commandstats | awk -F'[=,:]' '/^cmdstat_evalsha:/ { print $3; found = 1 } END { if (!found) print 0 }'; }
# Every command but the INFO that asks.
all_calls() { rcli info commandstats | awk -F'[=,:]' '/^cmdstat_/ && !/^cmdstat_info:/ { n += $3 } END { print n + 0 }'; }
# wrk -> "rps p50 p99 non2xx cpu_us_per_request requests redis_calls all_redis_commands"
measure() { # name
  local before after calls_before calls_after all_before all_after
  before=$(cpu_ticks "${pid[$1]}")
  calls_before=$(evalsha_calls)
  all_before=$(all_calls)
  local script=()
  case $1 in *_many) script=(-s "$work/many.lua") ;; esac
  wrk -t2 -c"$connections" -d"${duration}s" --latency "${script[@]}" "http://127.0.0.1:${port[$1]}/api/profiles/x" >"$work/wrk.out" 2>&1
  calls_after=$(evalsha_calls)
  all_after=$(all_calls)
  after=$(cpu_ticks "${pid[$1]}")
  awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v secs="$duration" \
      -v calls=$((calls_after - calls_before)) -v all=$((all_after - all_before)) \
    'function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
     /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) } /^Requests\/sec/ { rps = $2 }
     /requests in/ { n = $1 } /Non-2xx/ { non2xx = $NF }
     END { printf "%.0f %.3f %.3f %s %.1f %d %d %d\n", rps, p50, p99, (non2xx == "" ? 0 : non2xx),
                  (rps > 0 ? ticks / hz * 1e6 / (rps * secs) : 0), n, calls, all }' "$work/wrk.out"
}
for name in nginx memory redis; do wrk -t1 -c8 -d1s "http://127.0.0.1:${port[$name]}/" >/dev/null 2>&1 || true; done
# The flooding address: spend its burst before measuring.
flooded=(memory_429 redis_429)
[ -n "$baseline" ] && flooded+=(redis_429_base)
for name in "${flooded[@]}"; do wrk -t1 -c4 -d1s "http://127.0.0.1:${port[$name]}/" >/dev/null 2>&1 || true; done

declare -A result
targets=(nginx memory redis memory_many redis_many memory_429 redis_429)
[ -n "$baseline" ] && targets+=(redis_base redis_base_many redis_429_base)
for round in $(seq "$rounds"); do
  for target in "${targets[@]}"; do result[$target.$round]=$(measure "$target"); done
done

echo
echo "== redis store benchmark: wrk -t2 -c$connections -d${duration}s, $workers workers each, $(nproc) cores, redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(date -u +%F)"
printf '%-28s %12s %9s %9s %9s %11s %14s %14s\n' "" "requests/s" "p50 ms" "p99 ms" "non-2xx" "CPU us/req" "decisions/req" "commands/req"
for target in "${targets[@]}"; do
  for round in $(seq "$rounds"); do
    read -r rps p50 p99 bad cpu n calls all <<<"${result[$target.$round]}"
    printf '%-28s %12s %9s %9s %9s %11s %14s %14s\n' "$target (round $round)" "$rps" "$p50" "$p99" "$bad" "$cpu" \
      "$(awk -v c="$calls" -v n="$n" 'BEGIN { printf "%.4f", (n > 0 ? c / n : 0) }')" \
      "$(awk -v c="$all" -v n="$n" 'BEGIN { printf "%.4f", (n > 0 ? c / n : 0) }')"
  done
done
median_ratio() { # field target-a target-b
  for r in $(seq "$rounds"); do
    read -r -a x <<<"${result[$2.$r]}"
    read -r -a y <<<"${result[$3.$r]}"
    awk -v a="${x[$1]}" -v b="${y[$1]}" 'BEGIN { printf "%.4f\n", a / b }'
  done | sort -n | awk '{ v[NR] = $1 } END { printf "%.2fx", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
median_diff() { # field target-a target-b  (a - b)
  for r in $(seq "$rounds"); do
    read -r -a x <<<"${result[$2.$r]}"
    read -r -a y <<<"${result[$3.$r]}"
    awk -v a="${x[$1]}" -v b="${y[$1]}" 'BEGIN { printf "%.3f\n", a - b }'
  done | sort -n | awk '{ v[NR] = $1 } END { printf "%.3f ms", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo
echo "proxied throughput redis / memory, median of rounds:  $(median_ratio 0 redis memory)"
echo "proxied throughput redis / nginx, median of rounds:   $(median_ratio 0 redis nginx)"
echo "p99 added by redis (redis - memory), median:          $(median_diff 2 redis memory)"
echo "many addresses: throughput redis / memory, median:    $(median_ratio 0 redis_many memory_many)"
echo "many addresses: p99 added by redis, median:           $(median_diff 2 redis_many memory_many)"
echo "429 rate of one flooding address redis / memory:      $(median_ratio 0 redis_429 memory_429)"
if [ -n "$baseline" ]; then
  echo "against the baseline build ($baseline), median of rounds:"
  echo "  proxied throughput:                                 $(median_ratio 0 redis redis_base)"
  echo "  proxied CPU per request:                            $(median_ratio 4 redis redis_base)"
  echo "  many addresses, throughput:                         $(median_ratio 0 redis_many redis_base_many)"
  echo "  429 rate:                                           $(median_ratio 0 redis_429 redis_429_base)"
  echo "  CPU per 429:                                        $(median_ratio 4 redis_429 redis_429_base)"
fi

# Memory: a million requests from random addresses through a Redis gateway whose keys live a
# minute (nearly a million distinct /32 keys and 65 536 /24 keys, each written with its
# expiry), each reporting a violation (a million journal entries, one ban in three), then
# Redis's key count until their tats have passed and Redis has expired them. What stays is the
# journal, trimmed to its bound (docs/replicas.md).
if [ -z "${TOLLGATE_BENCH_SKIP_EXPIRY:-}" ]; then
  rcli flushall >/dev/null
  used_memory() { rcli info memory | awk -F: '/^used_memory_human/ { print $2 }' | tr -d '\r'; }
  journal="{expiry:standing}"
  sent=0 start=$SECONDS
  while [ "$sent" -lt 1000000 ]; do
    n=$(wrk -t2 -c"$connections" -d10s -s "$work/many.lua" "http://127.0.0.1:${port[redis_expiry]}/api/profiles/x?violation=abuse" | awk '/requests in/ { print $1 }')
    sent=$((sent + n))
  done
  peak=$(rcli dbsize)
  memory=$(used_memory)
  entries=$(rcli xlen "$journal")
  journal_bytes=$(rcli memory usage "$journal")
  sending=$((SECONDS - start))
  start=$SECONDS
  while [ "$(rcli dbsize)" -gt 1 ] && [ $((SECONDS - start)) -lt 180 ]; do sleep 1; done
  echo
  echo "expiry: $sent requests from random addresses, each with a violation, in $sending s; $peak keys in Redis then (used_memory $memory; the journal $entries entries, $journal_bytes bytes); $(rcli dbsize) keys $((SECONDS - start)) s later (used_memory $(used_memory); the journal $(rcli xlen "$journal") entries, $(rcli memory usage "$journal") bytes, expiring in $(rcli ttl "$journal") s)"
fi

# The script alone: redis-benchmark's own clients, random addresses (fresh keys: every call
# admits and writes), the arguments the gateway sends for the open policy.
rcli flushall >/dev/null
# The script's text, as compiled in (gateway/store/gcra.lua).
script=$(cat gateway/store/gcra.lua)
sha=$(rcli script load "$script")
# The open policy's limits (kind 0: GCRA; T 1000 ns burst 10^6; T 3600 ns burst 10^6; no delay),
# then per request:
# cost 1, its number of limits, and per limit its key's and its limit's index.
limits_args() { # limits
  local out="$1" k
  for k in $(seq "$1"); do out="$out 0 1000 1000000 3600 1000000 0"; done
  echo "$out"
}
request_args() { # first-key-index limits
  local out="1 $2" k
  for k in $(seq 0 $(($2 - 1))); do out="$out $(($1 + k)) $((k + 1))"; done
  echo "$out"
}
echo
echo "script alone (redis-benchmark -c 50 -n 200000, random addresses: every call admits and writes):"
printf '%-44s %14s %16s\n' "" "decisions/s" "redis us/decision"
run_script() { # label requests-per-call limits-per-request depth
  local keys=() argv=("") r k
  # shellcheck disable=SC2207
  argv+=($(limits_args "$3") "$2")
  for r in $(seq 0 $(($2 - 1))); do
    for k in $(seq 1 "$3"); do keys+=("{n$r:__rand_int__}$k"); done
    # shellcheck disable=SC2207
    argv+=($(request_args $((r * $3 + 1)) "$3"))
  done
  rcli config resetstat >/dev/null
  local rps us
  rps=$(redis-benchmark -p "$rd" -c 50 -n $((200000 / $2)) -r 1000000 -P "$4" --csv \
    evalsha "$sha" "${#keys[@]}" "${keys[@]}" "${argv[@]}" 2>/dev/null | tail -1 | awk -F'","' '{ gsub(/"/, "", $2); print $2 }')
  us=$(rcli info commandstats | awk -F'[=,]' '/^cmdstat_evalsha:/ { print $6 }')
  printf '%-44s %14.0f %16.2f\n' "$1" "$(awk -v r="$rps" -v n="$2" 'BEGIN { print r * n }')" \
    "$(awk -v u="$us" -v n="$2" 'BEGIN { print u / n }')"
}
run_script "2 limits, 1 request per call" 1 2 1
run_script "2 limits, 1 request per call, pipeline 16" 1 2 16
run_script "4 limits, 1 request per call" 1 4 1
run_script "4 limits, 1 request per call, pipeline 16" 1 4 16
run_script "2 limits, 16 requests per call (a batch)" 16 2 1
