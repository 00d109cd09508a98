"""Upgrades meet the gate like any request (docs/design.md §5 order of decisions): a 429 from the
limits, a 428 challenge that a proof of work (solved by `tollgate pow solve`) pays for, a ban
(403) earned from the upstream's refusals, and the matching refusal metrics."""

import asyncio
import json
import subprocess

import harness as h
import websockets

GATEWAY = h.gateway_yaml(routes=[("/ws/pow/", "ws_pow"), ("/ws/ban/", "ws_ban")])

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 2 } }
  ws_pow:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
    pow: { enabled: true, on_limit: true, on_limit_bits: 6, base_bits: 6 }
  ws_ban:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
    status_violations: { 403: failed_auth }
violations:
  failed_auth: { levels: [individual], ban: { threshold: 2, duration: 1h } }
"""


class Refusals(h.GatewayCase):
    GATEWAY, POLICY = GATEWAY, POLICY

    def refused(self, m0, m1, category, reason):
        key = dict(category=category, reason=reason)
        return (m1.value("tollgate_websocket_upgrades_refused_total", **key)
                - m0.value("tollgate_websocket_upgrades_refused_total", **key))

    async def test_upgrade_over_the_rate_limit_gets_429_with_headers(self):
        m0 = self.gw.metrics()
        xff = h.new_client_address()
        for _ in range(2):  # burst 2
            async with h.connect(self.gw, "/ws/r", xff=xff) as ws:
                await ws.send("in")
                self.assertEqual(await ws.recv(), "in")
        served = self.echo.stats()["requests"]
        raw = await h.RawWs.open(self.gw.port, "/ws/r", headers={"X-Forwarded-For": xff})
        try:
            self.assertEqual(raw.status, 429)
            hd = raw.headers
            self.assertEqual(hd["x-ratelimit-reason"], "burst_exhausted")
            self.assertEqual(hd["x-ratelimit-limit"], "2")
            self.assertEqual(hd["x-ratelimit-remaining"], "0")
            self.assertGreaterEqual(int(hd["retry-after"]), 1)
            self.assertEqual(hd["ratelimit-policy"], '"ipv4_individual.short";q=2;w=7200')
            self.assertEqual(hd["content-type"], "application/problem+json")
            body = json.loads(await asyncio.wait_for(raw.reader.readexactly(int(hd["content-length"])), 3))
            self.assertEqual((body["status"], body["code"]), (429, "rate_limit_exceeded"))
        finally:
            raw.abort()
        self.assertEqual(self.echo.stats()["requests"], served, "the upstream was contacted")
        self.assertEqual(self.refused(m0, self.gw.metrics(), "websocket", "limited"), 1)

    async def test_messages_do_not_spend_the_request_limit(self):
        # burst 2, 1/h: two upgrades pass however many messages the first one carries.
        xff = h.new_client_address()
        async with h.connect(self.gw, "/ws/m", xff=xff) as ws:
            self.assertEqual(ws.response_headers["X-RateLimit-Remaining"], "1")
            for i in range(20):
                await ws.send(f"m{i}")
                self.assertEqual(await ws.recv(), f"m{i}")
        async with h.connect(self.gw, "/ws/m", xff=xff) as ws:
            self.assertEqual(ws.response_headers["X-RateLimit-Remaining"], "0")
        with self.assertRaises(websockets.InvalidStatusCode) as caught:
            await h.connect(self.gw, "/ws/m", xff=xff)
        self.assertEqual(caught.exception.status_code, 429)

    async def test_pay_to_pass_upgrade_with_a_proof_of_work(self):
        m0 = self.gw.metrics()
        xff = h.new_client_address()
        async with h.connect(self.gw, "/ws/pow/a", xff=xff):
            pass
        # Over the limit: a 428 challenge instead of a 429.
        with self.assertRaises(websockets.InvalidStatusCode) as caught:
            await h.connect(self.gw, "/ws/pow/a", xff=xff)
        self.assertEqual(caught.exception.status_code, 428)
        challenge = caught.exception.headers["X-PoW-Challenge"]
        bits = caught.exception.headers["X-PoW-Difficulty"]
        self.assertEqual(bits, "6")
        solved = await asyncio.to_thread(
            subprocess.run, [h.binary("tollgate"), "pow", "solve", challenge, bits],
            capture_output=True, text=True, timeout=20)
        self.assertEqual(solved.returncode, 0, solved.stderr)
        nonce = solved.stdout.strip()
        # The proof pays for this one upgrade.
        async with h.connect(self.gw, "/ws/pow/a", xff=xff,
                             extra_headers={"X-PoW-Solution": f"{challenge}:{nonce}"}) as ws:
            await ws.send("paid")
            self.assertEqual(await ws.recv(), "paid")
        # Spent: the same proof again is refused.
        with self.assertRaises(websockets.InvalidStatusCode) as caught:
            await h.connect(self.gw, "/ws/pow/a", xff=xff,
                            extra_headers={"X-PoW-Solution": f"{challenge}:{nonce}"})
        self.assertEqual(caught.exception.status_code, 428)
        m1 = self.gw.metrics()
        self.assertEqual(self.refused(m0, m1, "ws_pow", "challenged"), 2)
        self.assertEqual(m1.value("tollgate_requests_total", category="ws_pow", decision="pow_passed")
                         - m0.value("tollgate_requests_total", category="ws_pow", decision="pow_passed"), 1)

    async def test_refusals_by_the_upstream_earn_a_ban(self):
        m0 = self.gw.metrics()
        xff = h.new_client_address()
        for _ in range(2):  # threshold 2: each 403 of the upstream is a failed_auth violation
            with self.assertRaises(websockets.InvalidStatusCode) as caught:
                await h.connect(self.gw, "/ws/ban/a?status=403", xff=xff)
            self.assertEqual(caught.exception.status_code, 403)
        served = self.echo.stats()["requests"]
        raw = await h.RawWs.open(self.gw.port, "/ws/ban/a", headers={"X-Forwarded-For": xff})
        try:
            self.assertEqual(raw.status, 403)
            self.assertIn("retry-after", raw.headers)
            self.assertNotIn("x-ratelimit-limit", raw.headers)  # refused before the limit check
            body = json.loads(await asyncio.wait_for(
                raw.reader.readexactly(int(raw.headers["content-length"])), 3))
            self.assertEqual(body["code"], "banned")
        finally:
            raw.abort()
        self.assertEqual(self.echo.stats()["requests"], served, "the upstream was contacted")
        # A ban covers every category; a neighbour is not banned.
        with self.assertRaises(websockets.InvalidStatusCode) as caught:
            await h.connect(self.gw, "/ws/other", xff=xff)
        self.assertEqual(caught.exception.status_code, 403)
        async with h.connect(self.gw, "/ws/ban/a", xff=h.new_client_address()) as ws:
            await ws.send("not banned")
            self.assertEqual(await ws.recv(), "not banned")
        m1 = self.gw.metrics()
        self.assertEqual(self.refused(m0, m1, "ws_ban", "upstream_refused"), 2)
        self.assertEqual(self.refused(m0, m1, "ws_ban", "banned"), 1)
        self.assertEqual(self.refused(m0, m1, "websocket", "banned"), 1)


if __name__ == "__main__":
    h.main()
