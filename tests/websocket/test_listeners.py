"""WebSocket upgrades over the other kinds of listener: TLS (a certificate made by the openssl
command, the client trusting it) and the PROXY protocol (the address it names is the one
counted)."""

import asyncio
import os
import shutil
import socket
import ssl
import struct
import tempfile

import harness as h
import websockets

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
    websocket:
      messages: { rate: 1000/s, burst: 1000 }
      max_connections_per_address: 2
"""

ROUTES = """
admin: { address: 127.0.0.1, port: 0 }
workers: 2
upstreams: { app: { endpoints: ["{echo}"] } }
routes:
  - { match: { path_prefix: /ws/, header: { Upgrade: websocket } }, category: websocket, upstream: app }
default_route: { category: general, upstream: app }
policies: ["{policy}"]
"""


class Tls(h.Case):
    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="tollgate-ws-tls-")
        cls.echo = None
        try:
            cert, key = h.make_certificate(cls.certs)
            cls.echo = h.Echo()
            listener = (f"listeners: [{{ name: public, address: 127.0.0.1, port: 0, "
                        f"tls: {{ certificate: {cert}, private_key: {key} }} }}]\n")
            cls.gw = h.Gateway(listener + ROUTES, POLICY, cls.echo.port)
        except Exception:
            if cls.echo:
                cls.echo.stop()
            shutil.rmtree(cls.certs, ignore_errors=True)
            raise
        cls.context = ssl.create_default_context(cafile=cert)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.echo.stop()
        shutil.rmtree(cls.certs, ignore_errors=True)

    async def test_upgrade_over_tls(self):
        async with h.connect(self.gw, "", uri=self.gw.uri("/ws/tls", "wss"), ssl=self.context) as ws:
            self.assertEqual(ws.response_headers["X-RateLimit-Level"], "ipv4_individual")
            await ws.send("over tls")
            self.assertEqual(await ws.recv(), "over tls")
            # Bigger than one TLS record both ways, and a fragmented one.
            data = os.urandom(70000)
            await ws.send(data)
            self.assertEqual(await ws.recv(), data)
            await ws.send(iter([b"a" * 20000, b"b" * 20000]))
            self.assertEqual(await ws.recv(), b"a" * 20000 + b"b" * 20000)
            await asyncio.wait_for(await ws.ping(b"tls ping"), 3)
            await ws.send("send:20:20000")
            for _ in range(20):
                self.assertEqual(len(await asyncio.wait_for(ws.recv(), 3)), 20000)
            await ws.send("close:4001:bye over tls")
            code, reason, _ = await h.closed_with(ws)
            self.assertEqual((code, reason), (4001, "bye over tls"))

    async def test_client_close_over_tls(self):
        ws = await h.connect(self.gw, "", uri=self.gw.uri("/ws/tls", "wss"), ssl=self.context)
        await ws.send("x")
        self.assertEqual(await ws.recv(), "x")
        await ws.close(4000, "done")
        self.assertIsNotNone(ws.close_rcvd)
        self.assertEqual(ws.close_code, 4000)
        self.assertTrue(await h.wait_until(lambda: self.echo.stats()["ws_open"] == 0))

    async def test_untrusting_client_is_refused(self):
        # The certificate really is checked: a client trusting nothing fails the handshake.
        with self.assertRaises(ssl.SSLError):
            async with h.connect(self.gw, "", uri=self.gw.uri("/ws/tls", "wss"),
                                 ssl=ssl.create_default_context(cafile=None, cadata=None)):
                pass


class ProxyProtocol(h.GatewayCase):
    GATEWAY = ("listeners: [{ name: public, address: 127.0.0.1, port: 0, proxy_protocol: true }]\n"
               + ROUTES)
    POLICY = POLICY

    async def connect_as(self, address):
        sock = socket.create_connection(("127.0.0.1", self.gw.port), timeout=5)
        sock.sendall(f"PROXY TCP4 {address} 127.0.0.1 1234 80\r\n".encode())
        sock.setblocking(False)
        try:
            return await h.connect(self.gw, "", uri=self.gw.uri("/ws/proxied"), sock=sock)
        except BaseException:
            sock.close()
            raise

    async def connect_v2(self, address):
        """As connect_as, with a PROXY protocol v2 header (binary)."""
        sig = b"\r\n\r\n\x00\r\nQUIT\n"
        body = socket.inet_aton(address) + socket.inet_aton("127.0.0.1") + struct.pack(">HH", 1234, 80)
        sock = socket.create_connection(("127.0.0.1", self.gw.port), timeout=5)
        sock.sendall(sig + bytes([0x21, 0x11]) + struct.pack(">H", len(body)) + body)
        sock.setblocking(False)
        try:
            return await h.connect(self.gw, "", uri=self.gw.uri("/ws/proxied"), sock=sock)
        except BaseException:
            sock.close()
            raise

    async def test_upgrade_behind_proxy_protocol_v2(self):
        conns = [await self.connect_v2("10.1.2.6") for _ in range(2)]
        try:
            await conns[0].send("v2")
            self.assertEqual(await conns[0].recv(), "v2")
            # Counted under 10.1.2.6 whichever version named it.
            with self.assertRaises(websockets.InvalidStatusCode) as caught:
                await self.connect_as("10.1.2.6")
            self.assertEqual(caught.exception.status_code, 429)
        finally:
            for ws in conns:
                await ws.close()

    async def test_upgrade_behind_proxy_protocol(self):
        ws = await self.connect_as("10.1.2.3")
        try:
            await ws.send("through a proxy")
            self.assertEqual(await ws.recv(), "through a proxy")
            await ws.send(b"\x00" * 70000)
            self.assertEqual(await ws.recv(), b"\x00" * 70000)
        finally:
            await ws.close()
        self.assertEqual(ws.close_code, 1000)

    async def test_the_proxied_address_is_the_one_counted(self):
        # max_connections_per_address is 2: two from 10.1.2.4, the third refused; 10.1.2.5 (and
        # everyone else behind the same proxy peer) is not affected.
        first = [await self.connect_as("10.1.2.4") for _ in range(2)]
        try:
            with self.assertRaises(websockets.InvalidStatusCode) as caught:
                await self.connect_as("10.1.2.4")
            self.assertEqual(caught.exception.status_code, 429)
            self.assertEqual(caught.exception.headers["X-RateLimit-Reason"], "too_many_connections")
            other = await self.connect_as("10.1.2.5")
            await other.send("other")
            self.assertEqual(await other.recv(), "other")
            await other.close()
        finally:
            for ws in first:
                await ws.close()


if __name__ == "__main__":
    h.main()
