"""WebSocket relay through tollgate: messages both ways, fragmentation, sizes, control frames,
closes from either side, refusals by the upstream, subprotocols, server push, many connections.
One gateway and one echo for the module; every case its own client address."""

import asyncio
import json
import os
import random

import harness as h
import websockets

GATEWAY = h.gateway_yaml(routes=[("/ws/many/", "ws_many")],
                         limits="{ max_connections_per_address: 1000 }")

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
    websocket:
      max_message_size: 100KiB
      messages: { rate: 1000/s, burst: 1000, cost: per_message }
      on_excess: close
  ws_many:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
    websocket:
      messages: { rate: 1000/s, burst: 1000 }
      max_connections_per_address: 500
"""


class Relay(h.GatewayCase):
    GATEWAY, POLICY = GATEWAY, POLICY

    def connect(self, path="/ws/echo", **kw):
        return h.connect(self.gw, path, xff=h.new_client_address(), **kw)

    async def test_text_and_binary_echo(self):
        async with self.connect() as ws:
            await ws.send("héllo, wörld ✓")
            reply = await ws.recv()
            self.assertIsInstance(reply, str)
            self.assertEqual(reply, "héllo, wörld ✓")
            data = bytes(range(256)) * 3
            await ws.send(data)
            reply = await ws.recv()
            self.assertIsInstance(reply, bytes)
            self.assertEqual(reply, data)
            await ws.send(b"")  # an empty binary message is a message too
            self.assertEqual(await ws.recv(), b"")

    async def test_101_carries_rate_limit_headers(self):
        async with self.connect() as ws:  # a fresh address: the first request of its bucket
            hd = ws.response_headers
            self.assertEqual(hd["X-RateLimit-Limit"], "1000")
            self.assertEqual(hd["X-RateLimit-Remaining"], "999")
            self.assertEqual(hd["X-RateLimit-Level"], "ipv4_individual")
            self.assertTrue(hd["X-RateLimit-Reset"].isdigit())
            self.assertEqual(hd["RateLimit-Policy"], '"ipv4_individual.short";q=1000;w=1')
            self.assertEqual(hd["RateLimit"], '"ipv4_individual.short";r=999;t=1')
            self.assertEqual(hd["Upgrade"].lower(), "websocket")

    def messages_counted(self, m0):
        """(from_client, from_upstream) messages of category websocket since `m0`."""
        m1 = self.gw.metrics()
        return tuple(m1.value("tollgate_websocket_messages_total", category="websocket", direction=d)
                     - m0.value("tollgate_websocket_messages_total", category="websocket", direction=d)
                     for d in ("from_client", "from_upstream"))

    async def test_fragmented_message_arrives_whole(self):
        m0 = self.gw.metrics()
        for compression in (None, "deflate"):
            with self.subTest(compression=compression):
                async with self.connect(compression=compression) as ws:
                    await ws.send(iter(["first ", "second ", "", "third"]))
                    self.assertEqual(await ws.recv(), "first second third")
                    chunks = [os.urandom(3000) for _ in range(5)]
                    await ws.send(iter(chunks))
                    self.assertEqual(await ws.recv(), b"".join(chunks))
                    # A control frame between messages, and the connection goes on.
                    await asyncio.wait_for(await ws.ping(b"between"), 3)
                    await ws.send("after")
                    self.assertEqual(await ws.recv(), "after")
        # A fragmented message counts once, however many frames it came in.
        self.assertEqual(self.messages_counted(m0), (6, 6))

    async def test_70000_byte_message(self):
        # Over 65535: the 64-bit length form, both ways; random bytes do not compress either.
        data = os.urandom(70000)
        text = "".join(random.choice("abcdefghij") for _ in range(70000))
        m0 = self.gw.metrics()
        for compression in (None, "deflate"):
            with self.subTest(compression=compression):
                async with self.connect(compression=compression) as ws:
                    await ws.send(data)
                    self.assertEqual(await ws.recv(), data)
                    await ws.send(text)
                    self.assertEqual(await ws.recv(), text)
        # The echo sends big messages in several frames: still one message each.
        self.assertEqual(self.messages_counted(m0), (4, 4))

    async def test_max_message_size_exact_passes_one_more_closes_1009(self):
        before = self.echo.stats()["ws_messages"]
        async with self.connect(compression=None) as ws:
            exact = os.urandom(100 * 1024)
            await ws.send(exact)
            self.assertEqual(await ws.recv(), exact)
            await ws.send(os.urandom(100 * 1024 + 1))
            code, _, received = await h.closed_with(ws)
            self.assertEqual(code, 1009)
            self.assertEqual(received, [])
        # The message over the limit never reached the upstream.
        self.assertEqual(self.echo.stats()["ws_messages"] - before, 1)
        # A fragmented message is judged on its whole size: 2 x 60 KiB in fragments.
        async with self.connect(compression=None) as ws:
            await ws.send(iter([os.urandom(60 * 1024), os.urandom(60 * 1024)]))
            code, _, received = await h.closed_with(ws)
            self.assertEqual(code, 1009)
            self.assertEqual(received, [])

    async def test_ping_pong(self):
        async with self.connect() as ws:
            for payload in (b"", b"ping-1", os.urandom(125)):
                waiter = await ws.ping(payload)
                await asyncio.wait_for(waiter, 3)  # websockets checks the pong's payload
            await ws.send("still here")
            self.assertEqual(await ws.recv(), "still here")

    async def test_clean_close_from_client(self):
        m0 = self.gw.metrics()
        ws = await self.connect()
        await ws.send("x")
        await ws.recv()
        await ws.close(4000, "client done")
        # The close handshake completed: the upstream's answer (Beast echoes the code, not the
        # reason) came back through the gateway.
        self.assertIsNotNone(ws.close_rcvd)
        self.assertEqual(ws.close_code, 4000)
        self.assertEqual((ws.close_sent.code, ws.close_sent.reason), (4000, "client done"))
        m1 = self.gw.metrics()
        self.assertEqual(m1.value("tollgate_websocket_closes_total", code="other", by="client")
                         - m0.value("tollgate_websocket_closes_total", code="other", by="client"), 1)

    async def test_clean_close_from_upstream(self):
        async with self.connect() as ws:
            await ws.send("close:4001:bye")
            code, reason, received = await h.closed_with(ws)
            self.assertEqual((code, reason, received), (4001, "bye", []))
            await ws.wait_closed()
            self.assertEqual(ws.close_code, 4001)

    async def test_upstream_refuses_the_upgrade(self):
        m0 = self.gw.metrics()
        with self.assertRaises(websockets.InvalidStatusCode) as caught:
            async with self.connect("/ws/echo?status=403"):
                pass
        self.assertEqual(caught.exception.status_code, 403)
        # The upstream's own answer, body included, is relayed.
        raw = await h.RawWs.open(self.gw.port, "/ws/echo?status=403",
                                 headers={"X-Forwarded-For": h.new_client_address()})
        try:
            self.assertEqual(raw.status, 403)
            self.assertEqual(raw.headers.get("content-type"), "text/plain")
            body = await asyncio.wait_for(raw.reader.readexactly(int(raw.headers["content-length"])), 3)
            self.assertEqual(body, b"upgrade refused\n")
        finally:
            raw.close()
        m1 = self.gw.metrics()
        key = dict(category="websocket", reason="upstream_refused")
        self.assertEqual(m1.value("tollgate_websocket_upgrades_refused_total", **key)
                         - m0.value("tollgate_websocket_upgrades_refused_total", **key), 2)

    async def test_subprotocol_negotiated_end_to_end(self):
        async with self.connect(subprotocols=["chat.v2", "chat.v1"]) as ws:
            self.assertEqual(ws.subprotocol, "chat.v2")  # the upstream picks the first offered
        async with self.connect("/ws/echo?protocol=chat.v1", subprotocols=["chat.v2", "chat.v1"]) as ws:
            self.assertEqual(ws.subprotocol, "chat.v1")  # the upstream's choice, not the first
            await ws.send("p")
            self.assertEqual(await ws.recv(), "p")
        async with self.connect() as ws:
            self.assertIsNone(ws.subprotocol)

    async def test_server_push(self):
        async with self.connect() as ws:
            await ws.send("send:50:1000")
            expected = bytes((ord("a") + i % 26) for i in range(1000))
            for i in range(50):
                msg = await asyncio.wait_for(ws.recv(), 3)
                self.assertEqual(msg, expected, f"message {i}")
            await ws.send("after the push")
            self.assertEqual(await ws.recv(), "after the push")

    @h.bounded(40)
    async def test_200_connections_with_interleaved_messages(self):
        n = 200
        address = h.new_client_address()
        conns = await asyncio.gather(*(h.connect(self.gw, f"/ws/many/{i}", xff=address,
                                                 compression=None, open_timeout=15)
                                       for i in range(n)))
        try:
            self.assertEqual(await h.open_tunnels(self.gw, "ws_many", n), n)

            async def talk(i, ws, r):
                await ws.send(f"conn {i} round {r} " + "x" * (i % 50))
                return await asyncio.wait_for(ws.recv(), 10)

            for r in range(3):
                # Every connection sends before any reads: the messages interleave in the
                # gateway's workers; each reply must come back on its own connection.
                replies = await asyncio.gather(*(talk(i, ws, r) for i, ws in enumerate(conns)))
                for i, reply in enumerate(replies):
                    self.assertEqual(reply, f"conn {i} round {r} " + "x" * (i % 50))
        finally:
            await asyncio.gather(*(ws.close() for ws in conns), return_exceptions=True)
        for ws in conns:
            self.assertEqual(ws.close_code, 1000)
        gauge = await h.wait_until(
            lambda: self.gw.metrics().get("tollgate_websocket_connections", category="ws_many") == 0)
        self.assertTrue(gauge, "the gauge went back to 0")

    async def test_gateway_close_during_a_blocked_push_keeps_frames_whole(self):
        # Regression: a socket-wide cancel cut the blocked write mid-frame (fixed in 962e8ae).
        raw = await h.RawWs.open(self.gw.port, "/ws/blocked", rcvbuf=8192,
                                 headers={"X-Forwarded-For": h.new_client_address()})
        try:
            self.assertEqual(raw.status, 101)
            await raw.push_until_blocked()
            # Over max_message_size while the push waits for this client: the gateway closes.
            await raw.send(h.RawWs.frame(0x2, os.urandom(100 * 1024 + 1)))
            self.assertTrue(await raw.read_by_gateway(), "the gateway did not read the frame")
            raw.writer.transport.resume_reading()
            messages, code, leftover = await raw.read_until_close()
            expected = h.pattern(100000)
            self.assertTrue(all(m == (0x2, expected) for m in messages), "a relayed message damaged")
            self.assertEqual(len(leftover), 0, f"the stream ended inside a frame ({len(leftover)} "
                             f"bytes of it) after {len(messages)} whole messages")
            self.assertEqual(code, 1009)
        finally:
            raw.abort()


if __name__ == "__main__":
    h.main()
