#!/usr/bin/env bash
# User-space instructions and system calls per proxied request (bench/README's method): a
# 1-worker Tollgate under callgrind, counters zeroed after a warm-up, wrk for SECONDS, total
# instructions / requests; then the same gateway without valgrind under strace -c for system
# calls per request. Steady where wall-clock times are not.
#
#   bash bench/instructions.sh [SECONDS] [TOLLGATE_BINARY]   (defaults: 10, build/tollgate)
#   CALLGRIND_KEEP=DIR bash bench/instructions.sh ...        (keeps the profile parts)
#   TOLLGATE_BENCH_REDIS=1 bash bench/instructions.sh ...    (store: redis, a local redis-server)
#   TOLLGATE_BENCH_LIMITED=1 bash bench/instructions.sh ...  (the 429 path: every request past
#                                                            the warm-up is rejected)
#   TOLLGATE_BENCH_LADDER=1 bash bench/instructions.sh ...   (the penalty ladder on, docs/design.md
#     §16: before each run the client earns a point on another category, so that every measured
#     request finds it on the warn step: a table lookup and X-RateLimit-Warning)
#   TOLLGATE_BENCH_ATTACK=normal|elevated|severe ...          (attack mode, docs/design.md §16, on the
#     measured category, forced to that level through the admin API before each run: elevated
#     scales every request's limits; severe refuses the client, which is not admitted, with 503)
#   TOLLGATE_BENCH_TOKEN=plain|verified|keyed|tiered ...       (docs/design.md §15: every request
#     carries one ES256 token made by python3-jwt; plain: no identity configured (the same
#     request, unkeyed); verified: identity.jwt verifies it (cached after the first); keyed: and
#     a limit keyed on its sub claim; tiered: and tiers from its plan claim)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
binary="$(realpath "${2:-build/tollgate}")"
source bench/common.sh
bench_setup wrk valgrind strace

up=$(free_port)
build/tollgate-echo --port "$up" --threads 2 >/dev/null & pids+=($!)
wait_port "$up"
policy="$PWD/bench/open-policy.yaml"
# The 429 path: every request past the warm-up is rejected.
if [ -n "${TOLLGATE_BENCH_LIMITED:-}" ]; then policy="$PWD/bench/limited-policy.yaml"; fi
open_gateway_yaml "$up" 1 "$work/gateway.yaml" "$policy"
if [ -n "${TOLLGATE_BENCH_REDIS:-}" ]; then
  rd=$(free_port)
  redis-server --port "$rd" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --dir "$work" >"$work/redis-server.log" 2>&1 & pids+=($!)
  wait_port "$rd"
  echo "store: { type: redis, address: \"127.0.0.1:$rd\", timeout: 1s, fail_mode: closed }" >>"$work/gateway.yaml"
fi
url_path=/api/profiles/x
wrk_header=()
if [ -n "${TOLLGATE_BENCH_TOKEN:-}" ]; then
  /usr/bin/python3 - "$work" <<'PY'
import json, sys, time
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
key = ec.generate_private_key(ec.SECP256R1())
jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
jwk["kid"] = "bench"
open(sys.argv[1] + "/jwks.json", "w").write(json.dumps({"keys": [jwk]}))
token = jwt.encode({"sub": "bench-user", "plan": "premium", "iss": "https://id.bench/",
                    "aud": "api", "exp": int(time.time()) + 3600}, key, algorithm="ES256",
                   headers={"kid": "bench"})
open(sys.argv[1] + "/token", "w").write(token)
PY
  wrk_header=(-H "Authorization: Bearer $(cat "$work/token")")
  if [ "$TOLLGATE_BENCH_TOKEN" != plain ]; then
    cat >>"$work/gateway.yaml" <<YAML
identity:
  jwt: { jwks_file: $work/jwks.json, algorithms: [ES256], issuer: "https://id.bench/", audience: api }
YAML
  fi
  if [ "$TOLLGATE_BENCH_TOKEN" = keyed ] || [ "$TOLLGATE_BENCH_TOKEN" = tiered ]; then
    # The open policy plus a limit on the token's subject that never binds.
    awk '{print} /^  general:/ {g=1} g && /^    limits:/ {print "      per_user: { key: { jwt_claim: sub }, short: { rate: 1000000/s, burst: 1000000 } }"; g=0}' \
      "$policy" >"$work/policy.yaml"
    if [ "$TOLLGATE_BENCH_TOKEN" = tiered ]; then
      printf 'tiers:\n  multipliers: { free: 1, premium: 3 }\n  default: free\n  from: [ { jwt_claim: plan } ]\n' \
        >>"$work/policy.yaml"
    fi
    sed -i "s|^policies: .*|policies: [$work/policy.yaml]|" "$work/gateway.yaml"
  fi
fi

# The ladder: its client on the warn step before each measured run.
earn_point() { :; }
if [ -n "${TOLLGATE_BENCH_LADDER:-}" ]; then
  cp "$policy" "$work/ladder-policy.yaml"
  cat >>"$work/ladder-policy.yaml" <<'YAML'
  penalized:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
penalties:
  points: { rate_limited: 1 }
  decay: 1/1h
  steps:
    - { at: 1, action: warn }
    - { at: 1000000, action: ban, for: 1h }
YAML
  sed -i "s|^policies: .*|policies: [$work/ladder-policy.yaml]|" "$work/gateway.yaml"
  echo 'routes: [{ match: { path_prefix: /penalized }, category: penalized, upstream: app }]' \
    >>"$work/gateway.yaml"
  earn_point() {
    for _ in 1 2; do curl -s -o /dev/null "http://127.0.0.1:$1/penalized"; done
    curl -s -D - -o /dev/null "http://127.0.0.1:$1$url_path" | grep -qi '^x-ratelimit-warning: warn' ||
      { echo "the client is not on the warn step" >&2; exit 1; }
  }
fi

# Attack mode: the category's level forced before each measured run.
force_level() { :; }
if [ -n "${TOLLGATE_BENCH_ATTACK:-}" ]; then
  src=$(sed -n 's|^policies: \[\(.*\)\]$|\1|p' "$work/gateway.yaml")
  cp "$src" "$work/attack-policy.yaml"
  cat >>"$work/attack-policy.yaml" <<'YAML'
    attack_mode:
      baseline: { floor: 1000000/s }
      levels:
        elevated: { above: 2x, limits: 0.75 }
        severe:   { above: 10x, admit: [allowed] }
YAML
  # The attack_mode block must sit under general: it is the last category of the bench policies.
  sed -i "s|^policies: .*|policies: [$work/attack-policy.yaml]|" "$work/gateway.yaml"
  force_level() {
    local admin
    for _ in $(seq 100); do grep -q "admin listening on" "$1" && break; sleep 0.1; done
    admin=$(grep "admin listening on" "$1" | sed 's/.*:\([0-9]*\)$/\1/')
    curl -sf -X PUT -d "{\"category\":\"general\",\"level\":\"$TOLLGATE_BENCH_ATTACK\"}" \
      "http://127.0.0.1:$admin/admin/attack-mode" >/dev/null ||
      { echo "cannot force $TOLLGATE_BENCH_ATTACK" >&2; exit 1; }
  }
fi

valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$binary" \
  --config "$work/gateway.yaml" >"$work/cg.log" 2>&1 & cg=$!; pids+=($cg)
port=$(public_port "$work/cg.log" 200)
earn_point "$port"
force_level "$work/cg.log"
wrk -t1 -c16 -d3s "${wrk_header[@]}" "http://127.0.0.1:$port$url_path" >/dev/null 2>&1
callgrind_control -z "$cg" >/dev/null
requests=$(wrk -t1 -c16 -d"${seconds}s" "${wrk_header[@]}" "http://127.0.0.1:$port$url_path" |
  awk '/requests in/ {print $1}')
callgrind_control -d "$cg" >/dev/null
kill "$cg"; wait "$cg" 2>/dev/null || true
ir=$(cat "$work"/cg.out* | awk '/^summary:/ {s += $2} END {print s}')
# CALLGRIND_KEEP=DIR keeps the profile parts, for callgrind_annotate (where the instructions go).
if [ -n "${CALLGRIND_KEEP:-}" ]; then mkdir -p "$CALLGRIND_KEEP" && cp "$work"/cg.out* "$CALLGRIND_KEEP"/; fi
printf 'instructions per request: %.0f  (%s requests under callgrind)\n' \
  "$(awk -v i="$ir" -v n="$requests" 'BEGIN {print i / n}')" "$requests"

"$binary" --config "$work/gateway.yaml" >"$work/st.log" 2>&1 & tg=$!; pids+=($tg)
port=$(public_port "$work/st.log")
earn_point "$port"
force_level "$work/st.log"
wrk -t1 -c16 -d2s "${wrk_header[@]}" "http://127.0.0.1:$port$url_path" >/dev/null 2>&1
strace -c -f -p "$tg" -o "$work/strace.txt" & st=$!
sleep 0.5
requests=$(wrk -t1 -c16 -d"${seconds}s" "${wrk_header[@]}" "http://127.0.0.1:$port$url_path" |
  awk '/requests in/ {print $1}')
kill -INT "$st"; wait "$st" 2>/dev/null || true
calls=$(awk '$NF == "total" {print $(NF-2)}' "$work/strace.txt")
printf 'system calls per request: %.2f\n' "$(awk -v c="$calls" -v n="$requests" 'BEGIN {print c / n}')"
awk 'NR > 2 && $NF != "total" && $NF !~ /^-/ && $4 > 0 {printf "  %-14s %s\n", $NF, $4}' \
  "$work/strace.txt" | sort -k2 -n -r | head -8
