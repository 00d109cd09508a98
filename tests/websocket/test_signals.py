"""Signals and open WebSockets: SIGTERM closes every one with 1001 and the process exits within
its grace period (shutdown.drain_timeout, 10 s: docs/configuration.md); SIGHUP's new message
limits apply to new connections only.
Each case its own gateway (SIGTERM ends it)."""

import asyncio
import signal
import struct
import time

import harness as h
import websockets

GATEWAY = h.gateway_yaml()

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
    websocket:
      messages: { rate: 5/s, burst: BURST, cost: per_message }
      on_excess: close
"""

GRACE = 10.0  # shutdown.drain_timeout, 10s by default (docs/configuration.md, "Command line")


class Signals(h.Case):
    default_bound = 25.0

    def setUp(self):
        self.echo = h.Echo()
        self.addCleanup(self.echo.stop)

    def start(self, burst=100):
        gw = h.Gateway(GATEWAY, POLICY.replace("BURST", str(burst)), self.echo.port)
        self.addCleanup(gw.stop)
        return gw

    async def test_sigterm_closes_websockets_1001_and_exits(self):
        gw = self.start()
        conns = [await h.connect(gw, f"/ws/{i}", xff=h.new_client_address()) for i in range(5)]
        for i, ws in enumerate(conns):
            await ws.send(f"before {i}")
            self.assertEqual(await ws.recv(), f"before {i}")
        self.assertEqual(self.echo.stats()["ws_open"], 5)
        start = time.monotonic()
        gw.process.signal(signal.SIGTERM)
        results = await asyncio.gather(*(h.closed_with(ws, timeout=GRACE) for ws in conns))
        for code, _, received in results:
            self.assertEqual((code, received), (1001, []))
        status = await asyncio.to_thread(gw.process.wait, GRACE + 1)
        elapsed = time.monotonic() - start
        self.assertEqual(status, 0, gw.process.output())
        # Clients that answer the close at once do not make the gateway wait out the grace.
        self.assertLess(elapsed, 3.0)
        for ws in conns:
            self.assertEqual(ws.close_code, 1001)  # the handshake completed from the client's view
        # The upstream's side was told too, and closed.
        self.assertTrue(await h.wait_until(lambda: self.echo.stats()["ws_open"] == 0))

    async def test_sigterm_with_a_client_that_never_answers_exits_within_the_grace(self):
        gw = self.start()
        polite = await h.connect(gw, "/ws/polite", xff=h.new_client_address())
        mute = await h.RawWs.open(gw.port, "/ws/mute", headers={"X-Forwarded-For": h.new_client_address()})
        self.assertEqual(mute.status, 101)
        start = time.monotonic()
        gw.process.signal(signal.SIGTERM)
        code, _, _ = await h.closed_with(polite, timeout=GRACE)
        self.assertEqual(code, 1001)
        # The mute client gets its close frame too, and never answers it.
        f = await mute.read_frame(timeout=GRACE)
        self.assertIsNotNone(f)
        self.assertEqual(f[0], 0x8)
        self.assertEqual(f[1][:2], b"\x03\xe9")  # 1001
        status = await asyncio.to_thread(gw.process.wait, GRACE + 1.5)
        elapsed = time.monotonic() - start
        mute.abort()
        self.assertEqual(status, 0, f"did not exit within {GRACE + 1.5} s:\n" + gw.process.output())
        self.assertLess(elapsed, GRACE + 1.5)

    async def test_sigterm_waits_for_a_slow_close_reply(self):
        gw = self.start()
        raw = await h.RawWs.open(gw.port, "/ws/slow", headers={"X-Forwarded-For": h.new_client_address()})
        try:
            self.assertEqual(raw.status, 101)
            gw.process.signal(signal.SIGTERM)
            self.assertEqual(await raw.read_frame(), (0x8, struct.pack(">H", 1001)))
            # A time on purpose: that the process has not exited can only be seen over a while.
            await asyncio.sleep(1.5)
            self.assertIsNone(gw.process.p.poll(), "exited without waiting for the close reply")
            await raw.send(h.RawWs.frame(0x8, struct.pack(">H", 1001)))
            self.assertTrue(await raw.eof(3), "the gateway did not end the connection after the reply")
            raw.close()
            start = time.monotonic()
            status = await asyncio.to_thread(gw.process.wait, GRACE)
            self.assertEqual(status, 0)
            self.assertLess(time.monotonic() - start, 1.5, "the closed tunnel kept the process waiting")
        finally:
            raw.abort()

    async def test_sigterm_during_a_blocked_push_sends_1001_after_whole_frames(self):
        # Regression: a socket-wide cancel cut the blocked write mid-frame (fixed in 962e8ae).
        gw = self.start()
        raw = await h.RawWs.open(gw.port, "/ws/blocked", rcvbuf=8192,
                                 headers={"X-Forwarded-For": h.new_client_address()})
        try:
            self.assertEqual(raw.status, 101)
            await raw.push_until_blocked()
            gw.process.signal(signal.SIGTERM)
            # The drain has begun (the tunnels are told to close) while the push is blocked.
            await asyncio.to_thread(gw.process.wait_for_line, "closing the listeners")
            raw.writer.transport.resume_reading()
            messages, code, leftover = await raw.read_until_close()
            expected = h.pattern(100000)
            self.assertTrue(all(m == (0x2, expected) for m in messages), "a relayed message damaged")
            self.assertEqual(len(leftover), 0, f"the stream ended inside a frame ({len(leftover)} "
                             f"bytes of it) after {len(messages)} whole messages")
            self.assertEqual(code, 1001)
        finally:
            raw.abort()
        self.assertEqual(await asyncio.to_thread(gw.process.wait, GRACE + 1), 0)

    async def test_sighup_message_limits_apply_to_new_connections_only(self):
        gw = self.start(burst=5)
        old = await h.connect(gw, "/ws/old", xff=h.new_client_address(), compression=None)
        line = gw.reload(GATEWAY, POLICY.replace("BURST", "20"))
        self.assertIn("in force", line, gw.process.output())
        new = await h.connect(gw, "/ws/new", xff=h.new_client_address(), compression=None)
        try:
            # The connection from before the reload survived it and keeps burst 5.
            for i in range(6):
                await old.send(f"old {i}")
            code, _, received = await h.closed_with(old)
            self.assertEqual(code, 1008)
            self.assertEqual(received, [f"old {i}" for i in range(5)])
            # The new one has burst 20.
            for i in range(15):
                await new.send(f"new {i}")
            for i in range(15):
                self.assertEqual(await asyncio.wait_for(new.recv(), 3), f"new {i}")
            # And back down: a reload to burst 3 leaves `new` at 20.
            line = gw.reload(GATEWAY, POLICY.replace("BURST", "3"))
            self.assertIn("in force", line, gw.process.output())
            newest = await h.connect(gw, "/ws/newest", xff=h.new_client_address(), compression=None)
            for i in range(4):
                await newest.send(f"newest {i}")
            code, _, _ = await h.closed_with(newest)
            self.assertEqual(code, 1008)
            await asyncio.sleep(1.0)  # time is the condition: `new` refills 5 messages' worth
            for i in range(8):
                await new.send(f"again {i}")
            for i in range(8):
                self.assertEqual(await asyncio.wait_for(new.recv(), 3), f"again {i}")
        finally:
            await old.close()
            await new.close()


if __name__ == "__main__":
    h.main()
