"""What operators and their tools rely on (issue 12, docs/design.md §9, §10, §14): JSON logs, the access
log in a file reopened for logrotate, the access allow and deny lists, the drain on SIGTERM that
load balancers see, and the metrics operators alert on. Real tollgate and tollgate-echo
processes on loopback ports, plain HTTP over sockets, Debian's promtool.

Run: /usr/bin/python3 tests/ops/test_operations.py BUILD_DIR [unittest args]
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 2 } }
  spare:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 }, long: { rate: 100/h, burst: 100 } }
"""


def gateway_yaml(extra="", upstream="{echo}"):
    """A gateway on kernel-chosen loopback ports, loopback trusted (tests pose as clients with
    X-Forwarded-For), /spare/ in category spare, the rest general; `extra` appended."""
    return ("listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
            "admin: { address: 127.0.0.1, port: 0 }\n"
            "workers: 2\n"
            "trusted_proxies: [127.0.0.1/32]\n"
            "upstreams:\n"
            f'  app: {{ endpoints: ["{upstream}"], max_failures: 1, ejection_time: 30s, '
            "connect_timeout: 1s }\n"
            "routes:\n"
            "  - { match: { path_prefix: /spare/ }, category: spare, upstream: app }\n"
            "default_route: { category: general, upstream: app }\n"
            'policies: ["{policy}"]\n' + extra)


def get(gw, path, client=None, port=None, extra=""):
    """GET `path` through the gateway as `client` (X-Forwarded-For); (status, headers, body)."""
    xff = f"X-Forwarded-For: {client}\r\n" if client else ""
    return h.http_request(port or gw.port, f"GET {path} HTTP/1.1\r\nHost: t\r\n{xff}{extra}"
                          "Connection: close\r\n\r\n")


def admin(gw, path):
    return h.http_request(gw.admin_port, f"GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")


def text_of(path):
    """The file's text, or "" while it does not exist."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def metrics_when(gw, condition, timeout=5.0):
    """The gateway's metrics once `condition(metrics)` holds (None if it never does): responses
    are counted after their last byte went out, bytes once a connection ends, so a client that
    scrapes at once may be first."""
    return h.eventually(lambda: (lambda m: m if condition(m) else None)(h.Metrics(gw.metrics_text())),
                        timeout)


class Fixture(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.echo = h.Echo()

    @classmethod
    def tearDownClass(cls):
        cls.echo.stop()

    def start(self, extra="", policy=POLICY, upstream="{echo}"):
        gw = h.Gateway(gateway_yaml(extra, upstream), policy, self.echo.port)
        self.addCleanup(gw.stop)
        return gw


class JsonLogs(Fixture):
    def test_every_line_is_one_json_object_and_access_lines_have_every_field(self):
        gw = self.start("logging: { level: info, format: json, access_log: stdout }\n")
        self.assertEqual(get(gw, "/a?x=1", "10.1.0.1")[0], 200)
        self.assertEqual(get(gw, "/a?x=1", "10.1.0.1")[0], 200)
        self.assertEqual(get(gw, "/b", "10.1.0.1")[0], 429)
        # A target with what a JSON string must escape.
        status, _, _ = h.http_request(gw.port, b'GET /q?a="b\\ HTTP/1.1\r\nHost: t\r\n'
                                      b"X-Forwarded-For: 10.1.0.2\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 200)
        # Two workers log in the order they finish, not the order of the requests: by path.
        logged = [json.loads(gw.process.wait_for_line('"type":"access"')) for _ in range(4)]
        by_path = {o["path"]: o for o in logged}
        limited = by_path["/b"]
        self.assertIn('/q?a="b\\', by_path)
        self.assertIn("in force", gw.reload(gateway_yaml("logging: { level: info, format: json, "
                                                         "access_log: stdout }\n"), POLICY))
        lines = gw.process.output().splitlines()
        objects = [json.loads(line) for line in lines]  # every line parses, start-up included
        self.assertTrue(any(o.get("message", "").startswith("listening on public") for o in objects))
        self.assertTrue(any("in force" in o.get("message", "") for o in objects), lines)
        for o in objects:
            # The access lines' times have microseconds (tollgate simulate orders by them).
            digits = r"\d{6}" if "type" in o else r"\d{3}"
            self.assertRegex(o["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\." + digits + "Z$")
        first = by_path["/a?x=1"]
        for field in ("time", "client", "method", "path", "protocol", "status", "category",
                      "decision", "limit", "upstream", "upstream_time", "bytes", "duration"):
            self.assertIn(field, first)
        self.assertEqual((first["client"], first["method"], first["path"], first["status"],
                          first["category"], first["decision"], first["upstream"], first["limit"]),
                         ("10.1.0.1", "GET", "/a?x=1", 200, "general", "allowed", "app", None))
        self.assertGreater(first["upstream_time"], 0)
        self.assertGreaterEqual(first["duration"], first["upstream_time"])
        self.assertGreater(first["bytes"], 100)  # head and the echo's JSON body
        self.assertEqual((limited["status"], limited["decision"], limited["limit"],
                          limited["upstream"], limited["upstream_time"]),
                         (429, "limited", "ipv4_individual.short", None, None))

    def test_text_access_lines_carry_the_same_fields(self):
        gw = self.start("logging: { level: info, access_log: true }\n")
        self.assertEqual(get(gw, "/t", "10.1.1.1")[0], 200)
        line = gw.process.wait_for_line("access ")
        self.assertRegex(line, r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z access 10\.1\.1\.1 "GET /t HTTP/1\.1" 200 '
                               r'category=general decision=allowed limit=- upstream=app '
                               r'upstream_time=0\.\d{6} bytes=\d+ \d+\.\d{6}s$')


class AccessLogFile(Fixture):
    def test_the_file_is_reopened_on_sigusr1_and_sighup(self):
        gw = self.start("logging: { level: info, access_log: '{dir}/logs/access.log' }\n")
        path = os.path.join(gw.dir, "logs", "access.log")
        self.assertEqual(get(gw, "/one", "10.2.0.1")[0], 200)
        self.assertTrue(h.eventually(lambda: "/one" in text_of(path)))
        os.rename(path, path + ".1")  # logrotate moves it away
        self.assertEqual(get(gw, "/two", "10.2.0.1")[0], 200)
        # Logged after the response went out: into the moved file, until the reopen.
        self.assertTrue(h.eventually(lambda: "/two" in text_of(path + ".1")))
        gw.process.signal(signal.SIGUSR1)
        gw.process.wait_for_line("access log reopened")
        self.assertEqual(get(gw, "/three", "10.2.0.2")[0], 200)
        self.assertTrue(h.eventually(lambda: "/three" in text_of(path)))
        old = text_of(path + ".1")
        self.assertIn("/two", old)  # written to the moved file before the reopen
        self.assertNotIn("/three", old)
        self.assertNotIn('"GET ', gw.process.output())  # nothing on the standard output
        os.rename(path, path + ".2")
        self.assertIn("in force", gw.reload(gateway_yaml(
            "logging: { level: info, access_log: '{dir}/logs/access.log' }\n"), POLICY))
        self.assertEqual(get(gw, "/four", "10.2.0.3")[0], 200)
        self.assertTrue(h.eventually(lambda: "/four" in text_of(path)))
        self.assertEqual(text_of(path).count("\n"), 1)

    def start(self, extra="", policy=POLICY, upstream="{echo}"):
        # Gateway() writes its files into a new temporary folder: make logs/ there first by
        # starting it with the access log off, then reloading with the file.
        gw = super().start("logging: { level: info }\n", policy, upstream)
        os.makedirs(os.path.join(gw.dir, "logs"))
        self.assertIn("in force", gw.reload(gateway_yaml(extra), policy))
        return gw

    def test_a_file_that_cannot_be_opened_fails_the_reload_and_the_old_one_stays(self):
        gw = self.start("logging: { level: info, access_log: '{dir}/logs/access.log' }\n")
        line = gw.reload(gateway_yaml("logging: { level: info, access_log: '{dir}/none/x.log' }\n"),
                         POLICY)
        self.assertIn("reload failed", line)
        self.assertIn("none/x.log", line)
        self.assertEqual(h.Metrics(gw.metrics_text()).value("tollgate_config_last_reload_successful"), 0)
        self.assertEqual(get(gw, "/still", "10.2.1.1")[0], 200)
        path = os.path.join(gw.dir, "logs", "access.log")
        self.assertTrue(h.eventually(lambda: "/still" in text_of(path)))


class AccessLists(Fixture):
    LISTS = ("access: { allow: [10.50.0.0/16, '2001:db8:aa::/48'], deny: [192.0.2.0/24] }\n")

    def test_allowed_addresses_are_never_limited_and_denied_ones_never_reach_the_upstream(self):
        gw = self.start(self.LISTS)
        before = self.echo.stats()["requests"]
        for _ in range(6):
            status, headers, _ = get(gw, "/x", "10.50.3.4")
            self.assertEqual(status, 200)
            self.assertNotIn("x-ratelimit-remaining", headers)
        for _ in range(3):
            self.assertEqual(get(gw, "/x", "2001:db8:aa:1::7")[0], 200)
        status, headers, body = get(gw, "/x", "192.0.2.99")
        self.assertEqual(status, 403)
        self.assertTrue(headers["content-type"].startswith("application/problem+json"))
        self.assertEqual(json.loads(body)["code"], "denied")
        # Not listed: limited as usual (burst 2).
        self.assertEqual([get(gw, "/x", "10.51.0.1")[0] for _ in range(3)], [200, 200, 429])
        self.assertEqual(self.echo.stats()["requests"] - before, 6 + 3 + 2)
        # A response is counted once written: the last ones may be counted after their
        # client has read them.
        m = metrics_when(gw, lambda m: m.value("tollgate_responses_total", category="general",
                                               code_class="2xx") >= 11 and
                         m.value("tollgate_responses_total", category="general",
                                 code_class="4xx") >= 2)
        self.assertTrue(m, "the responses are never counted")
        self.assertEqual(m.value("tollgate_requests_total", category="general", decision="denied"), 1)
        self.assertEqual(m.value("tollgate_requests_total", category="general", decision="allowed"), 11)
        self.assertEqual(m.value("tollgate_responses_total", category="general", code_class="4xx"), 2)
        self.assertEqual(m.value("tollgate_responses_total", category="general", code_class="2xx"), 11)

    def test_sighup_changes_the_lists(self):
        gw = self.start(self.LISTS)
        self.assertEqual(get(gw, "/x", "192.0.2.5")[0], 403)
        self.assertIn("in force", gw.reload(gateway_yaml("access: { allow: [192.0.2.0/24] }\n"), POLICY))
        self.assertEqual([get(gw, "/x", "192.0.2.5")[0] for _ in range(4)], [200] * 4)
        self.assertEqual([get(gw, "/x", "10.50.3.4")[0] for _ in range(3)], [200, 200, 429])


class Drain(Fixture):
    def test_sigterm_fails_readiness_at_once_serves_through_the_delay_then_drains(self):
        gw = self.start("shutdown: { delay: 1500ms, drain_timeout: 5s }\n")
        self.assertEqual(admin(gw, "/readyz")[0], 200)
        # A slow request in flight when the listeners close still completes.
        slow = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
        self.addCleanup(slow.close)
        gw.process.signal(signal.SIGTERM)
        gw.process.wait_for_line("draining")
        status, _, body = admin(gw, "/readyz")
        self.assertEqual((status, body.strip()), (503, "draining"))
        self.assertEqual(admin(gw, "/healthz")[0], 200)
        started = time.monotonic()
        self.assertEqual(get(gw, "/during", "10.3.0.1", extra="")[0], 200)
        slow.sendall(b"GET /spare/slow?delay_ms=1500 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        time.sleep(0.3)
        self.assertEqual(get(gw, "/still", "10.3.0.2")[0], 200)
        gw.process.wait_for_line("closing the listeners", timeout=5)
        self.assertGreaterEqual(time.monotonic() - started, 0.9)
        def refused():
            try:
                get(gw, "/after", "10.3.0.3")
                return False
            except (OSError, RuntimeError):  # refused, or reset in the closed listener's backlog
                return True
        self.assertTrue(h.eventually(refused, timeout=2), "the listener still accepts")
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = slow.recv(65536)
            if not chunk:
                break
            data += chunk
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:100])
        self.assertEqual(gw.process.wait(10), 0)
        self.assertIn("stopped", gw.process.output())

    def test_a_sighup_at_once_after_the_start_does_not_end_the_gateway(self):
        # systemctl reload just after systemctl start: the signal comes before the handlers.
        for _ in range(3):
            d = h.tempfile.mkdtemp(prefix="tollgate-ops-")
            self.addCleanup(shutil.rmtree, d, True)
            with open(os.path.join(d, "policy.yaml"), "w") as f:
                f.write(POLICY)
            with open(os.path.join(d, "gateway.yaml"), "w") as f:
                f.write(gateway_yaml().replace("{policy}", os.path.join(d, "policy.yaml"))
                        .replace("{echo}", f"127.0.0.1:{self.echo.port}"))
            p = h.Process([h.binary("tollgate"), "--config", os.path.join(d, "gateway.yaml")])
            self.addCleanup(p.stop)
            p.wait_for_line("")  # its first line: main() has begun (a signal before that kills)
            p.signal(signal.SIGHUP)
            p.wait_for_line("admin listening on")
            time.sleep(0.1)
            self.assertIsNone(p.wait(0.2), p.output())

    def test_a_second_signal_skips_the_delay(self):
        gw = self.start("shutdown: { delay: 30s, drain_timeout: 1s }\n")
        gw.process.signal(signal.SIGTERM)
        gw.process.wait_for_line("draining")
        started = time.monotonic()
        gw.process.signal(signal.SIGINT)
        self.assertEqual(gw.process.wait(10), 0)
        self.assertLess(time.monotonic() - started, 5)


class SystemdNotify(Fixture):
    """Type=notify: the gateway tells systemd through NOTIFY_SOCKET when it is ready, reloading
    and stopping (sd_notify's datagrams, as systemd receives them)."""

    def test_ready_reloading_and_stopping_are_announced(self):
        d = h.tempfile.mkdtemp(prefix="tollgate-notify-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(sock.close)
        sock.bind(path)
        sock.settimeout(10)
        os.environ["NOTIFY_SOCKET"] = path
        try:
            gw = self.start()
        finally:
            del os.environ["NOTIFY_SOCKET"]
        self.assertEqual(sock.recv(4096), b"READY=1")
        # Ready means serving: the listeners answer by then.
        self.assertEqual(get(gw, "/r", "10.6.0.1")[0], 200)
        gw.process.signal(signal.SIGHUP)
        reloading = sock.recv(4096).decode()
        self.assertRegex(reloading, r"^RELOADING=1\nMONOTONIC_USEC=\d+$")
        self.assertEqual(sock.recv(4096), b"READY=1")
        gw.process.signal(signal.SIGTERM)
        self.assertEqual(sock.recv(4096), b"STOPPING=1")
        self.assertEqual(gw.process.wait(10), 0)


class OperatorMetrics(Fixture):
    def test_the_families_operators_alert_on(self):
        gw = self.start()
        start = h.Metrics(gw.metrics_text())
        # Series at 0 from the start: every limit of every category, each tier, enforced.
        for category, tiers in (("general", ("short", "long")), ("spare", ("short", "long"))):
            for tier in tiers:
                self.assertEqual(start.get("tollgate_rate_limited_total", category=category,
                                           level="ipv4_individual", tier=tier, mode="enforce"), 0)
        self.assertEqual(start.get("tollgate_build_info", version=self.version()), 1)
        self.assertEqual(start.get("tollgate_config_last_reload_successful"), 1)
        self.assertGreater(start.get("process_resident_memory_bytes"), 1e6)
        self.assertGreater(start.get("process_open_fds"), 3)
        self.assertGreater(start.get("process_max_fds"), start.get("process_open_fds"))
        self.assertAlmostEqual(start.get("process_start_time_seconds"), time.time(), delta=60)
        self.assertIsNotNone(start.get("process_cpu_seconds_total"))
        # store.capacity's default, rounded up to whole shards.
        self.assertTrue(1_000_000 <= start.get("tollgate_table_capacity",
                                               table="limiter_ipv4_individual") < 1_010_000)
        self.assertEqual(start.get("tollgate_table_evictions_total", table="violations_individual"), 0)
        self.assertEqual(start.get("tollgate_upstream_endpoint_up", upstream="app",
                                   endpoint=f"127.0.0.1:{self.echo.port}"), 1)
        self.assertEqual(start.get("tollgate_bans_active"), 0)
        self.assertEqual(start.get("tollgate_active_bans"), 0)

        for _ in range(3):
            get(gw, "/m", "10.4.0.1")
        m = metrics_when(gw, lambda m: m.value("tollgate_received_bytes_total", listener="public") > 0
                         and m.value("tollgate_request_duration_seconds_count", category="general") >= 3)
        self.assertTrue(m, "bytes are counted once connections end")
        self.assertEqual(m.get("tollgate_rate_limited_total", category="general",
                               level="ipv4_individual", tier="short", mode="enforce"), 1)
        self.assertEqual(m.get("tollgate_responses_total", category="general", code_class="2xx"), 2)
        self.assertEqual(m.get("tollgate_responses_total", category="general", code_class="4xx"), 1)
        self.assertEqual(m.get("tollgate_request_duration_seconds_count", category="general"), 3)
        self.assertGreater(m.get("tollgate_sent_bytes_total", listener="public"), 300)
        self.assertGreater(m.get("tollgate_received_bytes_total", listener="public"), 100)
        self.assertGreaterEqual(m.get("tollgate_table_entries", table="limiter_ipv4_individual"), 1)

        # promtool finds nothing to complain about in the exposition.
        check = subprocess.run(["promtool", "check", "metrics"], input=m.text.encode(),
                               capture_output=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertEqual((check.stdout + check.stderr).strip(), b"")

        # A bad reload says so; a good one that drops a category drops its series.
        before = m.get("tollgate_config_last_reload_success_timestamp_seconds")
        self.assertIn("reload failed", gw.reload(gateway_yaml(), "categories: { general: { cost: x } }\n"))
        self.assertEqual(h.Metrics(gw.metrics_text()).get("tollgate_config_last_reload_successful"), 0)
        time.sleep(0.05)
        only_general = "categories:\n  general:\n    limits:\n      ipv4_individual: { short: { rate: 1/h, burst: 2 } }\n"
        self.assertIn("in force", gw.reload(gateway_yaml().replace(
            "routes:\n  - { match: { path_prefix: /spare/ }, category: spare, upstream: app }\n",
            "routes: []\n"), only_general))
        after = h.Metrics(gw.metrics_text())
        self.assertEqual(after.get("tollgate_config_last_reload_successful"), 1)
        self.assertGreater(after.get("tollgate_config_last_reload_success_timestamp_seconds"), before)
        self.assertIsNone(after.get("tollgate_requests_total", category="spare"))
        self.assertIsNone(after.get("tollgate_rate_limited_total", category="spare"))
        self.assertEqual(after.get("tollgate_requests_total", category="general", decision="allowed"), 2)

    def test_an_ejected_endpoint_is_down(self):
        port = h.free_port()  # nothing listens there
        gw = self.start(upstream=f"127.0.0.1:{port}")
        m = h.Metrics(gw.metrics_text())
        self.assertEqual(m.get("tollgate_upstream_endpoint_up", upstream="app", endpoint=f"127.0.0.1:{port}"), 1)
        self.assertEqual(get(gw, "/spare/x", "10.5.0.1")[0], 502)
        m = metrics_when(gw, lambda m: m.value("tollgate_responses_total", category="spare",
                                               code_class="5xx") >= 1)
        self.assertTrue(m, "the 502 is never counted")
        self.assertEqual(m.get("tollgate_upstream_endpoint_up", upstream="app", endpoint=f"127.0.0.1:{port}"), 0)
        self.assertEqual(m.get("tollgate_responses_total", category="spare", code_class="5xx"), 1)

    @staticmethod
    def version():
        out = subprocess.run([h.binary("tollgate"), "--version"], capture_output=True, text=True)
        return out.stdout.split()[1]


if __name__ == "__main__":
    unittest.main(verbosity=2)
