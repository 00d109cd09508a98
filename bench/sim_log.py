#!/usr/bin/env python3
"""Writes a large synthetic request log for `tollgate simulate` (bench/simulate.sh).

usage: sim_log.py FORMAT LINES OUT     FORMAT: text | json | nginx

5 000 requests a second from 2026-11-23T00:00:00Z; 200 000 IPv4 clients in 20 000 /24s and
20 000 IPv6 clients in 2 000 /48s, drawn with Zipf-like weights (a few clients send most);
the paths of config/gateway.yaml's routes (auth logins, federation inboxes, WebSocket upgrades,
files, users with a tenant in the query, static assets); each line written when its response
ended (1 to 50 ms after the decision), so lines are slightly out of time order, as a real
access log is. The same seed gives the same requests in every format.
"""

import json
import random
import sys
from datetime import datetime, timezone

START = 1795392000  # 2026-11-23T00:00:00Z
RATE = 5000

# (weight, method, target template, status, category as the default configuration routes it)
TEMPLATES = [
    (30, "GET", "/api/users/{n}?tenant=t{m}", 200, "general"),
    (20, "GET", "/static/app.{n}.js", 200, "general"),
    (15, "POST", "/api/inbox/{n}", 202, "federation"),
    (10, "GET", "/api/files/a/{m}/b/{n}.png", 200, "general"),
    (8, "POST", "/api/auth/login", 200, "auth"),
    (5, "GET", "/ws/bus", 101, "websocket"),
    (5, "GET", "/api/search?q=caf%C3%A9+{n}&page={m}", 200, "general"),
    (4, "PUT", "/api/profile/{n}", 204, "general"),
    (3, "GET", "/", 200, "general"),
]


def clients(rng):
    v4 = [f"{10 + i // 20000 % 200}.{i // 200 % 100}.{i % 200 + 1}.{rng.randrange(1, 255)}"
          for i in range(200_000)]
    v6 = [f"2001:db8:{i % 2000:x}:{i // 2000:x}::{rng.randrange(1, 65535):x}" for i in range(20_000)]
    everyone = v4 + v6
    rng.shuffle(everyone)
    weights = [1.0 / (rank + 10) for rank in range(len(everyone))]
    return everyone, weights


def iso(t):
    whole = int(t)
    return (datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
            + f".{int((t - whole) * 1000):03d}Z")


def nginx_time(t):
    return datetime.fromtimestamp(int(t), timezone.utc).strftime("%d/%b/%Y:%H:%M:%S +0000")


def main():
    fmt, count, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rng = random.Random(13)
    everyone, weights = clients(rng)
    picked = rng.choices(everyone, weights=weights, k=count)
    kinds = rng.choices(TEMPLATES, weights=[t[0] for t in TEMPLATES], k=count)
    # Times formatted once per millisecond, not once per line.
    stamps = {}
    with open(out, "w", buffering=1 << 20) as f:
        write = f.write
        for i in range(count):
            _, method, template, status, category = kinds[i]
            target = template.format(n=rng.randrange(100000), m=rng.randrange(50))
            decided = START + i / RATE
            took = rng.randrange(1, 50) / 1000.0
            client = picked[i]
            if fmt == "nginx":
                key = int(decided)
                stamp = stamps.get(key) or stamps.setdefault(key, nginx_time(key))
                write(f'{client} - - [{stamp}] "{method} {target} HTTP/1.1" {status} 612 "-" '
                      '"Mozilla/5.0 (X11; Linux x86_64)"\n')
                continue
            ms = int((decided + took) * 1000)
            stamp = stamps.get(ms) or stamps.setdefault(ms, iso(ms / 1000))
            if len(stamps) > 100000:
                stamps.clear()
            if fmt == "text":
                write(f'{stamp} access {client} "{method} {target} HTTP/1.1" {status} '
                      f"category={category} decision=allowed limit=- upstream=app "
                      f"upstream_time={took * 0.8:.6f} bytes=612 {took:.6f}s\n")
            else:
                write(json.dumps({"time": stamp, "type": "access", "client": client,
                                  "method": method, "path": target, "protocol": "HTTP/1.1",
                                  "status": status, "category": category, "decision": "allowed",
                                  "limit": None, "upstream": "app",
                                  "upstream_time": round(took * 0.8, 6), "bytes": 612,
                                  "duration": took}, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
