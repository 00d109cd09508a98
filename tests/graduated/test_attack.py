"""Attack mode (docs/design.md §16, issue 24) through a real gateway under a real load: a flood
from many addresses over the learnt baseline enters `high` after `sustain` (an uncleared
client gets 428, solves, earns a clearance, and passes with it; the limits the headers show
are halved; X-Tollgate-Mode names the level), then `severe` (503 under_attack with Retry-After
except to the allow list and the cleared client); the flood stops and the category steps
down one level per `cool_down` with the limits restored in steps; the log says every
transition and why, the metrics count them; a level forced through the admin API, for a time
and until released.

Run: /usr/bin/python3 tests/graduated/test_attack.py BUILD_DIR [unittest args]
"""

import json
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402
import tollgate_pow  # noqa: E402

# A floor of 2/s; the test's normal traffic (3/s: under 2x the floor whatever its first second
# measured) teaches the baseline more than the floor first, and the flood is then a multiple of
# what was learnt.
POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 8 } }
    pow: { enabled: true, base_bits: 8, step_bits: 1, max_bits: 12 }
    attack_mode:
      baseline: { window: 10s, floor: 2/s }
      sustain: 2s
      levels:
        elevated: { above: 2x,  limits: 0.75 }
        high:     { above: 5x,  limits: 0.5, pow: uncleared }
        severe:   { above: 12x, admit: [allowed, cleared] }
      cool_down: 4s
      restore: 25%
  quiet:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
"""
ALLOWED = "198.51.100.7"


def gateway_file():
    return h.gateway_yaml().replace(
        "routes:\n", "routes:\n  - { match: { path_prefix: /quiet/ }, category: quiet, upstream: app }\n"
    ).replace("default_route:", f"access: {{ allow: [{ALLOWED}/32] }}\ndefault_route:")


def get(gw, xff, headers="", path="/a"):
    return h.http_request(gw.port, f"GET {path} HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: {xff}\r\n"
                                   f"{headers}Connection: close\r\n\r\n")


def admin(gw, method, path, body=None):
    payload = "" if body is None else json.dumps(body)
    status, _, text = h.http_request(
        gw.admin_port, f"{method} {path} HTTP/1.1\r\nHost: admin\r\nContent-Length: "
                       f"{len(payload)}\r\nConnection: close\r\n\r\n{payload}")
    return status, (json.loads(text) if text else None)


def general(gw):
    status, body = admin(gw, "GET", "/admin/attack-mode")
    assert status == 200, body
    return next(c for c in body["categories"] if c["category"] == "general")


class Flood:
    """Requests at `rate` a second from ever new addresses, on a thread, until stopped."""

    def __init__(self, gw, rate):
        self.gw, self.rate, self.sent = gw, rate, 0
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        start = time.monotonic()
        while self.running:
            due = start + self.sent / self.rate
            now = time.monotonic()
            if due > now:
                time.sleep(min(due - now, 0.05))
                continue
            try:
                get(self.gw, h.new_client_address())
            except OSError:
                pass
            self.sent += 1

    def stop(self):
        self.running = False
        self.thread.join()


def wait_level(gw, level, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = general(gw)
        if seen["level"] == level:
            return seen
        time.sleep(0.1)
    raise AssertionError(f"not {level} within {timeout} s: {general(gw)}")


class AttackMode(h.GatewayCase):
    POLICY = POLICY
    default_bound = 90.0

    @classmethod
    def gateway_file(cls):
        return gateway_file()

    def test_a_flood_enters_the_levels_and_the_category_steps_down(self):
        gw = self.gw
        self.assertEqual(general(gw)["level"], "normal")
        status, headers, _ = get(gw, h.new_client_address())
        self.assertEqual(status, 200)
        self.assertIsNone(headers.get("x-tollgate-mode"))
        self.assertEqual(headers["x-ratelimit-limit"], "8")

        # Normal traffic first: the baseline learns it (never below the floor of 2/s).
        flood = Flood(gw, 3)
        try:
            self.assertTrue(h.eventually(lambda: general(gw)["baseline"] > 2.3, timeout=20),
                            general(gw))
            self.assertEqual(general(gw)["level"], "normal")
            learnt = general(gw)["baseline"]
            # 7x what was learnt: above high's 5x, under severe's 12x.
            flood.rate = 7 * learnt
            start = time.monotonic()
            seen = wait_level(gw, "high", 8)
            self.assertGreaterEqual(time.monotonic() - start, 2.0)  # sustain
            self.assertEqual(seen["limits"], 0.5)
            self.assertFalse(seen["forced"])
            # An uncleared client shows a proof first; its proof earns a clearance.
            client = h.new_client_address()
            status, headers, body = get(gw, client)
            self.assertEqual((status, headers.get("x-tollgate-mode")), (428, "high"), body)
            solution = tollgate_pow.solution_for(status, headers)
            status, headers, _ = get(gw, client, f"X-PoW-Solution: {solution}\r\n")
            self.assertEqual(status, 200)
            clearance = headers["x-pow-clearance"]
            # With it, no proof: it passes under halved limits (burst 8 x 0.5).
            status, headers, _ = get(gw, client, f"X-PoW-Clearance: {clearance}\r\n")
            self.assertEqual((status, headers["x-tollgate-mode"]), (200, "high"))
            self.assertEqual(headers["x-ratelimit-limit"], "4")
            # Another category is not in attack mode.
            status, headers, _ = get(gw, client, path="/quiet/x")
            self.assertEqual((status, headers.get("x-tollgate-mode")), (200, None))

            flood.rate = 30 * learnt
            wait_level(gw, "severe", 8)
            status, headers, body = get(gw, h.new_client_address())
            self.assertEqual((status, headers["x-tollgate-mode"]), (503, "severe"), body)
            problem = json.loads(body)
            self.assertEqual(problem["code"], "under_attack")
            self.assertEqual(headers["retry-after"], "1")  # one restore step: 4 s x 25%
            self.assertEqual(get(gw, client, f"X-PoW-Clearance: {clearance}\r\n")[0], 200)
            self.assertEqual(get(gw, ALLOWED)[0], 200)
            # The clearance is bound to its address.
            self.assertEqual(get(gw, h.new_client_address(), f"X-PoW-Clearance: {clearance}\r\n")[0], 503)
            # The attack is not learnt.
            self.assertAlmostEqual(general(gw)["baseline"], learnt, delta=learnt * 0.15)
        finally:
            flood.stop()
        # Calm: one level down per cool_down (4 s), then the limits come back in steps.
        wait_level(gw, "high", 7)
        down = wait_level(gw, "elevated", 7)
        self.assertGreaterEqual(down["limits"], 0.5)
        self.assertLess(down["limits"], 0.75)
        normal = wait_level(gw, "normal", 7)
        self.assertLess(normal["limits"], 1)
        h.eventually(lambda: general(gw)["limits"] == 1, timeout=5)
        status, headers, _ = get(gw, h.new_client_address())
        self.assertEqual((status, headers.get("x-tollgate-mode")), (200, None))
        self.assertEqual(headers["x-ratelimit-limit"], "8")
        # Every transition counted and logged with its reason.
        m = gw.metrics()
        for a, b in (("normal", "high"), ("high", "severe"), ("severe", "high"), ("high", "elevated"),
                     ("elevated", "normal")):
            self.assertEqual(m.value("tollgate_attack_transitions_total", category="general",
                                     **{"from": a, "to": b}), 1, (a, b))
        self.assertEqual(m.value("tollgate_attack_level", category="general"), 0)
        self.assertIsNone(m.get("tollgate_attack_level", category="quiet"))
        self.assertGreater(m.value("tollgate_requests_total", category="general",
                                   decision="under_attack"), 0)
        log = gw.process.output()
        self.assertIn("attack mode: category general normal -> high: rate", log)
        self.assertIn("x the baseline", log)
        self.assertIn("attack mode: category general severe -> high: rate", log)

    def test_forced_through_the_admin_api(self):
        gw = self.gw
        status, seen = admin(gw, "PUT", "/admin/attack-mode",
                             {"category": "general", "level": "severe", "for": "2s"})
        self.assertEqual((status, seen["level"], seen["forced"]), (200, "severe", True), seen)
        self.assertIsNotNone(seen["until"])
        self.assertEqual(get(gw, h.new_client_address())[0], 503)
        self.assertEqual(get(gw, ALLOWED)[0], 200)
        # Its time over, automatic again: normal, the limits restored in steps.
        wait_level(gw, "normal", 5)
        h.eventually(lambda: get(gw, h.new_client_address())[0] == 200, timeout=3)
        # Until released.
        status, seen = admin(gw, "PUT", "/admin/attack-mode", {"category": "general", "level": "high"})
        self.assertEqual((status, seen["until"]), (200, None))
        time.sleep(1.5)
        self.assertEqual(general(gw)["level"], "high")
        self.assertEqual(get(gw, h.new_client_address())[0], 428)
        # A reload keeps the level, from its first request on.
        self.assertIn("in force", gw.reload(gateway_file(), POLICY))
        self.assertEqual(get(gw, h.new_client_address())[0], 428)
        self.assertEqual(general(gw)["level"], "high")
        status, seen = admin(gw, "DELETE", "/admin/attack-mode/general")
        self.assertEqual((status, seen["level"], seen["forced"]), (200, "normal", False))
        # Refusals, each with its reason.
        for body, code in (({"category": "general", "level": "panic"}, 400),
                           ({"category": "quiet", "level": "high"}, 404),
                           ({"category": "general", "level": "high", "for": "forever"}, 400),
                           ({"level": "high"}, 400),
                           ({"category": "general", "level": "high", "colour": "red"}, 400)):
            self.assertEqual(admin(gw, "PUT", "/admin/attack-mode", body)[0], code, body)
        self.assertEqual(admin(gw, "DELETE", "/admin/attack-mode/nope")[0], 404)
        self.assertEqual(admin(gw, "POST", "/admin/attack-mode")[0], 405)
        self.assertIn("admin audit: action=force_attack_mode target=general level=high",
                      gw.process.output())


if __name__ == "__main__":
    unittest.main()
