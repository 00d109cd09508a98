"""The penalty ladder (docs/design.md §16, issue 24) through a real gateway and a real upstream:
a client walked up every step by its own 429s, an upstream's 401s (failed_auth) and failed
proofs, seeing each step's X-RateLimit-Warning and the step in its 403/429 bodies, the access
log and the metrics; read_only refusing POST while GET passes; a throttle scaling the limits the
headers show; a timed ban ending and the score decaying; the admin API showing and resetting a
client by address and by identity (a signed-in client's points follow its token across
addresses).

Run: /usr/bin/python3 tests/graduated/test_ladder.py BUILD_DIR [unittest args]
"""

import collections
import json
import os
import sys
import time
import unittest

import jwt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402

SECRET = "ladder-test-secret-of-32-bytes!!"
os.environ["TOLLGATE_TEST_LADDER_SECRET"] = SECRET

# `general` limits hard (1/m, burst 2) and asks proofs; `reads` is generous, so a client's
# step shows on answers its limits would let through.
POLICY = """
violations:
  failed_auth: { levels: [network] }   # one address alone never raises a requirement
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 2 } }
      per_user: { key: { jwt_claim: sub }, short: { rate: 1/m, burst: 2 } }
    pow: { enabled: true, base_bits: 4, step_bits: 1, max_bits: 8 }
    status_violations: { 401: failed_auth }
  reads:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 10 } }
    status_violations: { 401: failed_auth }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
penalties:
  points: { rate_limited: 1, pow_failed: 2, failed_auth: 3 }
  decay: 1/2s
  steps:
    - { at: 2, action: warn }
    - { at: 4, action: throttle, factor: 0.5, for: 3s }
    - { at: 6, action: read_only, for: 3s }
    - { at: 9, action: pow }
    - { at: 13, action: ban, for: 2s }
"""


def gateway_file():
    return h.gateway_yaml(routes=()).replace(
        "routes:\n",
        "routes:\n  - { match: { path_prefix: /reads/ }, category: reads, upstream: app }\n").replace(
        "default_route:",
        "identity:\n  jwt:\n    algorithms: [HS256]\n    secret_env: TOLLGATE_TEST_LADDER_SECRET\n"
        "logging: { level: info, format: json, access_log: '{dir}/access.log' }\n"
        "default_route:")


def request(gw, method, path, xff, headers=""):
    """(status, headers, body) of one request from client `xff`."""
    body = "Content-Length: 0\r\n" if method == "POST" else ""
    return h.http_request(gw.port, f"{method} {path} HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: {xff}\r\n"
                                   f"{headers}{body}Connection: close\r\n\r\n")


def admin(gw, method, path):
    status, _, text = h.http_request(
        gw.admin_port, f"{method} {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")
    return status, (json.loads(text) if text else None)


def warning(headers):
    return headers.get("x-ratelimit-warning")


class Ladder(h.GatewayCase):
    POLICY = POLICY

    @classmethod
    def gateway_file(cls):
        return gateway_file()

    def access_lines(self, client):
        with open(os.path.join(self.gw.dir, "access.log")) as f:
            return [json.loads(line) for line in f if f'"client":"{client}"' in line]

    def test_a_client_walks_up_the_ladder_and_down(self):
        gw = self.gw
        ip = h.new_client_address()
        before = gw.metrics()
        # Two pass; each 429 after is a point of rate_limited.
        for _ in range(2):
            self.assertEqual(request(gw, "GET", "/a", ip)[0], 200)
        status, headers, _ = request(gw, "GET", "/a", ip)  # 1 point
        self.assertEqual(status, 429)
        self.assertIsNone(warning(headers))
        request(gw, "GET", "/a", ip)  # 2: warn
        status, headers, body = request(gw, "GET", "/a", ip)  # 3
        self.assertEqual((status, warning(headers)), (429, "warn"))
        self.assertEqual(json.loads(body)["step"], "warn")
        # An upstream's 401 is a failed_auth violation: 3 points (3 -> 6 passes throttle at 4
        # and lands on read_only).
        status, headers, _ = request(gw, "GET", "/reads/x?status=401", ip)
        self.assertEqual((status, warning(headers)), (401, "warn"))
        # read_only: GET passes (with the step named), POST and DELETE are refused.
        status, headers, _ = request(gw, "GET", "/reads/x", ip)
        self.assertEqual((status, warning(headers)), (200, "read_only"))
        for method in ("POST", "DELETE"):
            status, headers, body = request(gw, method, "/reads/x", ip)
            self.assertEqual((status, warning(headers)), (403, "read_only"), body)
            problem = json.loads(body)
            self.assertEqual((problem["code"], problem["step"]), ("read_only", "read_only"))
        # Its limits are not throttled on read_only: the full burst of 10 shows.
        self.assertEqual(request(gw, "GET", "/reads/x", ip)[1]["x-ratelimit-limit"], "10")
        # Three more 429s: 9, the pow step. General asks a proof before its limits.
        for _ in range(3):
            self.assertEqual(request(gw, "GET", "/a", ip)[0], 429)
        status, headers, body = request(gw, "GET", "/a", ip)
        self.assertEqual((status, warning(headers)), (428, "pow"), body)
        self.assertEqual(json.loads(body)["code"], "pow_required")
        # Two failed proofs (2 points each): 13, banned for 2 s.
        for _ in range(2):
            status, headers, body = request(gw, "GET", "/a", ip, "X-PoW-Solution: nonsense\r\n")
            self.assertEqual(status, 428, body)
        status, headers, body = request(gw, "GET", "/reads/x", ip)
        self.assertEqual((status, warning(headers)), (403, "ban"), body)
        problem = json.loads(body)
        self.assertEqual((problem["code"], problem["step"]), ("banned", "ban"))
        self.assertIn(headers["retry-after"], ("1", "2"))
        # The admin API: score 13, on the ban step until its end.
        status, seen = admin(gw, "GET", f"/admin/clients/{ip}")
        self.assertEqual(status, 200, seen)
        self.assertEqual((seen["score"], seen["step"]), (13, "ban"))
        self.assertIsNotNone(seen["until"])
        # Metrics: one client per step entered, the ban step held now.
        after = gw.metrics()
        for step in ("warn", "read_only", "pow", "ban"):
            self.assertEqual(after.value("tollgate_penalty_transitions_total", step=step) -
                             before.value("tollgate_penalty_transitions_total", step=step), 1, step)
        self.assertGreaterEqual(after.value("tollgate_penalty_clients", step="ban"), 1)
        self.assertEqual(after.value("tollgate_table_entries", table="penalties") > 0, True)
        # The access log names the step of each answer. A line is written once its answer is
        # sent, by the worker that served it: the last may come a moment after the client read
        # it, and two workers' lines need not come in the order of the requests.
        self.assertTrue(h.eventually(lambda: len(self.access_lines(ip)) == 17))
        steps = collections.Counter(line.get("step") for line in self.access_lines(ip))
        self.assertEqual(steps, {None: 4, "warn": 2, "read_only": 7, "pow": 3, "ban": 1})
        # The ban lasts 2 s; the score decays by one every 2 s without new points: after the
        # ban the client stands where its score puts it, below the ban.
        time.sleep(2.3)
        status, seen = admin(gw, "GET", f"/admin/clients/{ip}")
        self.assertLessEqual(seen["score"], 12)
        self.assertGreaterEqual(seen["score"], 10)
        self.assertEqual(seen["step"], "pow")
        status, headers, _ = request(gw, "GET", "/reads/x", ip)
        self.assertEqual((status, warning(headers)), (200, "pow"))
        # DELETE resets: no step, no header.
        status, reset = admin(gw, "DELETE", f"/admin/clients/{ip}")
        self.assertEqual((status, reset["reset"]), (200, True))
        status, headers, _ = request(gw, "GET", "/reads/x", ip)
        self.assertEqual((status, warning(headers)), (200, None))
        self.assertEqual(admin(gw, "GET", f"/admin/clients/{ip}")[1]["score"], 0)

    def test_throttle_scales_the_limits_for_its_time(self):
        gw = self.gw
        ip = h.new_client_address()
        for _ in range(2):
            request(gw, "GET", "/a", ip)
        for _ in range(4):  # 4 points: throttle x0.5 for 3 s
            self.assertEqual(request(gw, "GET", "/a", ip)[0], 429)
        status, headers, _ = request(gw, "GET", "/reads/x", ip)
        self.assertEqual((status, warning(headers)), (200, "throttle"))
        self.assertEqual(headers["x-ratelimit-limit"], "5")  # burst 10 x 0.5
        self.assertIn('"ipv4_individual.short";q=5;', headers["ratelimit-policy"])
        # Its neighbour keeps the whole burst.
        other = h.new_client_address()
        self.assertEqual(request(gw, "GET", "/reads/x", other)[1]["x-ratelimit-limit"], "10")
        # 6 s later the step (3 s) is over and 3 points have decayed: 1, below warn.
        time.sleep(6.2)
        status, headers, _ = request(gw, "GET", "/reads/x", ip)
        self.assertEqual((status, warning(headers)), (200, None))
        self.assertEqual(headers["x-ratelimit-limit"], "10")

    def test_an_identity_is_one_client_whatever_its_address(self):
        gw = self.gw
        sub = "user-" + os.urandom(4).hex()
        token = jwt.encode({"sub": sub, "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
        auth = f"Authorization: Bearer {token}\r\n"
        # Its 429s from three addresses add up on one client: its identity.
        answers = [request(gw, "GET", "/a", h.new_client_address(), auth)[0] for _ in range(5)]
        self.assertEqual(answers, [200, 200, 429, 429, 429])
        status, headers, _ = request(gw, "GET", "/reads/x", h.new_client_address(), auth)
        self.assertEqual((status, warning(headers)), (200, "warn"))
        status, seen = admin(gw, "GET", f"/admin/clients/per_user/{sub}")
        self.assertEqual((status, seen["score"], seen["step"]), (200, 3, "warn"))
        # Its addresses have no points of their own; an anonymous request from one carries none.
        ip = h.new_client_address()
        self.assertIsNone(warning(request(gw, "GET", "/reads/x", ip)[1]))
        # A limit not keyed on the identity cannot name a client; an unknown one neither.
        self.assertEqual(admin(gw, "GET", "/admin/clients/ipv4_individual/x")[0], 400)
        self.assertEqual(admin(gw, "GET", "/admin/clients/nope/x")[0], 404)
        self.assertEqual(admin(gw, "GET", "/admin/clients/not-an-address")[0], 400)
        self.assertEqual(admin(gw, "PUT", f"/admin/clients/{ip}")[0], 405)
        self.assertEqual(admin(gw, "DELETE", f"/admin/clients/per_user/{sub}")[1]["reset"], True)
        self.assertIsNone(warning(request(gw, "GET", "/reads/x", ip, auth)[1]))


class NoLadder(h.GatewayCase):
    """Without `penalties` nothing changes: no header, no points, and the admin API says so."""

    POLICY = POLICY[:POLICY.index("penalties:")]
    GATEWAY = h.gateway_yaml()

    def test_no_ladder_no_step(self):
        ip = h.new_client_address()
        answers = [request(self.gw, "GET", "/a", ip) for _ in range(8)]
        self.assertEqual([a[0] for a in answers], [200, 200] + [429] * 6)
        self.assertTrue(all(warning(a[1]) is None for a in answers))
        self.assertNotIn('"step"', answers[-1][2])
        status, body = admin(self.gw, "GET", f"/admin/clients/{ip}")
        self.assertEqual(status, 404)
        self.assertIn("no penalty ladder", body["detail"])


if __name__ == "__main__":
    unittest.main()
