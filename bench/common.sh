# Sourced by the bench scripts: installs what they need, builds, and gives them a scratch
# folder, a list of background processes stopped on exit, and loopback port helpers.
#   bench_setup [EXTRA DEBIAN PACKAGES...]
source scripts/deps.sh

bench_setup() {
  tollgate_packages+=("$@")
  install_deps >&2
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build >/dev/null
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${BENCH_KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
}

# A loopback TCP port that was free a moment ago.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    awk 'BEGIN{srand(); print 20000 + int(rand()*20000)}'
}

# CPU time (utime + stime, clock ticks) of a process and its children (nginx's workers).
cpu_ticks() {
  local total=0 pid
  for pid in "$1" $(pgrep -P "$1" || true); do
    [ -r "/proc/$pid/stat" ] || continue
    total=$((total + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat")))
  done
  echo "$total"
}

# Waits until something listens on loopback port $1.
wait_port() {
  for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "port $1 never opened" >&2
  return 1
}

# Writes to $3 the gateway file of the throughput runs: upstream 127.0.0.1:$1, $2 workers,
# bench/open-policy.yaml (every request checked on 2 levels x 2 tiers, none rejected).
open_gateway_yaml() {
  cat > "$3" <<YAML
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: $2
upstreams: { app: { endpoints: ["127.0.0.1:$1"] } }
default_route: { category: general, upstream: app }
policies: [${4:-$PWD/bench/open-policy.yaml}]
YAML
}

# The port of the public listener a tollgate announces in its log $1, once it has (up to
# ${2:-100} tries 0.1 s apart: more under valgrind).
public_port() {
  for _ in $(seq "${2:-100}"); do grep -q "listening on public" "$1" && break; sleep 0.1; done
  grep "listening on public" "$1" | sed 's/.*:\([0-9]*\)$/\1/'
}
