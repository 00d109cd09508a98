#!/usr/bin/env bash
# Throughput of `tollgate simulate` (docs/design.md §13: >= 1 million log lines a second on one core for
# Tollgate's text log): writes LINES-line logs in the three formats with bench/sim_log.py (kept
# in build/bench-sim/ for the next run), replays each RUNS times through config/gateway.yaml
# and policies/default.yaml, and prints lines/s of each run (wall time of the whole command:
# mapping, indexing, sorting, replaying, reporting; and its CPU time). Run it on a quiet
# machine: it is one core.
#   usage: bench/simulate.sh [LINES] [RUNS] [BUILD_DIR]      (defaults 5000000 3 build)
set -euo pipefail
cd "$(dirname "$0")/.."
lines="${1:-5000000}"
runs="${2:-3}"
build="${3:-build}"
tollgate="$build/tollgate"
[ -x "$tollgate" ] || { echo "no $tollgate: build it first (scripts/run.sh or cmake)" >&2; exit 1; }
work="$build/bench-sim"
mkdir -p "$work"
for format in text json nginx; do
  log="$work/$format-$lines.log"
  if [ ! -s "$log" ]; then
    echo "writing $log ..." >&2
    python3 bench/sim_log.py "$format" "$lines" "$log.part"
    mv "$log.part" "$log"
  fi
done
echo "tollgate simulate, $lines lines per log, $(date -u +%Y-%m-%d), $(nproc) CPUs:" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
for format in text json nginx; do
  log="$work/$format-$lines.log"
  for run in $(seq "$runs"); do
    # One core: taskset pins the whole process (it has one thread anyway). The CPU time (user +
    # system) is printed too: on a machine that is not quiet it is the figure to trust.
    start=$(date +%s.%N)
    TIMEFORMAT="%U %S"
    { time taskset -c 0 "$tollgate" simulate --config config/gateway.yaml --log "$log" \
        >"$work/out.txt" 2>/dev/null; } 2>"$work/time.txt"
    end=$(date +%s.%N)
    python3 - "$format" "$run" "$lines" "$start" "$end" "$work/time.txt" <<'EOF'
import sys
fmt, run, lines = sys.argv[1], sys.argv[2], int(sys.argv[3])
wall = float(sys.argv[5]) - float(sys.argv[4])
user, system = (float(x) for x in open(sys.argv[6]).read().split()[-2:])
print(f"{fmt:6s} run {run}: {wall:6.2f} s wall {lines / wall:12,.0f} lines/s;"
      f" {user + system:6.2f} s CPU {lines / (user + system):12,.0f} lines/s")
EOF
  done
done
