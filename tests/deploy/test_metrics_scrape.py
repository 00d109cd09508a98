"""The dashboard and the alert rules against a real scrape: a gateway (build/tollgate) in front
of build/tollgate-echo, with store redis on a real redis-server, all on loopback ports, gets
requests that are allowed, limited, shadow-limited, challenged, sent to a dead upstream, and
WebSocket upgrades (refused, and one opened and closed). Then /metrics must hold every metric
family that deploy/grafana/tollgate.json and deploy/prometheus/alerts.yaml select, with the
labels they match and group on, and pass `promtool check metrics`.

    /usr/bin/python3 tests/deploy/test_metrics_scrape.py BUILD_DIR
"""

import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "websocket"))
import harness as h  # noqa: E402  (tests/websocket: processes, HTTP, metrics parsing)
import promql  # noqa: E402

# Labels a scrape does not show: Prometheus adds them to every series it stores.
TARGET_LABELS = {"instance", "job"}

GATEWAY = """
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
trusted_proxies: [127.0.0.1/32]
upstreams:
  app: { endpoints: ["{echo}"] }
  dead: { endpoints: ["127.0.0.1:DEAD"], connect_timeout: 1s }
routes:
  - { match: { path_prefix: /shadow/ }, category: shadowed, upstream: app }
  - { match: { path_prefix: /puzzle/ }, category: puzzle, upstream: app }
  - { match: { path_prefix: /dead/ }, category: general, upstream: dead }
  - { match: { path_prefix: /ws/, header: { Upgrade: websocket } }, category: websocket, upstream: app }
default_route: { category: general, upstream: app }
policies: ["{policy}"]
store: { type: redis, address: "127.0.0.1:REDIS", timeout: 1s, fail_mode: local }
"""

TIGHT = "limits:\n      ipv4_individual: { short: { rate: 1/h, burst: 2 } }"
POLICY = f"""
categories:
  general:
    {TIGHT}
  shadowed:
    mode: shadow
    {TIGHT}
  puzzle:
    {TIGHT}
    pow: {{ enabled: true, base_bits: 4, step_bits: 0, max_bits: 4, on_limit: true, on_limit_bits: 4 }}
  websocket:
    limits:
      ipv4_individual: {{ short: {{ rate: 100/s, burst: 100 }} }}
"""


def get(port, path, xff, headers=""):
    status, _, _ = h.http_request(port, f"GET {path} HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: {xff}\r\n"
                                        f"{headers}Connection: close\r\n\r\n")
    return status


class Redis:
    """Debian's redis-server on a free loopback port, persisting nothing."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tollgate-deploy-redis-")
        self.port = h.free_port()
        self.process = h.Process(["/usr/bin/redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", self.dir])
        self.process.wait_for_line("Ready to accept connections")

    def stop(self):
        self.process.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def families(text):
    """{family name: type} from the # TYPE lines of a scrape."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


async def open_and_close_a_tunnel(gw):
    async with h.connect(gw, "/ws/echo", xff="10.9.0.6") as ws:
        await ws.send("hello")
        assert await ws.recv() == "hello"


def scenario(gw):
    """Drives the gateway through each kind of decision; returns the scrape after it."""
    port = gw.port
    # Until its connection is up, fail_mode local decides (a fresh in-process store).
    h.eventually(lambda: gw.metrics().get("tollgate_store_degraded") == 0, 10)
    statuses = [get(port, "/hello", "10.9.0.1") for _ in range(5)]
    assert sorted(statuses) == [200, 200, 429, 429, 429], statuses
    statuses = [get(port, "/shadow/x", "10.9.0.2") for _ in range(4)]
    assert statuses == [200] * 4, statuses                  # shadow: never enforced
    statuses = [get(port, "/puzzle/x", "10.9.0.3") for _ in range(4)]
    assert 428 in statuses, statuses
    status = get(port, "/dead/x", "10.9.0.4")
    assert status in (502, 504), status
    # WebSocket: an upgrade the upstream refuses, then a tunnel opened and closed.
    ws_head = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")
    status = get(port, "/ws/x?status=403", "10.9.0.5", ws_head)
    assert status == 403, status
    asyncio.run(asyncio.wait_for(open_and_close_a_tunnel(gw), 10))
    # The close is counted once the tunnel's relay ends, just after the client sees it.
    h.eventually(lambda: gw.metrics().get("tollgate_websocket_closes_total") is not None)
    return gw.metrics_text()


class Scrape(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.addClassCleanup(cls.redis.stop)
        cls.echo = h.Echo()
        cls.addClassCleanup(cls.echo.stop)
        yaml_text = GATEWAY.replace("REDIS", str(cls.redis.port)).replace("DEAD", str(h.free_port()))
        cls.gw = h.Gateway(yaml_text, POLICY, cls.echo.port)
        cls.addClassCleanup(cls.gw.stop)
        cls.text = scenario(cls.gw)
        cls.metrics = h.Metrics(cls.text)
        cls.families = families(cls.text)

    def test_the_scenario_shows_in_the_counters(self):
        m = self.metrics
        self.assertEqual(m.value("tollgate_requests_total", category="general", decision="limited"), 3)
        self.assertEqual(m.value("tollgate_requests_total", category="shadowed", decision="shadow_limited"), 2)
        self.assertGreater(m.value("tollgate_requests_total", category="puzzle", decision="challenged"), 0)
        self.assertEqual(m.value("tollgate_rate_limited_total", category="general", mode="enforce"), 3)
        self.assertEqual(m.value("tollgate_rate_limited_total", category="shadowed", mode="shadow"), 2)
        self.assertEqual(m.value("tollgate_upstream_errors_total", upstream="dead"), 1)
        self.assertGreater(m.value("tollgate_store_decisions_total", source="redis"), 0)

    def check_references(self, expressions):
        """The families, labels and label values the expressions need, missing from the scrape."""
        missing_families, label_problems = set(), []
        for where, expr in expressions:
            names = promql.metric_names(expr) - {"up"}   # up: Prometheus's own, per target
            known_labels = set(TARGET_LABELS) | {"le"}
            all_sampled = True   # counters shown only once non-zero may have no sample yet
            for name in names:
                family = promql.base_family(name, self.families)
                if family is None:
                    missing_families.add(name)
                    all_sampled = False
                    continue
                samples = self.samples_of(family)
                all_sampled = all_sampled and bool(samples)
                for _, labels, _ in samples:
                    known_labels |= set(labels)
            for metric, matchers in promql.selectors(expr):
                family = promql.base_family(metric, self.families)
                samples = self.samples_of(family) if family else []
                if not samples:
                    continue
                labels = set().union(*(set(l) for _, l, _ in samples)) | {"le"}
                for label, op, value in matchers:
                    if label in TARGET_LABELS:
                        continue
                    if label not in labels:
                        label_problems.append(f"{where}: {metric} has no label {label}")
                        continue
                    # Literal values (and alternations of them) must be values the gateway uses.
                    if op in ("=", "=~") and re.fullmatch(r"[\w|]+", value):
                        seen = {l.get(label) for _, l, _ in samples}
                        for v in value.split("|"):
                            if v not in seen:
                                label_problems.append(f"{where}: {metric}{{{label}}} never is {v!r}")
                # A panel on a family with a category label follows the category variable.
                if where.startswith("panel") and "category" in labels and \
                        ("category", "=~", "$category") not in matchers:
                    label_problems.append(f"{where}: {metric} ignores $category")
            for label in promql.grouping_labels(expr) - known_labels if all_sampled else ():
                label_problems.append(f"{where}: groups by {label}, which none of {sorted(names)} has")
        return missing_families, label_problems

    def samples_of(self, family):
        return [s for s in self.metrics.samples
                if s[0] == family or (s[0].startswith(family + "_") and
                                      s[0][len(family) + 1:] in ("bucket", "sum", "count"))]

    def test_dashboard_metrics_are_exported(self):
        missing, problems = self.check_references(promql.dashboard_expressions())
        # Both lists at once, so that one run says everything that is missing.
        self.assertEqual({"families absent from the scrape": sorted(missing), "labels": problems},
                         {"families absent from the scrape": [], "labels": []})

    def test_alert_metrics_are_exported(self):
        missing, problems = self.check_references(promql.alert_expressions())
        # Both lists at once, so that one run says everything that is missing.
        self.assertEqual({"families absent from the scrape": sorted(missing), "labels": problems},
                         {"families absent from the scrape": [], "labels": []})

    def test_promtool_check_metrics(self):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool not found: apt-get install prometheus")
        r = subprocess.run([promtool, "check", "metrics"], input=self.text, capture_output=True,
                           text=True, timeout=60)
        out = (r.stdout + r.stderr).strip()
        # promtool exits 1 for lint findings (warnings such as a counter without _total) and
        # for text it cannot parse. Findings are printed for the reader; only a parse error,
        # which Prometheus would also refuse, fails the test.
        if out:
            print(f"\npromtool check metrics:\n{out}", file=sys.stderr)
        self.assertNotIn("error while linting", out)
        self.assertNotRegex(out, r"(?i)text format parsing error")


if __name__ == "__main__":
    h.main()
