"""The WebSocket metrics on the admin listener after a known scenario, on a fresh gateway: every
value checked exactly, and the whole /metrics text checked by `promtool check metrics` when
promtool is installed."""

import asyncio
import shutil
import socket
import struct
import subprocess

import harness as h
import websockets

GATEWAY = h.gateway_yaml(
    routes=[("/ws/close/", "ws_close"), ("/ws/drop/", "ws_drop"), ("/ws/tight/", "ws_tight"),
            ("/ws/dead/", "ws_dead", "dead")],
    upstreams=['dead: { endpoints: ["127.0.0.1:DEAD"], connect_timeout: 1s }'])

OPEN = "limits:\n      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }"

POLICY = f"""
categories:
  general:
    {OPEN}
  websocket:
    {OPEN}
    websocket:
      max_message_size: 1KiB
      messages: {{ rate: 1000/s, burst: 1000 }}
      max_connections_per_address: 2
  ws_close:
    {OPEN}
    websocket:
      messages: {{ rate: 5/s, burst: 2 }}
      on_excess: close
  ws_drop:
    {OPEN}
    websocket:
      messages: {{ rate: 5/s, burst: 2 }}
      on_excess: drop
  ws_tight:
    limits:
      ipv4_individual: {{ short: {{ rate: 1/h, burst: 1 }} }}
  ws_dead:
    {OPEN}
"""

CATEGORIES = ["general", "websocket", "ws_close", "ws_drop", "ws_tight", "ws_dead"]


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class MetricsAfterAScenario(h.Case):
    default_bound = 30.0

    def setUp(self):
        self.echo = h.Echo()
        self.addCleanup(self.echo.stop)
        self.gw = h.Gateway(GATEWAY.replace("DEAD", str(closed_port())), POLICY, self.echo.port)
        self.addCleanup(self.gw.stop)

    def connect(self, path, xff=None, **kw):
        return h.connect(self.gw, path, xff=xff or h.new_client_address(), **kw)

    async def scenario(self):
        # A: three messages echoed, a client close 1000.
        async with self.connect("/ws/a") as ws:
            for i in range(3):
                await ws.send(f"a{i}")
                self.assertEqual(await ws.recv(), f"a{i}")
        # B: the upstream closes with 4001 (code label "other").
        async with self.connect("/ws/b") as ws:
            await ws.send("close:4001:bye")
            self.assertEqual((await h.closed_with(ws))[0], 4001)
        # C: two connections from one address, the third refused; the gauge shows them; then
        # they vanish without a close frame (1006).
        address = h.new_client_address()
        pair = [await self.connect("/ws/c", xff=address) for _ in range(2)]
        with self.assertRaises(websockets.InvalidStatusCode) as caught:
            await self.connect("/ws/c", xff=address)
        self.assertEqual(caught.exception.status_code, 429)
        self.assertEqual(await h.open_tunnels(self.gw, "websocket", 2), 2)
        for ws in pair:
            ws.transport.abort()
        # D: over the message limit, mode close: the third message of a burst of 2.
        async with self.connect("/ws/close/d", compression=None) as ws:
            for i in range(3):
                await ws.send(f"d{i}")
            self.assertEqual((await h.closed_with(ws))[0], 1008)
        # E: mode drop: the third is dropped, the connection goes on and closes cleanly.
        async with self.connect("/ws/drop/e", compression=None) as ws:
            for i in range(3):
                await ws.send(f"e{i}")
            self.assertEqual([await ws.recv() for _ in range(2)], ["e0", "e1"])
        # F: the upstream refuses the upgrade.
        with self.assertRaises(websockets.InvalidStatusCode) as caught:
            await self.connect("/ws/f?status=403")
        self.assertEqual(caught.exception.status_code, 403)
        # G: the upgrade itself over its rate limit: the second from one address.
        address = h.new_client_address()
        async with self.connect("/ws/tight/g", xff=address) as ws:
            pass
        with self.assertRaises(websockets.InvalidStatusCode) as caught:
            await self.connect("/ws/tight/g", xff=address)
        self.assertEqual(caught.exception.status_code, 429)
        hd = caught.exception.headers
        self.assertEqual(hd["X-RateLimit-Reason"], "burst_exhausted")
        self.assertGreaterEqual(int(hd["Retry-After"]), 1)
        self.assertEqual((hd["X-RateLimit-Limit"], hd["X-RateLimit-Remaining"]), ("1", "0"))
        # H: the upstream cannot be reached.
        with self.assertRaises(websockets.InvalidStatusCode) as caught:
            await self.connect("/ws/dead/h")
        self.assertEqual(caught.exception.status_code, 502)
        # I: a message over max_message_size (1 KiB): 1009.
        async with self.connect("/ws/i", compression=None) as ws:
            await ws.send(b"i" * 1025)
            self.assertEqual((await h.closed_with(ws))[0], 1009)
        # J: an unmasked frame: 1002.
        raw = await h.RawWs.open(self.gw.port, "/ws/j", headers={"X-Forwarded-For": h.new_client_address()})
        self.assertEqual(raw.status, 101)
        await raw.send(h.RawWs.frame(0x1, b"unmasked", mask=False))
        self.assertEqual(await raw.close_code(), 1002)
        raw.abort()
        # K: server push: one message up, three down.
        async with self.connect("/ws/k") as ws:
            await ws.send("send:3:10")
            for _ in range(3):
                self.assertEqual(len(await ws.recv()), 10)

    async def test_websocket_metrics_after_a_known_scenario(self):
        await self.scenario()
        # Everything has ended: every gauge back at 0.
        def all_closed():
            m = self.gw.metrics()
            return all(m.get("tollgate_websocket_connections", category=c) == 0 for c in CATEGORIES)
        self.assertTrue(await h.wait_until(all_closed), self.gw.metrics_text())
        self.assertTrue(await h.wait_until(lambda: self.echo.stats()["ws_open"] == 0))
        text = self.gw.metrics_text()
        m = h.Metrics(text)
        v = lambda name, **l: m.value(name, **l)
        with self.subTest("messages"):
            msgs = "tollgate_websocket_messages_total"
            self.assertEqual(v(msgs, category="websocket", direction="from_client"), 5)  # A3 B1 K1
            self.assertEqual(v(msgs, category="websocket", direction="from_upstream"), 6)  # A3 K3
            self.assertEqual(v(msgs, category="ws_close", direction="from_client"), 2)
            self.assertEqual(v(msgs, category="ws_drop", direction="from_client"), 2)
            self.assertEqual(v(msgs, category="ws_drop", direction="from_upstream"), 2)
            self.assertEqual(v(msgs, category="general", direction="from_client"), 0)
        with self.subTest("limited"):
            lim = "tollgate_websocket_messages_limited_total"
            self.assertEqual(v(lim, category="ws_close", action="close"), 1)
            self.assertEqual(v(lim, category="ws_close", action="drop"), 0)
            self.assertEqual(v(lim, category="ws_drop", action="drop"), 1)
            self.assertEqual(v(lim, category="ws_drop", action="close"), 0)
            self.assertEqual(v(lim, category="websocket", action="close"), 0)
        with self.subTest("closes"):
            closes = {(l["code"], l["by"]): val for n, l, val in m.samples
                      if n == "tollgate_websocket_closes_total" and val != 0}
            self.assertEqual(closes, {
                ("1000", "client"): 4,    # A, E, G's first, K
                ("other", "upstream"): 1,  # B: 4001
                ("1006", "client"): 2,    # C
                ("1008", "gateway"): 1,   # D
                ("1009", "gateway"): 1,   # I
                ("1002", "gateway"): 1,   # J
            })
        with self.subTest("refused upgrades"):
            refused = {(l["category"], l["reason"]): val for n, l, val in m.samples
                       if n == "tollgate_websocket_upgrades_refused_total" and val != 0}
            self.assertEqual(refused, {
                ("websocket", "too_many_connections"): 1,
                ("websocket", "upstream_refused"): 1,
                ("ws_tight", "limited"): 1,
                ("ws_dead", "upstream_failed"): 1,
            })
        with self.subTest("requests"):
            req = "tollgate_requests_total"
            self.assertEqual(v(req, category="ws_tight", decision="limited"), 1)
            self.assertEqual(v(req, category="ws_tight", decision="allowed"), 1)
        with self.subTest("client connections"):
            self.assertTrue(await h.wait_until(
                lambda: self.gw.metrics().get("tollgate_connections_active", listener="public") == 0))
        with self.subTest("no client address in the metrics"):
            self.assertNotIn("10.", "".join(f'"{x}"' for _, l, _ in m.samples for x in l.values()))
        self.assertIsNotNone(shutil.which("promtool"),
                             "promtool not found: apt-get install prometheus")
        with self.subTest("promtool"):
            r = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                               capture_output=True, timeout=20)
            out = (r.stdout + r.stderr).decode()
            self.assertEqual(r.returncode, 0, out)
            self.assertEqual(out.strip(), "", out)


class AccessLog(h.Case):
    """With the access log on, the upgrade is logged as its request (status 101) and the
    tunnel's end on a line of its own: how it closed, what it relayed, how long it lived."""

    async def test_a_tunnel_is_logged_at_the_101_and_at_its_end(self):
        echo = h.Echo()
        self.addCleanup(echo.stop)
        gw = h.Gateway(h.gateway_yaml() + "logging: { level: info, access_log: true }\n",
                       POLICY_LOGGED, echo.port)
        self.addCleanup(gw.stop)
        client = h.new_client_address()
        async with h.connect(gw, "/ws/logged?x=1", xff=client) as ws:
            for i in range(3):
                await ws.send(f"m{i}")
                self.assertEqual(await ws.recv(), f"m{i}")
            await ws.send("close:4001:bye")
            self.assertEqual((await h.closed_with(ws))[0], 4001)
        upgrade = gw.process.wait_for_line(f"access {client} \"GET /ws/logged?x=1")
        self.assertIn(" 101 category=websocket decision=allowed", upgrade)
        end = gw.process.wait_for_line("websocket closed")
        self.assertIn(f"access {client} \"GET /ws/logged?x=1\" category=websocket websocket closed "
                      "code=4001 by=upstream messages_from_client=4 messages_from_upstream=3 ", end)
        seconds = float(end.rsplit(" ", 1)[1].rstrip("s"))
        self.assertTrue(0 <= seconds < 10, end)


POLICY_LOGGED = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
"""


if __name__ == "__main__":
    h.main()
