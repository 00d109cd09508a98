"""`tollgate simulate` as operators run it (docs/design.md §13, issue 13): logs generated here with
known timestamps through a policy whose outcome is counted by hand below; the same requests
in the three formats; --compare; bad lines; a log written by a real gateway run replayed to
the decisions that run made; --json against the text; consumer tiers (docs/design.md §15) from
the logged `consumer_tier`, scaled as the multipliers say, and a tiered gateway's run replayed.

Run: /usr/bin/python3 tests/sim/test_simulate.py BUILD_DIR [unittest args]
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402

# Individual: T = 1 s, burst 3 (tau 2 s); network: T = 0.5 s, burst 5 (tau 2 s).
POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 3 } }
      ipv4_network: { short: { rate: 2/s, burst: 5 } }
  api:
    limits:
      per_tenant: { key: { query: tenant }, short: { rate: 1/s, burst: 2 } }
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/s, burst: 1 } }
  dry:
    mode: shadow
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
  pay:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
    pow: { on_limit: true, on_limit_bits: 8 }
  sockets:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
  scripts:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
    cors: { allow_origins: ["https://app.example"] }
  shared:
    limits:
      everyone: { key: global, short: { rate: 1/s, burst: 2 } }
"""
# The same with an individual burst of 2.
STRICT = POLICY.replace("rate: 1/s, burst: 3", "rate: 1/s, burst: 2")


def gateway_yaml(policy="policy.yaml", extra=""):
    return ("listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
            "admin: { address: 127.0.0.1, port: 0 }\n"
            "workers: 2\n"
            "trusted_proxies: [127.0.0.1/32]\n"
            'upstreams: { app: { endpoints: ["{echo}"] } }\n'
            "routes:\n"
            "  - { match: { path_prefix: /api/ }, category: api, upstream: app }\n"
            "  - { match: { path_prefix: /dry/ }, category: dry, upstream: app }\n"
            "  - { match: { path_prefix: /pay/ }, category: pay, upstream: app }\n"
            "  - { match: { path_prefix: /cors/, method: GET }, category: scripts, upstream: app }\n"
            "  - { match: { path_prefix: /shared/ }, category: shared, upstream: app }\n"
            "  - { match: { path_prefix: /ws/, header: { Upgrade: websocket } }, category: sockets,"
            " upstream: app }\n"
            "default_route: { category: general, upstream: app }\n"
            f"policies: [{policy}]\n"
            "access: { allow: [10.9.0.0/16], deny: [198.51.100.0/24] }\n" + extra)


# The generated requests: (seconds after T0, client, target). Whole seconds, so that nginx's
# times say the same. Counted by hand:
#   general: 10.0.0.1 x5 at 0: the individual burst passes 3 (network tat 1.5 s), 2 limited by
#            ipv4_individual.short. 10.0.0.2 x3 at 0: its own individual key; the shared /24
#            (tat 1.5 s, tau 2 s) passes 2 (tat 2.5 s), the third limited by ipv4_network.short.
#            10.0.0.3 at 10 s: refilled, passes. 10.9.0.1 x5: allow list, exempt. 198.51.100.7:
#            denied. => 15 requests, 11 admitted (5 exempt), 3 limited, 1 denied.
#   api:     tenant t1 x3 from three addresses: 2 pass, 1 limited by per_tenant.short; one without
#            a tenant passes. No request has X-Api-Key (a log has no headers): per_key unkeyed 4.
#   dry:     10.0.1.1 x3: 1 allowed, 2 shadow-limited by ipv4_individual.short.
#   pay:     10.0.2.1 x2: 1 allowed, 1 challenged (pay to pass) by ipv4_individual.short.
REQUESTS = ([(0, "10.0.0.1", "/g")] * 5 + [(0, "10.0.0.2", "/g")] * 3 + [(10, "10.0.0.3", "/g")] +
            [(0, "10.9.0.1", "/g")] * 5 + [(0, "198.51.100.7", "/g")] +
            [(0, f"10.0.5.{i}", "/api/x?tenant=t1") for i in (1, 2, 3)] + [(0, "10.0.5.4", "/api/x")] +
            [(1, "10.0.1.1", "/dry/")] * 3 + [(2, "10.0.2.1", "/pay/")] * 2)
EXPECTED = {
    "general": {"requests": 15, "admitted": 11, "exempt": 5, "limited": 3, "denied": 1,
                "limited_by": {"ipv4_individual.short": 2, "ipv4_network.short": 1}},
    "api": {"requests": 4, "admitted": 3, "limited": 1, "limited_by": {"per_tenant.short": 1},
            "unkeyed": {"per_tenant": 1, "per_key": 4}},
    "dry": {"requests": 3, "admitted": 3, "shadow_limited": 2,
            "shadow_limited_by": {"ipv4_individual.short": 2}},
    "pay": {"requests": 2, "admitted": 1, "challenged": 1,
            "limited_by": {"ipv4_individual.short": 1}},
}
# 2026-11-23T09:00:00Z
T0 = 1795424400


def iso(t, digits=3):
    """RFC 3339 UTC of Unix seconds `t` with `digits` fraction digits."""
    whole = int(t)
    frac = f"{t - whole:.{digits}f}"[2:]
    return datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac}Z"


def text_line(t, client, target, took=0.25, decision="allowed", category="general", status=200,
              tier=""):
    tier = f"consumer_tier={tier} " if tier else ""
    return (f'{iso(t + took)} access {client} "GET {target} HTTP/1.1" {status} category={category} '
            f"decision={decision} limit=- {tier}upstream=app upstream_time=0.000100 bytes=10 "
            f"{took:.6f}s\n")


def json_line(t, client, target, took=0.5, tier=""):
    line = {"time": iso(t + took, 6), "type": "access", "client": client, "method": "GET",
            "path": target, "protocol": "HTTP/1.1", "status": 200, "category": "general",
            "decision": "allowed", "limit": None}
    if tier:
        line["consumer_tier"] = tier
    line.update({"upstream": "app", "upstream_time": 0.0001, "bytes": 10, "duration": took})
    return json.dumps(line) + "\n"


def nginx_line(t, client, target):
    # In a zone 7 hours west of UTC, as a server's local time would be.
    stamp = datetime.fromtimestamp(int(t), timezone.utc).astimezone(
        timezone(-timedelta(hours=7))).strftime("%d/%b/%Y:%H:%M:%S %z")
    return f'{client} - - [{stamp}] "GET {target} HTTP/1.1" 200 10 "-" "curl/8"\n'


def simulate(*args, check=True):
    p = subprocess.run([h.binary("tollgate"), "simulate", *args], capture_output=True, text=True,
                       timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"simulate {args} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def categories(report, index=0):
    return report["configurations"][index]["categories"]


class Simulate(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tollgate-sim-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.write("policy.yaml", POLICY)
        self.write("strict.yaml", STRICT)
        self.config = self.write("gateway.yaml", gateway_yaml().replace("{echo}", "127.0.0.1:9"))
        self.strict = self.write("strict_gateway.yaml",
                                 gateway_yaml("strict.yaml").replace("{echo}", "127.0.0.1:9"))

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w", encoding="latin-1") as f:
            f.write(text)
        return path

    def json_of(self, *args):
        return json.loads(simulate(*args, "--json").stdout)

    def assert_expected(self, report):
        cats = categories(report)
        for name, want in EXPECTED.items():
            got = cats[name]
            for key, value in want.items():
                self.assertEqual(got[key], value, f"{name}.{key}")
            for key in ("limited", "challenged", "shadow_limited", "denied"):
                if key not in want:
                    self.assertEqual(got[key], 0, f"{name}.{key}")

    def test_a_policy_counted_by_hand_and_b_the_three_formats_agree(self):
        text = self.write("text.log", "".join(text_line(T0 + t, c, p) for t, c, p in REQUESTS))
        js = self.write("json.log", "".join(json_line(T0 + t, c, p) for t, c, p in REQUESTS))
        ng = self.write("nginx.log", "".join(nginx_line(T0 + t, c, p) for t, c, p in REQUESTS))
        reports = {}
        for name, path in (("text", text), ("json", js), ("nginx", ng)):
            report = self.json_of("--config", self.config, "--log", path)
            self.assertEqual(report["requests"], len(REQUESTS), name)
            self.assertEqual(report["bad_lines"]["count"], 0, name)
            self.assert_expected(report)
            reports[name] = categories(report)
        self.assertEqual(reports["text"], reports["json"])
        self.assertEqual(reports["text"], reports["nginx"])
        top = reports["text"]["general"]
        self.assertEqual(top["top_addresses"], [{"address": "10.0.0.1", "count": 2},
                                                {"address": "10.0.0.2", "count": 1}])
        self.assertEqual(top["top_networks"], [{"network": "10.0.0.0/24", "count": 3}])
        # Lines replay in time order, and lines of one instant in their order in the file: the
        # same counts from the instants written latest first.
        by_time = {}
        for t, c, p in REQUESTS:
            by_time.setdefault(t, []).append(text_line(T0 + t, c, p))
        rev = self.write("reversed.log", "".join("".join(by_time[t]) for t in sorted(by_time)[::-1]))
        report = self.json_of("--config", self.config, "--log", rev)
        self.assertEqual(report["reordered"], len(REQUESTS) - len(by_time[10]))
        self.assertEqual(categories(report), reports["text"])

    def test_c_compare_lists_exactly_the_requests_decided_otherwise(self):
        log = self.write("text.log", "".join(text_line(T0 + t, c, p) for t, c, p in REQUESTS))
        report = self.json_of("--config", self.config, "--compare", self.strict, "--log", log)
        # Burst 2: 10.0.0.1's third request is limited (line 3); 10.0.0.2's third is limited by
        # its own address instead of the /24 (line 8). Nothing else changes: 10.0.0.1 took one
        # less from the /24, which still had room for 10.0.0.2's first two.
        diffs = report["differences"]
        self.assertEqual(diffs["total"], 2)
        got = [(d["line"], d["client"], d["a"]["decision"], d["a"]["limit"], d["b"]["decision"],
                d["b"]["limit"]) for d in diffs["listed"]]
        self.assertEqual(got, [(3, "10.0.0.1", "allowed", "", "limited", "ipv4_individual.short"),
                               (8, "10.0.0.2", "limited", "ipv4_network.short", "limited",
                                "ipv4_individual.short")])
        self.assertEqual(categories(report, 1)["general"]["limited"], 4)
        text = simulate("--config", self.config, "--compare", self.strict, "--log", log).stdout
        self.assertIn("requests whose outcome differs between A and B: 2\n", text)
        self.assertRegex(text, r"text\.log:3 \S+ 10\.0\.0\.1 GET /g: A allowed \(general\), "
                               r"B limited ipv4_individual\.short \(general\)")
        self.assertRegex(text, r"\n    requests\s+15\s+15\n")

    def test_d_bad_lines_are_counted_and_listed_with_their_numbers(self):
        lines = [text_line(T0, "10.0.0.1", "/g")] * 30
        bad = {4: "2026-11-23T09:00:00.000Z access 10.0.0.1 \"GET /g HTTP/1.1\" 200 cut\n",
               9: "not a log line at all\n",
               12: '{"time":"2026-11-23T09:00:00.000Z","type":"access",\n',
               15: text_line(T0, "10.0.0.1", "/g").replace("2026-11-23", "2026-02-30")}
        for n in range(20, 46):  # 26 more: all counted, the first twenty or so listed
            bad[n] = "garbage\n"
        for n, line in sorted(bad.items()):
            lines.insert(n - 1, line)
        # The gateway's own log lines and a tunnel's end are skipped, not bad.
        lines.append("[2026-11-23 09:00:01.000] [info] listening on public 127.0.0.1:8080\n")
        lines.append('2026-11-23T09:00:02.000Z access 10.0.0.1 "GET /ws/x" category=sockets '
                     "websocket closed code=1000 by=client messages_from_client=1 "
                     "messages_from_upstream=1 1.000000s\n")
        # nginx's line for a connection that sent no request: skipped too.
        lines.append('10.0.0.9 - - [23/Nov/2026:09:00:03 +0000] "-" 400 0 "-" "-"\n')
        log = self.write("bad.log", "".join(lines))
        p = simulate("--config", self.config, "--log", log)
        self.assertIn(f"bad lines: {len(bad)}\n", p.stdout)
        listed = [int(n) for n in re.findall(r"^  \S*bad\.log:(\d+): ", p.stdout, re.M)]
        self.assertEqual(listed, sorted(bad)[:20])
        report = self.json_of("--config", self.config, "--log", log)
        self.assertEqual(report["bad_lines"]["count"], len(bad))
        self.assertEqual([b["line"] for b in report["bad_lines"]["first"]], sorted(bad)[:20])
        self.assertEqual(report["requests"], 30)
        self.assertEqual((report["skipped"]["application"], report["skipped"]["tunnel_end"]), (1, 1))
        self.assertEqual(report["skipped"]["no_request"], 1)
        self.assertIn("1 connections without a request", p.stdout)

    def test_exit_statuses(self):
        log = self.write("a.log", text_line(T0, "10.0.0.1", "/g"))
        self.assertEqual(simulate("--config", self.config, check=False).returncode, 2)
        self.assertEqual(simulate("--log", log, check=False).returncode, 2)
        self.assertEqual(simulate("--config", self.config, "--log", log, "--top", "x",
                                  check=False).returncode, 2)
        p = simulate("--config", self.config, "--log", os.path.join(self.dir, "none.log"),
                     check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("none.log", p.stderr)
        broken = self.write("broken.yaml", gateway_yaml().replace("{echo}", "127.0.0.1:9")
                            + "bogus: 1\n")
        p = simulate("--config", broken, "--log", log, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr, r"broken\.yaml:\d+: bogus")
        p = simulate("--help", check=False)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertTrue(p.stdout.startswith("usage: tollgate simulate"))
        if os.path.exists("/dev/full"):
            with open("/dev/full", "w") as full:
                p = subprocess.run([h.binary("tollgate"), "simulate", "--config", self.config,
                                    "--log", log], stdout=full, stderr=subprocess.PIPE,
                                   text=True, timeout=60)
            self.assertEqual(p.returncode, 1)
            self.assertIn("cannot write the report", p.stderr)

    def test_g_what_a_log_cannot_replay_is_said(self):
        # A request logged in a category its route no longer gives (a route on headers, which
        # a log does not show); targets that are no path, in both columns of --compare; an
        # address on both access lists is denied, not exempt.
        lines = (text_line(T0, "10.0.7.1", "/g", category="dry") +
                 text_line(T0, "10.0.7.2", "*") +
                 text_line(T0, "198.51.100.8", "/g", decision="denied", status=403))
        log = self.write("odd.log", lines)
        both = self.write("both.yaml", gateway_yaml().replace("{echo}", "127.0.0.1:9").replace(
            "allow: [10.9.0.0/16]", "allow: [10.9.0.0/16, 198.51.100.0/24]"))
        report = self.json_of("--config", both, "--log", log)
        self.assertEqual(report["logged"]["other_category"], 1)
        general = categories(report)["general"]
        self.assertEqual((general["denied"], general["exempt"]), (1, 0))
        text = simulate("--config", both, "--log", log).stdout
        self.assertIn("replayed in another category than logged: 1", text)
        text = simulate("--config", both, "--compare", self.strict, "--log", log).stdout
        self.assertRegex(text, r"unroutable targets \(400, not below\)\s+1\s+1\n")

    def test_f_json_agrees_with_the_text(self):
        log = self.write("text.log", "".join(text_line(T0 + t, c, p) for t, c, p in REQUESTS))
        text = simulate("--config", self.config, "--log", log).stdout
        report = self.json_of("--config", self.config, "--log", log)
        head = re.compile(r"^  category (\S+): (\d+) requests, (\d+) admitted \((\d+) exempt\), "
                          r"(\d+) limited, (\d+) challenged, (\d+) shadow-limited, (\d+) denied$")
        blocks = {}  # category -> (its numbers, {item label: {name: count}})
        for line in text.splitlines():
            m = head.match(line)
            if m:
                current = blocks.setdefault(m.group(1), ([int(x) for x in m.groups()[1:]], {}))
            elif line.startswith("    ") and ": " in line:
                label, _, items = line.strip().partition(": ")
                current[1][label] = {k: int(v) for k, v in
                                     (item.rsplit(" ", 1) for item in items.split(", "))}
        cats = categories(report)
        self.assertEqual(sorted(blocks), sorted(cats))
        for name, (numbers, items) in blocks.items():
            c = cats[name]
            self.assertEqual(numbers, [c["requests"], c["admitted"], c["exempt"], c["limited"],
                                       c["challenged"], c["shadow_limited"], c["denied"]], name)
            self.assertEqual(items.get("limited by (429 and pay-to-pass 428)", {}), c["limited_by"])
            self.assertEqual(items.get("shadow-limited by", {}), c["shadow_limited_by"])
            self.assertEqual(items.get("key missing", {}), c["unkeyed"])
            self.assertEqual(items.get("requests by consumer tier", {}),
                             c["requests_by_consumer_tier"])
            self.assertEqual(items.get("limited by consumer tier", {}),
                             c["limited_by_consumer_tier"])
            self.assertEqual(items.get("top limited addresses", {}),
                             {a["address"]: a["count"] for a in c["top_addresses"]})
            self.assertEqual(items.get("top limited networks", {}),
                             {a["network"]: a["count"] for a in c["top_networks"]})
        self.assertIn(f"requests: {report['requests']} ", text)
        self.assertIn(f"bad lines: {report['bad_lines']['count']}\n", text)


# Consumer tiers: a burst of 2 a minute, x0.5, x1, x3 (x5 in TIERS_B).
TIERS_POLICY = """
tiers:
  multipliers: { restricted: 0.5, free: 1, premium: 3 }
  default: free
  from:
    - key_file: { file: keys.yaml, key: { header: X-Api-Key }, unknown: default }
    - network: { file: datacenters.txt, tier: restricted }
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 2 } }
"""
TIERS_B = TIERS_POLICY.replace("premium: 3", "premium: 5")
TIERS_FILES = {"keys.yaml": "k-premium: premium\nk-free: free\n",
               "datacenters.txt": "203.0.113.0/24\n"}


def tiers_gateway(policy="tiers.yaml", extra=""):
    return ("listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
            "admin: { address: 127.0.0.1, port: 0 }\n"
            "workers: 2\n"
            "trusted_proxies: [127.0.0.1/32]\n"
            'upstreams: { app: { endpoints: ["{echo}"] } }\n'
            "default_route: { category: general, upstream: app }\n"
            f"policies: [{policy}]\n" + extra)


class Tiers(unittest.TestCase):
    """Each replayed request takes the tier its line names, when the policy has it, in the place
    of the sources a log cannot feed (here the key file); the network file still reads the
    logged address."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tollgate-sim-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        for name, text in {**TIERS_FILES, "tiers.yaml": TIERS_POLICY, "b.yaml": TIERS_B}.items():
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(text)
        self.config = os.path.join(self.dir, "gateway.yaml")
        self.b = os.path.join(self.dir, "b_gateway.yaml")
        for path, policy in ((self.config, "tiers.yaml"), (self.b, "b.yaml")):
            with open(path, "w") as f:
                f.write(tiers_gateway(policy).replace("{echo}", "127.0.0.1:9"))

    def test_h_logged_tiers_scale_each_requests_limits_by_their_multipliers(self):
        # (client, logged tier, limited of ten at once): a burst of 2 x the multiplier.
        clients = [("10.0.0.1", "free", 8), ("10.0.0.2", "premium", 4),
                   ("10.0.0.3", "restricted", 9),
                   ("10.0.0.4", "gold", 8),      # not a tier of the policy: the default
                   ("203.0.113.9", "", 9),       # none logged, a data centre's: restricted
                   ("203.0.113.10", "premium", 4)]  # the key file comes before the network
        for fmt, line in (("text", text_line), ("json", json_line)):
            log = os.path.join(self.dir, f"{fmt}.log")
            with open(log, "w") as f:
                f.write("".join(line(T0 + i / 1000, c, "/g", tier=tier)
                                for c, tier, _ in clients for i in range(10)))
            report = json.loads(simulate("--config", self.config, "--log", log, "--json").stdout)
            self.assertEqual(report["bad_lines"]["count"], 0, fmt)
            general = categories(report)["general"]
            self.assertEqual({a["address"]: a["count"] for a in general["top_addresses"]},
                             {c: n for c, _, n in clients}, fmt)
            self.assertEqual(general["requests_by_consumer_tier"],
                             {"restricted": 20, "free": 20, "premium": 20}, fmt)
            self.assertEqual(general["limited_by_consumer_tier"],
                             {"restricted": 18, "free": 16, "premium": 8}, fmt)
        text = simulate("--config", self.config, "--log", log).stdout
        self.assertIn("    limited by consumer tier: restricted 18, free 16, premium 8\n", text)
        # premium x5 (a burst of 10): exactly the premium lines that were limited differ.
        report = json.loads(simulate("--config", self.config, "--compare", self.b, "--log", log,
                                     "--json").stdout)
        diffs = report["differences"]
        self.assertEqual(diffs["total"], 8)
        self.assertEqual({(d["client"], d["a"]["decision"], d["b"]["decision"])
                          for d in diffs["listed"]},
                         {("10.0.0.2", "limited", "allowed"), ("203.0.113.10", "limited", "allowed")})
        self.assertEqual(categories(report, 1)["general"]["limited_by_consumer_tier"],
                         {"restricted": 18, "free": 16})
        text = simulate("--config", self.config, "--compare", self.b, "--log", log).stdout
        self.assertRegex(text, r"\n    limited, consumer tier premium\s+8\s+0\n")

    def test_i_a_tiered_gateways_run_replays_to_its_decisions(self):
        echo = h.Echo()
        self.addCleanup(echo.stop)
        gw = h.Gateway(tiers_gateway("policy.yaml",
                                     "logging: { level: info, access_log: '{dir}/access.log' }\n"),
                       TIERS_POLICY, echo.port, files=TIERS_FILES)
        self.addCleanup(gw.stop)
        statuses = {}
        # (client, key, requests): premium 6 of a burst, free 2, a data centre's 1 (restricted),
        # unless its key is premium (the key file comes first).
        for client, key, n in (("10.0.0.1", "k-premium", 8), ("10.0.0.2", "k-free", 4),
                               ("203.0.113.9", "", 3), ("203.0.113.10", "k-premium", 7)):
            head = f"X-Api-Key: {key}\r\n" if key else ""
            statuses[client] = [h.http_request(gw.port, f"GET /g HTTP/1.1\r\nHost: t\r\n"
                                               f"X-Forwarded-For: {client}\r\n{head}"
                                               "Connection: close\r\n\r\n")[0]
                                for _ in range(n)]
        self.assertEqual({c: s.count(429) for c, s in statuses.items()},
                         {"10.0.0.1": 2, "10.0.0.2": 2, "203.0.113.9": 2, "203.0.113.10": 1})
        path = os.path.join(gw.dir, "access.log")
        want = sum(len(s) for s in statuses.values())

        def logged():
            with open(path) as f:
                return f.read()

        h.eventually(lambda: logged().count("\n") >= want, 10)
        self.assertIn(" consumer_tier=premium ", logged())
        report = json.loads(simulate("--config", os.path.join(gw.dir, "gateway.yaml"), "--log", path,
                                     "--json").stdout)
        logged = report["logged"]
        self.assertEqual(logged["compared"], want)
        # The premium keys' lines replay at premium (the header is not in the log, its tier is).
        self.assertEqual((logged["differ"], logged["pairs"]), (0, {}), logged["first"])
        general = categories(report)["general"]
        self.assertEqual(general["limited_by_consumer_tier"],
                         {"restricted": 2, "free": 2, "premium": 3})
        self.assertEqual(general["unkeyed"], {})


class RealRun(unittest.TestCase):
    """(e) A log written by a real gateway replays to the decisions that run made."""

    def test_e_every_logged_decision_is_the_simulated_one(self):
        echo = h.Echo()
        self.addCleanup(echo.stop)
        gw = h.Gateway(gateway_yaml(extra="logging: { level: info, access_log: '{dir}/access.log' }\n"),
                       POLICY, echo.port)
        self.addCleanup(gw.stop)
        statuses = []

        def get(client, path, extra="", method="GET"):
            status, _, _ = h.http_request(gw.port, f"{method} {path} HTTP/1.1\r\nHost: t\r\n"
                                          f"X-Forwarded-For: {client}\r\n{extra}"
                                          "Connection: close\r\n\r\n")
            statuses.append(status)
            return status

        # Each client's requests come within a few milliseconds, far from any refill (T = 1 s):
        # the log's millisecond times cannot move a decision across one.
        for _ in range(5):
            get("10.0.0.1", "/g")
        for _ in range(3):
            get("10.0.0.2", "/g?x=%20y")
        for _ in range(3):
            get("10.9.0.1", "/g")
        get("198.51.100.7", "/g")
        for i in (1, 2, 3):
            get(f"10.0.5.{i}", "/api/x?tenant=t1", "X-Api-Key: k\r\n" if i == 3 else "")
        for _ in range(3):
            get("10.0.1.1", "/dry/")
        for _ in range(2):
            get("10.0.2.1", "/pay/")
        # Preflights the gateway answers (routed by the method they announce: the route says
        # GET), charged nothing: the first GET after them still passes, the second is limited.
        for _ in range(2):
            self.assertEqual(get("10.0.6.1", "/cors/x", "Origin: https://app.example\r\n"
                                 "Access-Control-Request-Method: GET\r\n", "OPTIONS"), 200)
        self.assertEqual(get("10.0.6.1", "/cors/x"), 200)
        self.assertEqual(get("10.0.6.1", "/cors/x"), 429)
        # A global limit (burst 2 across every client and both workers): two pass, the third
        # is limited whoever sends it.
        for i in (1, 2, 3):
            get(f"10.0.7.{i}", "/shared/x")
        self.assertEqual(statuses[-3:], [200, 200, 429])
        # An address an operator banned: 403 in every category, before its limits; a denied
        # address that is also banned is answered as denied (the lists come first).
        for client in ("10.0.8.1", "198.51.100.9"):
            status, _, body = h.http_request(
                gw.admin_port, f"PUT /admin/bans/{client}?duration=1h HTTP/1.1\r\nHost: a\r\n"
                "Content-Length: 0\r\nConnection: close\r\n\r\n")
            self.assertIn(status, (200, 201), body)
        self.assertEqual(get("10.0.8.1", "/g"), 403)
        self.assertEqual(get("10.0.8.1", "/pay/"), 403)
        self.assertEqual(get("198.51.100.9", "/g"), 403)
        # An upgrade that passes (101, then closed) and one refused (429), both on /ws/.
        upgrade = ("GET /ws/a HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 10.0.4.1\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
                s.sendall(upgrade.encode())
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    head += chunk
                statuses.append(int(head.split(b" ")[1]))
        self.assertEqual(statuses.count(101), 1, statuses)
        self.assertIn(429, statuses)
        self.assertIn(428, statuses)
        self.assertIn(403, statuses)
        path = os.path.join(gw.dir, "access.log")
        # Lines are written as responses end; the tunnel's end when it closes.
        want = len(statuses)
        h.eventually(lambda: sum(1 for l in open(path) if " websocket closed " not in l) >= want, 10)
        h.eventually(lambda: " websocket closed " in open(path).read(), 10)
        config = os.path.join(gw.dir, "gateway.yaml")
        report = json.loads(simulate("--config", config, "--log", path, "--json").stdout)
        self.assertEqual(report["requests"], want)
        self.assertEqual(report["bad_lines"]["count"], 0)
        self.assertEqual(report["skipped"]["tunnel_end"], 1)
        self.assertEqual(report["upgrades"], 2)
        logged = report["logged"]
        self.assertEqual(logged["not_comparable"], {})
        self.assertEqual(logged["compared"], want)
        self.assertEqual((logged["differ"], logged["pairs"]), (0, {}), logged["first"])
        self.assertEqual(logged["other_category"], 0)
        self.assertEqual((cats := categories(report))["scripts"]["requests"], 4)
        self.assertEqual(cats["scripts"]["admitted"], 3)
        # And the counts are the answers the client got: 429s in general, api and sockets (the
        # requests come within milliseconds, so they are also those counted by hand for (a)).
        cats = categories(report)
        self.assertEqual(sum(cats[c]["limited"] for c in cats), statuses.count(429))
        self.assertEqual(sum(cats[c]["challenged"] for c in cats), statuses.count(428))
        self.assertEqual(sum(cats[c]["denied"] + cats[c]["banned"] for c in cats),
                         statuses.count(403))
        self.assertEqual(cats["general"]["limited_by"],
                         {"ipv4_individual.short": 2, "ipv4_network.short": 1})
        self.assertEqual(cats["sockets"]["limited"], 1)
        self.assertEqual(cats["shared"]["limited_by"], {"everyone.short": 1})
        self.assertEqual(cats["general"]["banned"], 1)
        self.assertEqual(cats["pay"]["banned"], 1)
        self.assertEqual(cats["general"]["denied"], 2)
        self.assertEqual(cats["api"]["unkeyed"], {"per_key": 3})


if __name__ == "__main__":
    unittest.main(verbosity=2)
