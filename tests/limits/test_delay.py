"""Delay instead of reject (docs/design.md §16) through real gateways: ten requests at once from
one address against a burst of 5 at 5/s (T = 200ms) whose on_excess delay (500ms) covers two
more waits: exactly 7 answered 200, the five of the burst at once and the other two no sooner
than T and 2T after the first was sent, and 3 refused with 429 at once; a client that goes away
while held is never forwarded and its place comes back. The same ten split across two replicas
sharing Debian's redis-server: 7 admitted in all, 3 refused.

Run: /usr/bin/python3 tests/limits/test_delay.py BUILD_DIR [unittest args]
"""

import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402

T = 0.2  # 5/s
POLICY = """
categories:
  general:
    limits:
      ipv4_individual:
        short: { rate: 5/s, burst: 5 }
        on_excess: { delay: 500ms, max_delayed: 100 }
      ipv4_network: { short: { rate: 1000/s, burst: 1000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
"""


def at_once(ports, xff, n=10):
    """n requests from `xff`, connected first, then sent together (round-robin over `ports`):
    the instant the first was sent, and per request (status, seconds from that instant to its
    answer, headers)."""
    socks = [socket.create_connection(("127.0.0.1", ports[i % len(ports)]), timeout=10) for i in range(n)]
    start = threading.Barrier(n)
    sent, out = [None] * n, [None] * n

    def one(i):
        raw = f"GET /held HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: {xff}\r\nConnection: close\r\n\r\n"
        start.wait()
        sent[i] = time.monotonic()
        status, headers, _ = h.http_request(ports[i % len(ports)], raw, timeout=10, sock=socks[i])
        out[i] = (status, time.monotonic(), headers)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = min(sent)
    return first, [(status, done - first, headers) for status, done, headers in out]


class DelayChecks:
    def check_ten_at_once(self, answers):
        statuses = sorted(s for s, _, _ in answers)
        self.assertEqual(statuses, [200] * 7 + [429] * 3, answers)
        admitted = sorted(t for s, t, _ in answers if s == 200)
        refused = [t for s, t, _ in answers if s == 429]
        # The burst and the refusals at once; the two held no sooner than they pass: the first
        # request's instant (after the first was sent) plus T and 2T.
        for t in admitted[:5] + refused:
            self.assertLess(t, 0.75 * T, answers)
        self.assertGreaterEqual(admitted[5], T, answers)
        self.assertGreaterEqual(admitted[6], 2 * T, answers)
        self.assertLess(admitted[6], 2 * T + 1.0, answers)  # and not much later
        for s, _, headers in answers:
            if s == 429:
                self.assertEqual(headers["x-ratelimit-remaining"], "0")
                self.assertIn("retry-after", headers)


class OneGateway(h.GatewayCase, DelayChecks):
    POLICY = POLICY
    GATEWAY = h.gateway_yaml()

    def test_ten_at_once_against_burst_5_with_two_more_held(self):
        before = self.gw.metrics().value("tollgate_delayed_requests_total", category="general")
        forwarded = self.echo.stats()["requests"]
        _, answers = at_once([self.gw.port], h.new_client_address())
        self.check_ten_at_once(answers)
        self.assertEqual(self.echo.stats()["requests"] - forwarded, 7)
        m = self.gw.metrics()
        self.assertEqual(m.value("tollgate_delayed_requests_total", category="general") - before, 2)
        self.assertEqual(m.value("tollgate_delayed_requests", category="general"), 0)

    def test_a_client_gone_while_held_is_not_forwarded(self):
        xff = h.new_client_address()
        raw = f"GET /held HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: {xff}\r\nConnection: close\r\n\r\n"
        for _ in range(5):
            self.assertEqual(h.http_request(self.gw.port, raw)[0], 200)
        forwarded = self.echo.stats()["requests"]
        s = socket.create_connection(("127.0.0.1", self.gw.port))
        s.sendall(raw.encode())
        h.eventually(lambda: self.gw.metrics().value("tollgate_delayed_requests", category="general") == 1, 1)
        s.close()  # before it passes (T after the first of the burst)
        h.eventually(lambda: self.gw.metrics().value("tollgate_delayed_requests", category="general") == 0, 1)
        time.sleep(2 * T)  # past the instant it would have passed
        self.assertEqual(self.echo.stats()["requests"], forwarded)


class Redis:
    """Debian's redis-server on a free loopback port, persisting nothing."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tollgate-delay-redis-")
        self.port = h.free_port()
        self.process = h.Process(["/usr/bin/redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--daemonize", "no",
                                  "--dir", self.dir])
        self.process.wait_for_line("Ready to accept connections")

    def stop(self):
        self.process.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Replicas(unittest.TestCase, DelayChecks):
    def test_ten_at_once_split_across_two_replicas_on_redis(self):
        redis = Redis()
        try:
            os.environ["TOLLGATE_POW_SECRET"] = "replicas-share-this-secret-0123456789"
            gateway = h.gateway_yaml().replace(
                "default_route:",
                f'store: {{ type: redis, address: "127.0.0.1:{redis.port}", timeout: 1s }}\n'
                "default_route:")
            with h.gateway_with_echo(gateway, POLICY) as a, h.gateway_with_echo(gateway, POLICY) as b:
                for gw in (a, b):
                    h.eventually(lambda: gw.metrics().get("tollgate_store_degraded") == 0, 10)
                _, answers = at_once([a.port, b.port], h.new_client_address())
                self.check_ten_at_once(answers)
                delayed = sum(gw.metrics().value("tollgate_delayed_requests_total", category="general")
                              for gw in (a, b))
                self.assertEqual(delayed, 2)
        finally:
            redis.stop()


if __name__ == "__main__":
    h.main()
