#!/usr/bin/env bash
# Hash rates of the proof-of-work solvers a client has (issue 13, part 3), one core each:
#   bash bench/pow_solvers.sh [BUILD_DIR]
# TOLLGATE_BENCH_ROUNDS (default 3): rounds, the median is shown; TOLLGATE_BENCH_CPU (default
# the last core): the core every solver is pinned to with taskset. With BUILD_DIR the gateway
# is not built (it needs `tollgate pow solve` only); without it build/ is, as by the other
# bench scripts.
#
# Each round gives every solver the same fresh challenges (94 random base64url characters, as
# long as the gateway's): 16 at 16 bits and 4 at 20 bits, about 5 million hashes (a quarter of
# them for WebCrypto in Node). A solver's
# rate is the nonces it tried (every solver here counts up from its first nonce, so the winning
# nonce says how many) over the CPU time its processes took, less their start-up (the same
# process without a challenge). On a quiet core that is the wall time; on a VM whose other core
# compiles it is steadier (stderr shows both). Expected time for b bits: 2^b / rate (the number
# of tries is geometric with mean 2^b; a single solve takes longer than 3 x that 5% of the time).
#
# Solvers: `tollgate pow solve` (C++, OpenSSL; it starts one thread per core, which share the
# one core here; its start-up time, measured with 0-bit challenges, is taken off), the Python
# snippet README.md showed before issue 13, clients/python/tollgate_pow.py, and
# clients/js/tollgate-pow.mjs in Node with each of its engines (crypto.hash: Node >= 20.12; its
# own SHA-256 in JavaScript: older Nodes and browsers; WebCrypto's digest(): the browsers' API,
# here through Node, which is not a browser's figure: browsers are measured in headless
# Chromium by bench/browser_pow.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${TOLLGATE_BENCH_ROUNDS:-3}"
cpu="${TOLLGATE_BENCH_CPU:-$(( $(nproc) - 1 ))}"
python="${PYTHON:-python3}"

if [ $# -ge 1 ]; then
  build="$1"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
else
  source bench/common.sh
  bench_setup
  build=build
fi
[ -x "$build/tollgate" ] || { echo "$build/tollgate is not built" >&2; exit 1; }
command -v node >/dev/null || { echo "node is not on PATH (scripts/deps.sh installs nodejs)" >&2; exit 1; }
if pgrep -f 'cc1plus|ninja' >/dev/null; then
  echo "warning: a compiler is running: the rates below are not a quiet machine's" >&2
fi

# Each solver in a language runs as `SOLVER BITS CHALLENGE...` and prints "TRIES SECONDS".
cat > "$work/readme.py" <<'PY'
import hashlib, itertools, sys, time

# README.md's snippet before issue 13, as it was.
def solve(challenge: str, bits: int) -> str:
    for n in itertools.count():
        digest = hashlib.sha256(f"{challenge}:{n}".encode()).digest()
        if int.from_bytes(digest, "big") >> (256 - bits) == 0:
            return str(n)

bits, tries, start = int(sys.argv[1]), 0, time.perf_counter()
for challenge in sys.argv[2:]:
    tries += int(solve(challenge, bits)) + 1
print(tries, time.perf_counter() - start)
PY
cat > "$work/clients.py" <<PY
import sys, time
sys.path.insert(0, "$PWD/clients/python")
import tollgate_pow

bits, tries, start = int(sys.argv[1]), 0, time.perf_counter()
for challenge in sys.argv[2:]:
    tries += tollgate_pow._search(challenge, bits)[1]
print(tries, time.perf_counter() - start)
PY
cat > "$work/node.mjs" <<JS
import { solveChallenge } from "$PWD/clients/js/tollgate-pow.mjs";
const [engine, bits, ...challenges] = process.argv.slice(2);
let tries = 0;
const start = performance.now();
for (const challenge of challenges) {
  tries += parseInt(await solveChallenge(challenge, Number(bits), { engine }), 36) + 1;
}
console.log(tries, (performance.now() - start) / 1000);
JS
# The driver: every round, the same fresh challenges to each solver; a solver's time is the CPU
# time (user + system) of its processes, which on a quiet core is its wall time (both are shown
# on stderr): the other cores' load and a VM's stolen time do not count against it.
cat > "$work/driver.py" <<'PY'
import base64, os, resource, statistics, subprocess, sys, time

build, work, cpu, rounds, python = sys.argv[1:6]
rounds = int(rounds)
labels = {
    "cli": "tollgate pow solve (C++, OpenSSL)",
    "readme": "README's Python snippet (before)",
    "python": "clients/python tollgate_pow.solve",
    "node": "clients/js in Node 20 (crypto.hash)",
    "js": "clients/js, its JS SHA-256, in Node",
    "webcrypto": "clients/js, WebCrypto in Node",
}
pin = ["taskset", "-c", cpu]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


busy = [0, 0]  # measurements during which a compiler ran (looked at after each), of all


def measured(argv):
    """(stdout, CPU seconds, wall seconds) of one process."""
    c, w = children_cpu(), time.perf_counter()
    out = subprocess.run(pin + argv, check=True, capture_output=True, text=True).stdout
    result = out, children_cpu() - c, time.perf_counter() - w
    busy[0] += subprocess.run(["pgrep", "-f", "cc1plus|ninja"], capture_output=True).returncode == 0
    busy[1] += 1
    return result


def run(solver, bits, challenges):
    """(hashes, CPU seconds, wall seconds) for solving `challenges` at `bits`."""
    if solver == "cli":
        # One process per challenge, as a client script runs it; the same runs at 0 bits
        # (start-up, reading the arguments, one hash) are taken off.
        tries = cpu_s = wall = 0.0
        for c in challenges:
            _, c0, w0 = measured([f"{build}/tollgate", "pow", "solve", c, "0"])
            out, c1, w1 = measured([f"{build}/tollgate", "pow", "solve", c, str(bits)])
            tries += int(out) + 1
            cpu_s += c1 - c0
            wall += w1 - w0
        return tries, cpu_s, wall
    if solver in ("readme", "python"):
        argv = [python, f"{work}/{'readme' if solver == 'readme' else 'clients'}.py"]
    else:
        argv = ["node", f"{work}/node.mjs", solver]
    # The process's own timing of its loop, and its CPU time less what starting it costs (the
    # same process with no challenge).
    _, c0, _ = measured(argv + [str(bits)])
    out, c1, _ = measured(argv + [str(bits)] + challenges)
    tries, wall = out.split()
    return int(tries), c1 - c0, float(wall)


def fresh(n):
    return [base64.urlsafe_b64encode(os.urandom(70)).decode().rstrip("=") for _ in range(n)]


rates = {s: [] for s in labels}
for r in range(1, rounds + 1):
    c16, c20 = fresh(16), fresh(4)
    for s in labels:
        # WebCrypto through Node is 40 times slower than the rest: a quarter of the work.
        few = s == "webcrypto"
        t1, cpu1, w1 = run(s, 16, c16[:4] if few else c16)
        t2, cpu2, w2 = run(s, 20, c20[:1] if few else c20)
        rate = (t1 + t2) / (cpu1 + cpu2)
        rates[s].append(rate)
        print(f"round {r}: {s}: {int(t1 + t2)} hashes, {cpu1 + cpu2:.2f} s CPU, {w1 + w2:.2f} s wall: "
              f"{rate:,.0f}/s per CPU second, {(t1 + t2) / (w1 + w2):,.0f}/s wall", file=sys.stderr)


if busy[0]:
    print(f"warning: a compiler was running at the end of {busy[0]} of {busy[1]} measurements",
          file=sys.stderr)


def span(seconds):
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


print(f"| {'solver':<40} | {'hashes/s':>11} | " + " | ".join(f"{b} bits".rjust(9) for b in (16, 20, 24, 28)) + " |")
print(f"|{'-' * 42}|{'-' * 12}:|" + "|".join("-" * 10 + ":" for _ in range(4)) + "|")
for s, label in labels.items():
    rate = statistics.median(rates[s])
    print(f"| {label:<40} | {rate:>11,.0f} | " + " | ".join(f"{span(2 ** b / rate):>9}" for b in (16, 20, 24, 28)) + " |")
PY

echo "== proof-of-work solvers, one core (cpu $cpu), median of $rounds rounds, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "== $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $("$python" --version 2>&1); node $(node --version)"
echo "== expected time to solve = 2^bits / rate (the mean; 5% of solves take over 3x that)"
"$python" "$work/driver.py" "$build" "$work" "$cpu" "$rounds" "$python"
