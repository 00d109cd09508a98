"""Tenants per Host through a real gateway (docs/design.md §15, "Tenants (per Host)", issue 23):
two host entries whose policies both define category `general` (ipv4_individual burst 2 and 5)
keep their state apart for one client address; the headers show each host's numbers; a Host
that names no entry takes the top level (burst 3); /metrics carries a `host` label; a SIGHUP
with a broken tenant policy is refused naming its file and line while the running
configuration serves on; --check-config reports the tenant file's error.

Run: /usr/bin/python3 tests/identity/test_hosts.py BUILD_DIR [unittest args]
"""

import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 3 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
"""

TENANT_A = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 2 } }
"""

TENANT_B = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 5 } }
  reports:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 1 } }
"""

BROKEN_A = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 0 } }
"""

HOSTS = """hosts:
  - names: [a.example, "*.A-Tenants.example"]
    default_route: { category: general, upstream: app }
    policies: [a.yaml]
  - names: [b.example]
    routes: [{ match: { path_prefix: /reports }, category: reports, upstream: app }]
    default_route: { category: general, upstream: app }
    policies: [b.yaml]
"""

GATEWAY = h.gateway_yaml() + HOSTS


def get(gw, host, xff, path="/api"):
    host_field = f"Host: {host}\r\n" if host is not None else ""
    return h.http_request(gw.port, f"GET {path} HTTP/1.1\r\n{host_field}X-Forwarded-For: {xff}\r\n"
                                   "Connection: close\r\n\r\n")


def statuses(responses):
    return [s for s, _, _ in responses]


class Hosts(h.GatewayCase):
    GATEWAY = GATEWAY
    POLICY = POLICY
    FILES = {"a.yaml": TENANT_A, "b.yaml": TENANT_B}

    def test_one_address_has_each_hosts_own_burst(self):
        client = h.new_client_address()
        a = [get(self.gw, "a.example", client) for _ in range(3)]
        self.assertEqual(statuses(a), [200, 200, 429])
        self.assertEqual(a[0][1]["x-ratelimit-limit"], "2")
        self.assertIn('"ipv4_individual.short";q=2;w=120', a[0][1]["ratelimit-policy"])
        # Host a's burst spent: host b still gives the same address its whole burst of 5.
        b = [get(self.gw, "B.Example:8080", client) for _ in range(6)]
        self.assertEqual(statuses(b), [200] * 5 + [429])
        self.assertEqual(b[0][1]["x-ratelimit-limit"], "5")
        self.assertEqual(b[0][1]["x-ratelimit-remaining"], "4")
        # A Host no entry names takes the top level: burst 3.
        other = [get(self.gw, "c.example", client) for _ in range(4)]
        self.assertEqual(statuses(other), [200, 200, 200, 429])
        self.assertEqual(other[0][1]["x-ratelimit-limit"], "3")
        # A wildcard name of host a shares its state; one label deeper is not its.
        self.assertEqual(get(self.gw, "x.a-tenants.example", client)[0], 429)
        self.assertEqual(get(self.gw, "y.x.a-tenants.example", client)[0], 429)  # top: spent
        fresh = h.new_client_address()
        self.assertEqual(get(self.gw, "y.x.a-tenants.example", fresh)[1]["x-ratelimit-limit"], "3")
        self.assertEqual(get(self.gw, "x.a-tenants.example", fresh)[1]["x-ratelimit-limit"], "2")

    def test_a_hosts_own_routes(self):
        client = h.new_client_address()
        reports = [get(self.gw, "b.example", client, "/reports/1") for _ in range(2)]
        self.assertEqual(statuses(reports), [200, 429])
        self.assertEqual(reports[0][1]["x-ratelimit-limit"], "1")
        # The top level has no such route: /reports is its general category there.
        self.assertEqual(get(self.gw, "c.example", client, "/reports/1")[1]["x-ratelimit-limit"],
                         "3")

    def test_metrics_carry_the_host_label(self):
        client = h.new_client_address()
        for _ in range(3):
            get(self.gw, "a.example", client)
        get(self.gw, "c.example", client)
        m = self.gw.metrics()
        self.assertGreaterEqual(m.value("tollgate_requests_total", category="general",
                                        host="a.example", decision="allowed"), 2)
        self.assertGreaterEqual(m.value("tollgate_requests_total", category="general",
                                        host="a.example", decision="limited"), 1)
        self.assertGreaterEqual(m.value("tollgate_rate_limited_total", category="general",
                                        host="a.example", level="ipv4_individual"), 1)
        self.assertGreaterEqual(m.value("tollgate_requests_total", category="general", host="",
                                        decision="allowed"), 1)
        self.assertIsNotNone(m.get("tollgate_requests_total", category="reports", host="b.example",
                                   decision="allowed"))
        # Every series of a family with a category names its host; no other family has one.
        for name, labels, _ in m.samples:
            if "category" in labels:
                self.assertIn("host", labels, name)
            else:
                self.assertNotIn("host", labels, name)

    def test_a_broken_tenant_policy_is_refused_and_the_running_one_serves(self):
        a_file = os.path.join(self.gw.dir, "a.yaml")
        with open(a_file, "w") as f:
            f.write(BROKEN_A)
        try:
            checked = subprocess.run([h.binary("tollgate"), "--check-config",
                                      os.path.join(self.gw.dir, "gateway.yaml")],
                                     capture_output=True, text=True, timeout=30)
            self.assertEqual(checked.returncode, 1, checked.stdout)
            self.assertIn(f"{a_file}:5: categories.general.limits.ipv4_individual.short.burst",
                          checked.stderr)
            self.gw.process.signal(signal.SIGHUP)
            line = self.gw.process.wait_for_line("reload")
            self.assertIn("reload failed", line)
            self.assertIn(f"{a_file}:5: categories.general.limits.ipv4_individual.short.burst",
                          line)
            self.assertEqual(self.gw.metrics().value("tollgate_config_last_reload_successful"), 0)
            # Host a keeps its burst of 2.
            client = h.new_client_address()
            a = [get(self.gw, "a.example", client) for _ in range(3)]
            self.assertEqual(statuses(a), [200, 200, 429])
            self.assertEqual(a[0][1]["x-ratelimit-limit"], "2")
        finally:
            with open(a_file, "w") as f:
                f.write(TENANT_A)
        # Repaired, the reload goes through, and a's new numbers apply.
        with open(a_file, "w") as f:
            f.write(TENANT_A.replace("burst: 2", "burst: 4"))
        try:
            self.gw.process.signal(signal.SIGHUP)
            self.assertIn("in force", self.gw.process.wait_for_line("reload"))
            self.assertEqual(get(self.gw, "a.example", h.new_client_address())[1]
                             ["x-ratelimit-limit"], "4")
        finally:
            with open(a_file, "w") as f:
                f.write(TENANT_A)
            self.gw.process.signal(signal.SIGHUP)
            self.assertIn("in force", self.gw.process.wait_for_line("reload"))

    def test_check_config_names_the_hosts(self):
        checked = subprocess.run([h.binary("tollgate"), "--check-config",
                                  os.path.join(self.gw.dir, "gateway.yaml")],
                                 capture_output=True, text=True, timeout=30)
        self.assertEqual(checked.returncode, 0, checked.stderr)
        self.assertIn("host a.example: 0 routes, 1 categories; host b.example: 1 routes, "
                      "2 categories", checked.stdout)


if __name__ == "__main__":
    h.main()
