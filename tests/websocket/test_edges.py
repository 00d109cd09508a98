"""Edges of the WebSocket path: handshakes as browsers write them, frames that come with the
handshake, upgrades on keep-alive connections, upstream connections after a tunnel, places
released by refused upgrades, control frames and the message limit, permessage-deflate end to
end, /64 counting for IPv6, upstreams that misbehave at the upgrade (a scripted upstream in
this process)."""

import asyncio
import base64
import hashlib
import json
import os
import signal
import socket
import socketserver
import struct
import threading
import time

import harness as h
import websockets

GATEWAY = h.gateway_yaml(
    routes=[("/ws/scripted/", "websocket", "scripted"), ("/ws/few/", "ws_few"),
            ("/ws/close/", "ws_close")],
    upstreams=['scripted: { endpoints: ["127.0.0.1:SCRIPTED"], connect_timeout: 1s, '
               "response_timeout: 2s }"])

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      ipv6_subnet: { short: { rate: 1000/s, burst: 1000 } }
    websocket:
      max_message_size: 100KiB
      messages: { rate: 1000/s, burst: 1000 }
  ws_few:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      ipv6_subnet: { short: { rate: 1000/s, burst: 1000 } }
    websocket:
      max_connections_per_address: 2
  ws_close:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 999 } }
    websocket:
      messages: { rate: 5/s, burst: 5 }
      on_excess: close
"""


class ScriptedUpstream(socketserver.ThreadingTCPServer):
    """Reads one request head per connection and answers by path: /ws/scripted/h2c switches
    to another protocol, /ws/scripted/vanish accepts the WebSocket and closes the TCP
    connection once the test sets `vanish` (the tunnel is open)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        self.recorded = []  # request heads of /ws/scripted/record
        self.vanish = threading.Event()  # /ws/scripted/vanish closes once it is set
        super().__init__(("127.0.0.1", 0), self.Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.shutdown()
        self.server_close()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            s = self.request
            s.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    return
                data += chunk
            head = data.split(b"\r\n\r\n")[0].decode("latin-1")
            target = head.split(" ")[1]
            key = ""
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "sec-websocket-key":
                    key = value.strip()
            if target.startswith("/ws/scripted/h2c"):
                s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n")
                # Open until the gateway, which cannot use the answer, closes its side.
                try:
                    while s.recv(4096):
                        pass
                except OSError:
                    pass
            elif target.startswith("/ws/scripted/record"):
                # Keeps the head for the test; accepts, then waits for the close frame (masked,
                # as the gateway relays the client's) and answers it.
                self.server.recorded.append(head)
                s.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Accept: " + h.accept_of(key) +
                           "\r\n\r\n").encode())
                try:
                    s.recv(4096)
                    s.sendall(b"\x88\x02\x03\xe8")
                except OSError:
                    pass
            elif target.startswith("/ws/scripted/hang"):
                # Accepts, then reads and never answers anything (a hung application).
                s.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Accept: " + h.accept_of(key) +
                           "\r\n\r\n").encode())
                s.settimeout(15)
                try:
                    while s.recv(65536):
                        pass
                except OSError:
                    pass
            elif target.startswith("/ws/scripted/vanish"):
                s.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Accept: " + h.accept_of(key) +
                           "\r\n\r\n").encode())
                self.server.vanish.wait(5)
            s.close()


class Edges(h.GatewayCase):
    POLICY = POLICY

    @classmethod
    def gateway_file(cls):
        return GATEWAY.replace("SCRIPTED", str(cls.scripted.server_address[1]))

    @classmethod
    def setUpClass(cls):
        cls.scripted = ScriptedUpstream()
        try:
            super().setUpClass()
        except Exception:
            cls.scripted.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.scripted.stop()

    def connect(self, path, xff=None, **kw):
        return h.connect(self.gw, path, xff=xff or h.new_client_address(), **kw)

    def handshake(self, path, xff, extra=""):
        key = base64.b64encode(os.urandom(16)).decode()
        return key, (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: WebSocket\r\n"
                     f"Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                     f"Sec-WebSocket-Version: 13\r\nX-Forwarded-For: {xff}\r\n{extra}\r\n").encode()

    async def test_browser_style_handshake_is_classified_websocket(self):
        # As Firefox writes it: "Connection: keep-alive, Upgrade", and "Upgrade: WebSocket".
        key, raw_head = self.handshake("/ws/browser", h.new_client_address())
        reader, writer = await asyncio.open_connection("127.0.0.1", self.gw.port)
        try:
            writer.write(raw_head)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            status, headers = h.parse_head(head[:-4])
            self.assertEqual(status, 101)
            self.assertEqual(headers["sec-websocket-accept"], h.accept_of(key))
            self.assertEqual(headers["x-ratelimit-limit"], "1000")  # the websocket category's
            self.assertEqual(await h.open_tunnels(self.gw, "websocket", 1), 1)
            raw = h.RawWs(reader, writer)
            await raw.send(h.RawWs.frame(0x1, b"browser"))
            self.assertEqual(await raw.read_message(), (0x1, b"browser"))
        finally:
            writer.transport.abort()

    async def test_frames_sent_with_the_handshake_are_relayed(self):
        key, raw_head = self.handshake("/ws/early", h.new_client_address())
        reader, writer = await asyncio.open_connection("127.0.0.1", self.gw.port)
        try:
            # The handshake and two frames in one write, before any 101.
            writer.write(raw_head + h.RawWs.frame(0x1, b"early one") + h.RawWs.frame(0x2, b"early two"))
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            self.assertEqual(h.parse_head(head[:-4])[0], 101)
            raw = h.RawWs(reader, writer)
            self.assertEqual(await raw.read_message(), (0x1, b"early one"))
            self.assertEqual(await raw.read_message(), (0x2, b"early two"))
        finally:
            writer.transport.abort()

    async def test_upgrade_on_a_keep_alive_connection_after_a_request(self):
        xff = h.new_client_address()
        reader, writer = await asyncio.open_connection("127.0.0.1", self.gw.port)
        try:
            writer.write(f"GET /plain HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {xff}\r\n\r\n".encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            status, headers = h.parse_head(head[:-4])
            self.assertEqual(status, 200)
            await reader.readexactly(int(headers["content-length"]))
            key, raw_head = self.handshake("/ws/after-get", xff)
            writer.write(raw_head)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            status, headers = h.parse_head(head[:-4])
            self.assertEqual(status, 101)
            self.assertEqual(headers["sec-websocket-accept"], h.accept_of(key))
            raw = h.RawWs(reader, writer)
            await raw.send(h.RawWs.frame(0x1, b"on the same connection"))
            self.assertEqual(await raw.read_message(), (0x1, b"on the same connection"))
        finally:
            writer.transport.abort()

    async def test_upstream_connections_of_tunnels_never_serve_requests(self):
        xff = h.new_client_address()
        get = f"GET /plain?n=N HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {xff}\r\nConnection: close\r\n\r\n"
        # A plain request first, so that the pool holds an idle upstream connection.
        self.assertEqual(h.http_request(self.gw.port, get.replace("N", "0"))[0], 200)
        for round in range(3):
            async with self.connect("/ws/pool", xff=xff) as ws:
                await ws.send("tunnel")
                self.assertEqual(await ws.recv(), "tunnel")
            for i in range(4):
                status, headers, body = h.http_request(self.gw.port, get.replace("N", f"{round}{i}"))
                self.assertEqual(status, 200, body)
                self.assertEqual(json.loads(body)["target"], f"/plain?n={round}{i}")

    async def test_upgrade_with_a_body_is_refused(self):
        _, raw_head = self.handshake("/ws/body", h.new_client_address(), "Content-Length: 5\r\n")
        status, _, body = await asyncio.to_thread(h.http_request, self.gw.port, raw_head + b"hello")
        self.assertEqual(status, 400, body)
        self.assertEqual(self.echo.stats()["ws_open"], 0)

    async def test_refused_and_failed_upgrades_release_their_places(self):
        xff = h.new_client_address()
        for _ in range(5):  # max_connections_per_address is 2
            with self.assertRaises(websockets.InvalidStatusCode) as caught:
                await self.connect("/ws/few/r?status=403", xff=xff)
            self.assertEqual(caught.exception.status_code, 403)
        conns = [await self.connect("/ws/few/ok", xff=xff) for _ in range(2)]
        for ws in conns:
            await ws.close()

    async def test_control_frames_do_not_count_against_the_message_limit(self):
        async with self.connect("/ws/close/pings", compression=None) as ws:
            for i in range(20):
                await asyncio.wait_for(await ws.ping(f"p{i}".encode()), 3)
            for i in range(5):  # the whole burst of 5 is still there
                await ws.send(f"m{i}")
            for i in range(5):
                self.assertEqual(await ws.recv(), f"m{i}")
            self.assertTrue(ws.open)

    async def test_permessage_deflate_negotiated_end_to_end(self):
        async with self.connect("/ws/deflate") as ws:
            self.assertIn("permessage-deflate", ws.response_headers.get("Sec-WebSocket-Extensions", ""))
            self.assertEqual([e.name for e in ws.extensions], ["permessage-deflate"])
            # Sizes count as sent on the wire: 200 KiB of zeros compress far below 100 KiB.
            await ws.send(bytes(200 * 1024))
            self.assertEqual(await ws.recv(), bytes(200 * 1024))
        async with self.connect("/ws/deflate?deflate=0") as ws:
            # The upstream declined: the client must not compress, and does not.
            self.assertNotIn("Sec-WebSocket-Extensions", ws.response_headers)
            self.assertEqual(ws.extensions, [])
            await ws.send("plain")
            self.assertEqual(await ws.recv(), "plain")
            await ws.send(bytes(200 * 1024))  # uncompressed now: over the limit
            self.assertEqual((await h.closed_with(ws))[0], 1009)

    async def test_rsv1_without_negotiated_deflate_closes_1002(self):
        # The client offers deflate, the upstream declines: RSV1 is then a protocol error.
        raw = await h.RawWs.open(self.gw.port, "/ws/deflate?deflate=0", deflate=True,
                                 headers={"X-Forwarded-For": h.new_client_address()})
        try:
            self.assertEqual(raw.status, 101)
            self.assertNotIn("sec-websocket-extensions", raw.headers)
            await raw.send(h.RawWs.frame(0x1, b"\x00", rsv=0x4))
            self.assertEqual(await raw.close_code(), 1002)
        finally:
            raw.abort()
        # Accepted by the upstream: RSV1 on a compressed message passes.
        raw = await h.RawWs.open(self.gw.port, "/ws/deflate", deflate=True,
                                 headers={"X-Forwarded-For": h.new_client_address()})
        try:
            self.assertEqual(raw.status, 101)
            self.assertIn("permessage-deflate", raw.headers.get("sec-websocket-extensions", ""))
            import zlib
            c = zlib.compressobj(wbits=-15)
            payload = c.compress(b"compressed hello") + c.flush(zlib.Z_SYNC_FLUSH)
            await raw.send(h.RawWs.frame(0x1, payload[:-4], rsv=0x4))
            op, reply = await raw.read_message()
            self.assertEqual(op, 0x1)
            # The echo's answer may be compressed too.
            d = zlib.decompressobj(wbits=-15)
            try:
                text = d.decompress(reply + b"\x00\x00\xff\xff")
            except zlib.error:
                text = reply
            self.assertEqual(text, b"compressed hello")
        finally:
            raw.abort()

    async def test_ipv6_connections_are_counted_per_64(self):
        # ws_few: 2 per address; 2001:db8:1:2::1 and ::2 share a /64, 2001:db8:1:3::1 does not.
        a = [await self.connect("/ws/few/v6", xff="2001:db8:1:2::1") for _ in range(2)]
        try:
            with self.assertRaises(websockets.InvalidStatusCode) as caught:
                await self.connect("/ws/few/v6", xff="2001:db8:1:2::2")
            self.assertEqual(caught.exception.status_code, 429)
            self.assertEqual(caught.exception.headers["X-RateLimit-Reason"], "too_many_connections")
            other = await self.connect("/ws/few/v6", xff="2001:db8:1:3::1")
            await other.send("other /64")
            self.assertEqual(await other.recv(), "other /64")
            await other.close()
        finally:
            for ws in a:
                await ws.close()

    async def test_connections_are_counted_per_category(self):
        xff = h.new_client_address()
        few = [await self.connect("/ws/few/x", xff=xff) for _ in range(2)]
        try:
            with self.assertRaises(websockets.InvalidStatusCode):
                await self.connect("/ws/few/x", xff=xff)
            # The same address in another category is not refused.
            async with self.connect("/ws/elsewhere", xff=xff) as ws:
                await ws.send("elsewhere")
                self.assertEqual(await ws.recv(), "elsewhere")
        finally:
            for ws in few:
                await ws.close()

    async def recorded_upgrade(self, field_lines):
        """Sends an upgrade to the recording upstream with exactly `field_lines` (beside Host,
        Upgrade, the key and the version); returns the upstream's request head as
        (request line, {lower-case name: [values]})."""
        self.scripted.recorded.clear()
        key = base64.b64encode(os.urandom(16)).decode()
        reader, writer = await asyncio.open_connection("127.0.0.1", self.gw.port)
        try:
            writer.write((f"GET /ws/scripted/record?x=1 HTTP/1.1\r\nHost: tollgate.test\r\n"
                          f"Upgrade: websocket\r\nSec-WebSocket-Key: {key}\r\n"
                          f"Sec-WebSocket-Version: 13\r\n" + "".join(l + "\r\n" for l in field_lines) +
                          "\r\n").encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            status, headers = h.parse_head(head[:-4])
            self.assertEqual(status, 101)
            self.assertEqual(headers["sec-websocket-accept"], h.accept_of(key))
            raw = h.RawWs(reader, writer)
            await raw.send(h.RawWs.frame(0x8, struct.pack(">H", 1000)))
            self.assertEqual(await raw.close_code(), 1000)
        finally:
            writer.transport.abort()
        self.assertEqual(len(self.scripted.recorded), 1)
        lines = self.scripted.recorded[0].split("\r\n")
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields.setdefault(name.strip().lower(), []).append(value.strip())
        return lines[0], fields

    async def test_the_upstream_gets_the_handshake_and_forwarding_headers(self):
        xff = h.new_client_address()
        request_line, fields = await self.recorded_upgrade([
            "Connection: keep-alive, Upgrade, X-Hop", "X-Hop: secret", "Keep-Alive: timeout=5",
            "X-Kept: yes", "Sec-WebSocket-Protocol: p1, p2",
            "Sec-WebSocket-Extensions: permessage-deflate", f"X-Forwarded-For: {xff}"])
        one = lambda name: ", ".join(fields.get(name, []))
        self.assertEqual(request_line, "GET /ws/scripted/record?x=1 HTTP/1.1")
        self.assertEqual(one("upgrade").lower(), "websocket")
        self.assertEqual([t.strip().lower() for t in one("connection").split(",")], ["upgrade"])
        self.assertNotIn("x-hop", fields, "a header named by Connection was forwarded")
        self.assertNotIn("keep-alive", fields)
        self.assertEqual(one("x-kept"), "yes")
        self.assertEqual(one("host"), "tollgate.test")
        self.assertEqual(one("sec-websocket-version"), "13")
        self.assertEqual(one("sec-websocket-protocol"), "p1, p2")
        self.assertEqual(one("sec-websocket-extensions"), "permessage-deflate")
        self.assertEqual(one("x-real-ip"), xff)
        self.assertEqual(one("x-forwarded-for"), f"{xff}, 127.0.0.1")
        self.assertEqual(one("x-forwarded-proto"), "http")

    async def test_headers_named_by_a_second_connection_line_are_not_forwarded(self):
        # Regression: only the first Connection line was read (fixed in 962e8ae).
        _, fields = await self.recorded_upgrade(["Connection: Upgrade", "Connection: X-Hop",
                                                 "X-Hop: secret"])
        self.assertNotIn("x-hop", fields, "a header named by Connection was forwarded")

    async def test_connection_tokens_on_two_field_lines_still_upgrade(self):
        # Regression: only the first Connection line was read; the echo answered 200.
        key, _ = self.handshake("/ws/two-lines", "")
        reader, writer = await asyncio.open_connection("127.0.0.1", self.gw.port)
        try:
            writer.write((f"GET /ws/two-lines HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                          f"Connection: keep-alive\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                          f"X-Forwarded-For: {h.new_client_address()}\r\n\r\n").encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            status, headers = h.parse_head(head[:-4])
            self.assertEqual(status, 101)
            self.assertEqual(headers.get("sec-websocket-accept"), h.accept_of(key))
            raw = h.RawWs(reader, writer)
            await raw.send(h.RawWs.frame(0x1, b"two lines"))
            self.assertEqual(await raw.read_message(), (0x1, b"two lines"))
        finally:
            writer.transport.abort()

    async def test_gateway_close_reaches_the_client_when_the_upstream_never_answers(self):
        # (Once a bug: the client got no close frame, only its connection dropped after 5 s.)
        ws = await self.connect("/ws/scripted/hang", compression=None, close_timeout=10)
        try:
            start = time.monotonic()
            await ws.send(os.urandom(100 * 1024 + 1))  # over max_message_size
            code, _, _ = await h.closed_with(ws, timeout=8)
            self.assertEqual(code, 1009)
            self.assertLess(time.monotonic() - start, 3.0)
        finally:
            ws.transport.abort()

    async def test_sigterm_close_reaches_the_client_when_the_upstream_never_answers(self):
        # Regression: the client got no 1001, its connection was dropped after 5 s.
        gw = h.Gateway(GATEWAY.replace("SCRIPTED", str(self.scripted.server_address[1])),
                       POLICY, self.echo.port)
        try:
            ws = await h.connect(gw, "/ws/scripted/hang", close_timeout=10)
            try:
                gw.process.signal(signal.SIGTERM)
                code, _, _ = await h.closed_with(ws, timeout=8)
                self.assertEqual(code, 1001)
            finally:
                ws.transport.abort()
            self.assertEqual(await asyncio.to_thread(gw.process.wait, 11), 0)
        finally:
            gw.stop()

    async def test_upstream_switching_to_another_protocol_is_a_502(self):
        m0 = self.gw.metrics()
        with self.assertRaises(websockets.InvalidStatusCode) as caught:
            await self.connect("/ws/scripted/h2c")
        self.assertEqual(caught.exception.status_code, 502)
        m1 = self.gw.metrics()
        key = dict(category="websocket", reason="upstream_failed")
        self.assertEqual(m1.value("tollgate_websocket_upgrades_refused_total", **key)
                         - m0.value("tollgate_websocket_upgrades_refused_total", **key), 1)

    async def test_upstream_vanishing_after_the_101_ends_the_client_connection(self):
        m0 = self.gw.metrics()
        self.scripted.vanish.clear()
        start = time.monotonic()
        ws = await self.connect("/ws/scripted/vanish")
        try:
            # The upstream goes once the gateway relays the tunnel.
            self.assertEqual(await h.open_tunnels(self.gw, "websocket", 1), 1)
            self.scripted.vanish.set()
            code, _, _ = await h.closed_with(ws, timeout=8)
        finally:
            ws.transport.abort()
        self.assertLess(time.monotonic() - start, 3.0)
        self.assertIn(code, (None, 1001, 1011))  # no close frame (1006), or the gateway's own
        self.assertTrue(await h.wait_until(
            lambda: self.gw.metrics().get("tollgate_websocket_connections", category="websocket") == 0))
        m1 = self.gw.metrics()
        ended = sum(m1.value("tollgate_websocket_closes_total", by=by) - m0.value("tollgate_websocket_closes_total", by=by)
                    for by in ("client", "upstream", "gateway"))
        self.assertEqual(ended, 1)


SHORT_HTTP_TIMEOUTS = """
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
limits: { header_timeout: 1s, body_timeout: 1s, keepalive_timeout: 1s }
upstreams: { app: { endpoints: ["{echo}"], connect_timeout: 1s, response_timeout: 1s, idle_timeout: 1s } }
default_route: { category: general, upstream: app }
policies: ["{policy}"]
"""

GENERAL_ONLY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
"""


class HttpTimeoutsAndDefaults(h.GatewayCase):
    """A gateway whose HTTP timeouts are all 1 s and whose only category, reached by the
    default route, has no websocket block (the defaults of docs/design.md §6 apply)."""

    GATEWAY, POLICY = SHORT_HTTP_TIMEOUTS, GENERAL_ONLY

    async def test_http_timeouts_do_not_cut_a_quiet_tunnel(self):
        # An upgrade on the default route: category general, default options (idle 60 s).
        async with h.connect(self.gw, "/anything") as ws:
            self.assertEqual(await h.open_tunnels(self.gw, "general", 1), 1)
            # Time is the condition: quiet past header, body, keep-alive and upstream timeouts.
            await asyncio.sleep(2.5)
            await ws.send("after a quiet while")
            self.assertEqual(await asyncio.wait_for(ws.recv(), 3), "after a quiet while")
            data = os.urandom(900 * 1024)  # under the default max_message_size of 1 MiB
            await ws.send(data)
            self.assertEqual(await asyncio.wait_for(ws.recv(), 5), data)
        self.assertEqual(ws.close_code, 1000)

    async def test_default_max_message_size_is_1_mib(self):
        async with h.connect(self.gw, "/anything", compression=None, max_size=None) as ws:
            await ws.send(bytes(1 << 20))
            self.assertEqual(len(await asyncio.wait_for(ws.recv(), 5)), 1 << 20)
            await ws.send(bytes((1 << 20) + 1))
            self.assertEqual((await h.closed_with(ws))[0], 1009)


if __name__ == "__main__":
    h.main()
