"""HTTP/2 to clients (docs/design.md §17, issue 25 items 1 and 2), through a real gateway and
clients that are not ours: curl (--http2, --http2-prior-knowledge), nghttp and h2load from
nghttp2-client, and Debian's python3-h2 for raw frames. Every stream takes the path of an
HTTP/1.1 request: exact limits over concurrent streams, the same headers and bodies, proof of
work in a header and in a cookie split over two fields, bodies streamed both ways, trailers
relayed, the access log and the metrics. The abuse of the frame layer (rapid reset, PING,
SETTINGS and empty-DATA floods, a CONTINUATION flood, a zero window, a stream reset in the middle
of its body) is answered with GOAWAY ENHANCE_YOUR_CALM or a reset, counted, and charged to the
client as a protocol_abuse violation, while the gateway keeps serving.

Run: /usr/bin/python3 tests/edge/test_http2.py BUILD_DIR [unittest args]
"""

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.errors  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402

import harness as h  # noqa: E402

POLICY = """
violations:
  protocol_abuse: { levels: [individual], ban: { threshold: 3, duration: 60s } }
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 5 } }
  bulk:
    limits:
      ipv4_individual: { short: { rate: 10000/s, burst: 10000 } }
  paid:
    pow: { enabled: false, on_limit: true, on_limit_bits: 8 }
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 1 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
"""


def gateway_file(tls_dir):
    """Two listeners with http2: plain (h2c with prior knowledge) and TLS (ALPN); a third TLS
    one without it. Body timeout short, so that a stalled stream is reset within the test."""
    text = h.gateway_yaml(limits="{ body_timeout: 1s, max_header_bytes: 4096 }")
    listeners = (
        "listeners:\n"
        "  - { name: public, address: 127.0.0.1, port: 0, http2: true }\n"
        "  - { name: secure, address: 127.0.0.1, port: 0, http2: true,\n"
        f"      tls: {{ certificate: '{tls_dir}/cert.pem', private_key: '{tls_dir}/key.pem' }} }}\n"
        "  - { name: old, address: 127.0.0.1, port: 0,\n"
        f"      tls: {{ certificate: '{tls_dir}/cert.pem', private_key: '{tls_dir}/key.pem' }} }}\n")
    text = listeners + text[text.index("\n") + 1:]
    text = text.replace("routes:\n", "routes:\n"
                        "  - { match: { path_prefix: /bulk/ }, category: bulk, upstream: app }\n"
                        "  - { match: { path_prefix: /paid/ }, category: paid, upstream: app }\n")
    return text + "logging: { access_log: stdout, format: json }\n"


_address = [0]


def client_address():
    """A client address of its own for each test (loopback is a trusted proxy here)."""
    _address[0] += 1
    return f"10.77.{_address[0] // 250}.{_address[0] % 250 + 1}"


def fnv1a64(data):
    value = 0xcbf29ce484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


class H2:
    """A raw HTTP/2 client on python3-h2 over a blocking socket."""

    def __init__(self, port, settings=None, tls=False, sock=None):
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.settimeout(10)
        if tls:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.set_alpn_protocols(["h2"])
            self.sock = context.wrap_socket(self.sock)
            assert self.sock.selected_alpn_protocol() == "h2"
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.flush()
        self.responses = {}
        self.ended = set()
        self.resets = {}
        self.goaway = None
        self.closed = False

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            try:
                self.sock.sendall(data)
            except OSError:
                self.closed = True

    def headers(self, path, xff, method="GET", extra=(), end_stream=True):
        sid = self.conn.get_next_available_stream_id()
        fields = [(":method", method), (":path", path), (":scheme", "http"),
                  (":authority", "gateway.test"), ("x-forwarded-for", xff)] + list(extra)
        self.conn.send_headers(sid, fields, end_stream=end_stream)
        self.flush()
        return sid

    def pump(self, until, timeout=10.0):
        """Reads events until `until()` holds, the connection ends, or `timeout` passes."""
        end = time.time() + timeout
        while not until() and not self.closed and time.time() < end:
            self.sock.settimeout(max(0.05, end - time.time()))
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, TimeoutError):
                break
            except OSError:
                self.closed = True
                break
            if not data:
                self.closed = True
                break
            for event in self.conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    r = self.responses.setdefault(event.stream_id, {"body": b""})
                    r["headers"] = {k.decode(): v.decode() for k, v in event.headers}
                elif isinstance(event, h2.events.DataReceived):
                    self.responses.setdefault(event.stream_id, {"body": b""})["body"] += event.data
                    self.conn.acknowledge_received_data(event.flow_controlled_length,
                                                        event.stream_id)
                elif isinstance(event, h2.events.TrailersReceived):
                    self.responses[event.stream_id]["trailers"] = {
                        k.decode(): v.decode() for k, v in event.headers}
                elif isinstance(event, h2.events.StreamEnded):
                    self.ended.add(event.stream_id)
                elif isinstance(event, h2.events.StreamReset):
                    self.resets[event.stream_id] = event.error_code
                elif isinstance(event, h2.events.ConnectionTerminated):
                    self.goaway = event.error_code
            self.flush()
        return until()

    def get(self, path, xff, **kw):
        sid = self.headers(path, xff, **kw)
        self.pump(lambda: sid in self.ended or sid in self.resets)
        return self.responses.get(sid)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Http2(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.echo = h.Echo()
        cls.scratch = tempfile.mkdtemp(prefix="tollgate-h2-")
        cert, key = h.make_certificate(cls.scratch)
        cls.gw = h.Gateway(gateway_file(cls.scratch), POLICY, cls.echo.port)
        lines = cls.gw.process.output().splitlines()
        cls.secure = h._port_after(next(x for x in lines if "listening on secure" in x))
        cls.old = h._port_after(next(x for x in lines if "listening on old" in x))

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.echo.stop()
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def curl(self, *args, port=None, scheme="http"):
        port = port or self.gw.port
        out = subprocess.run(["curl", "-sS", "-i", "-k", "--max-time", "20", *args[:-1],
                              f"{scheme}://127.0.0.1:{port}{args[-1]}"],
                             capture_output=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        head, _, body = out.stdout.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        return lines[0], fields, body

    # --- one stream, one request ---------------------------------------------------------

    def test_curl_prior_knowledge_is_served_like_http_1_1(self):
        xff = client_address()
        status, fields, body = self.curl("--http2-prior-knowledge", "-H", f"X-Forwarded-For: {xff}",
                                         "-H", "Cookie: a=1", "-H", "Cookie: b=2", "/hello?x=1")
        self.assertEqual(status.split()[:2], ["HTTP/2", "200"])
        self.assertEqual(fields["x-ratelimit-limit"], "5")
        self.assertEqual(fields["x-ratelimit-remaining"], "4")
        self.assertIn("ipv4_individual.short", fields["ratelimit-policy"])
        echoed = json.loads(body)
        self.assertEqual(echoed["target"], "/hello?x=1")
        self.assertEqual(echoed["version"], 11)  # the upstream pool speaks HTTP/1.1
        sent = {k.lower(): v for k, v in echoed["headers"]}
        self.assertEqual(sent["host"], f"127.0.0.1:{self.gw.port}")  # :authority serves as Host
        self.assertEqual(sent["x-forwarded-proto"], "http")
        self.assertEqual(sent["x-real-ip"], xff)
        self.assertEqual(sent["cookie"], "a=1; b=2")  # the cookie fields joined (RFC 9113 §8.2.3)
        # The same listener still speaks HTTP/1.1 to a client that does not start with the preface.
        status, fields, _ = self.curl("--http1.1", "-H", f"X-Forwarded-For: {xff}", "/hello")
        self.assertEqual(status.split()[:2], ["HTTP/1.1", "200"])
        self.assertEqual(fields["x-ratelimit-remaining"], "3")  # one client, whatever the protocol

    def test_a_burst_of_5_as_8_concurrent_streams_admits_exactly_5(self):
        xff = client_address()
        c = H2(self.gw.port)
        try:
            ids = [c.headers(f"/burst/{i}", xff) for i in range(8)]
            self.assertTrue(c.pump(lambda: all(i in c.ended for i in ids)))
        finally:
            c.close()
        statuses = sorted(int(c.responses[i]["headers"][":status"]) for i in ids)
        self.assertEqual(statuses, [200] * 5 + [429] * 3)
        for i in ids:
            r = c.responses[i]
            self.assertEqual(r["headers"]["x-ratelimit-limit"], "5")
            if r["headers"][":status"] == "429":
                self.assertEqual(r["headers"]["x-ratelimit-remaining"], "0")
                self.assertIn("retry-after", r["headers"])
                self.assertEqual(r["headers"]["x-ratelimit-reason"], "burst_exhausted")
                self.assertEqual(r["headers"]["content-type"], "application/problem+json")
                self.assertEqual(json.loads(r["body"])["status"], 429)
                self.assertEqual(r["headers"]["content-length"], str(len(r["body"])))

    def test_nghttp_streams_on_one_connection(self):
        xff = client_address()
        out = subprocess.run(["nghttp", "-n", "-s", "-H", f"x-forwarded-for: {xff}"] +
                             [f"http://127.0.0.1:{self.gw.port}/n/{i}" for i in range(7)],
                             capture_output=True, text=True, timeout=30)
        codes = sorted(line.split()[4] for line in out.stdout.splitlines()
                       if line.strip().split(" ")[0].isdigit() and "/n/" in line)
        self.assertEqual(codes, ["200"] * 5 + ["429"] * 2, out.stdout)

    def test_h2load_many_streams(self):
        out = subprocess.run(["h2load", "-n", "400", "-c", "2", "-m", "20",
                              f"http://127.0.0.1:{self.gw.port}/bulk/load"],
                             capture_output=True, text=True, timeout=60)
        self.assertIn("400 succeeded, 0 failed, 0 errored", out.stdout, out.stdout)
        self.assertIn("status codes: 400 2xx", out.stdout, out.stdout)

    def test_connections_one_after_another_each_serve_their_streams(self):
        # Each closed connection gives back its stream table (a zeroed page from a region of
        # its own, h2_connection.cpp), and the next connection takes it: a page handed out again
        # that were not zeroed would leave the next session's table pointing at freed streams.
        xff = client_address()
        for n in range(30):
            c = H2(self.gw.port)
            try:
                ids = [c.headers(f"/bulk/seq/{n}/{i}", xff) for i in range(3)]
                self.assertTrue(c.pump(lambda: all(i in c.ended for i in ids)), n)
            finally:
                c.close()
            for i in ids:
                self.assertEqual(c.responses[i]["headers"][":status"], "200", n)
                self.assertEqual(json.loads(c.responses[i]["body"])["target"],
                                 f"/bulk/seq/{n}/{ids.index(i)}")

    def test_silent_connections_wait_without_their_buffers(self):
        # A plain connection on a listener with http2 that has sent nothing yet waits as an
        # HTTP/1.1 connection waits for its first request: after a second (at once past 64
        # blocks in use) without its worker's 45 KiB scratch block, which it held until
        # header_timeout before.
        if os.environ.get("ASAN_OPTIONS"):
            self.skipTest("under AddressSanitizer the heap's size says nothing of the blocks")

        def rss_kib():
            with open(f"/proc/{self.gw.process.p.pid}/status") as f:
                return int(next(x for x in f if x.startswith("VmRSS")).split()[1])

        before = rss_kib()
        silent = [socket.create_connection(("127.0.0.1", self.gw.port)) for _ in range(800)]
        try:
            time.sleep(2.0)
            grown = (rss_kib() - before) * 1024 / len(silent)
            # Without the blocks, about 7 KB each (the session's frame and socket, and the 64
            # blocks kept a second, spread over all); holding them, about 24 KB each.
            self.assertLess(grown, 14000, f"{grown:.0f} bytes per silent connection")
            # Each still becomes what its first bytes say: HTTP/2 by the preface...
            xff = client_address()
            c = H2(self.gw.port, sock=silent[0])
            r = c.get("/bulk/after-silence", xff)
            self.assertEqual(r["headers"][":status"], "200")
            # ...or HTTP/1.1.
            silent[1].sendall(b"GET /bulk/plain HTTP/1.1\r\nHost: a\r\n"
                              b"X-Forwarded-For: " + xff.encode() + b"\r\n\r\n")
            silent[1].settimeout(10)
            self.assertTrue(silent[1].recv(65536).startswith(b"HTTP/1.1 200"))
        finally:
            for s in silent:
                s.close()

    # --- bodies ----------------------------------------------------------------------------

    def test_request_body_streamed_to_the_upstream(self):
        body = os.urandom(700_000)  # ten times the stream's window: it must be given back
        path = os.path.join(self.scratch, "upload.bin")
        with open(path, "wb") as f:
            f.write(body)
        _, fields, answer = self.curl("--http2-prior-knowledge", "--data-binary", f"@{path}",
                                      "/bulk/upload")
        echoed = json.loads(answer)
        self.assertEqual(echoed["body_bytes"], len(body))
        self.assertEqual(echoed["body_fnv1a64"], fnv1a64(body))
        # A body of unannounced length (no content-length) goes chunked.
        c = H2(self.gw.port)
        try:
            sid = c.headers("/bulk/chunks", client_address(), method="POST", end_stream=False)
            for piece in (b"abc", b"defg", b""):
                c.conn.send_data(sid, piece, end_stream=piece == b"")
                c.flush()
            self.assertTrue(c.pump(lambda: sid in c.ended))
        finally:
            c.close()
        echoed = json.loads(c.responses[sid]["body"])
        self.assertEqual(echoed["body_bytes"], 7)
        self.assertEqual(echoed["body_fnv1a64"], fnv1a64(b"abcdefg"))

    def test_response_body_and_trailers_relayed(self):
        c = H2(self.gw.port)
        try:
            r = c.get("/bulk/big?size=1000000", client_address())
            self.assertEqual(r["headers"][":status"], "200")
            self.assertEqual(len(r["body"]), 1_000_000)
            self.assertEqual(r["body"][:3], b"abc")
            r = c.get("/bulk/t?trailer=x-checksum:abc123", client_address())
            self.assertEqual(r["body"], b"hello")
            self.assertEqual(r["trailers"], {"x-checksum": "abc123"})
            self.assertNotIn("transfer-encoding", r["headers"])
            r = c.get("/bulk/c?size=70000&chunked=1", client_address())
            self.assertEqual(len(r["body"]), 70000)
            r = c.get("/bulk/head", client_address(), method="HEAD")
            self.assertEqual(r["headers"][":status"], "200")
            self.assertEqual(r["body"], b"")
        finally:
            c.close()

    def test_a_large_answer_to_a_client_that_reads_late_arrives_whole(self):
        # One stream on the connection: its frames are written at once, as far as the socket
        # takes them. The client's windows are wide open and it reads nothing for half a second
        # (body_timeout is 1 s), so the kernel's buffers fill: what a write left over goes out
        # later, in order.
        window = 2**31 - 1
        c = H2(self.gw.port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        size = 8_000_000
        try:
            c.conn.increment_flow_control_window(window - 65535)
            c.flush()
            sid = c.headers(f"/bulk/late?size={size}", client_address())
            time.sleep(0.5)
            self.assertTrue(c.pump(lambda: sid in c.ended, timeout=20))
            # And the connection serves on.
            r = c.get("/bulk/after?size=100", client_address())
            self.assertEqual(r["body"], bytes(ord("a") + i % 26 for i in range(100)))
        finally:
            c.close()
        body = c.responses[sid]["body"]
        self.assertEqual(len(body), size)
        pattern = bytes(ord("a") + i % 26 for i in range(26)) * (size // 26 + 1)
        self.assertEqual(body, pattern[:size])

    # --- TLS ---------------------------------------------------------------------------------

    def test_alpn_offers_h2_and_http_1_1(self):
        status, fields, _ = self.curl("--http2", "/bulk/tls", port=self.secure, scheme="https")
        self.assertEqual(status.split()[:2], ["HTTP/2", "200"])
        self.assertIn("x-ratelimit-limit", fields)
        status, _, body = self.curl("--http1.1", "/bulk/tls", port=self.secure, scheme="https")
        self.assertEqual(status.split()[:2], ["HTTP/1.1", "200"])
        self.assertEqual({k.lower(): v for k, v in json.loads(body)["headers"]}
                         ["x-forwarded-proto"], "https")
        # A listener without http2 does not offer it.
        status, _, _ = self.curl("--http2", "/bulk/tls", port=self.old, scheme="https")
        self.assertEqual(status.split()[:2], ["HTTP/1.1", "200"])
        hello = subprocess.run(["openssl", "s_client", "-alpn", "h2,http/1.1", "-connect",
                                f"127.0.0.1:{self.secure}"], input=b"", capture_output=True,
                               timeout=20).stdout.decode(errors="replace")
        self.assertIn("ALPN protocol: h2", hello)
        c = H2(self.secure, tls=True)
        try:
            r = c.get("/bulk/raw", client_address())
        finally:
            c.close()
        self.assertEqual(r["headers"][":status"], "200")

    # --- proof of work ---------------------------------------------------------------------

    def solve(self, challenge, bits):
        return subprocess.run([h.binary("tollgate"), "pow", "solve", challenge, bits],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()

    def test_proof_of_work_in_a_header_and_in_a_split_cookie(self):
        xff = client_address()
        c = H2(self.gw.port)
        try:
            self.assertEqual(c.get("/paid/a", xff)["headers"][":status"], "200")
            r = c.get("/paid/a", xff)
            self.assertEqual(r["headers"][":status"], "428")
            challenge, bits = r["headers"]["x-pow-challenge"], r["headers"]["x-pow-difficulty"]
            nonce = self.solve(challenge, bits)
            r = c.get("/paid/a", xff, extra=[("x-pow-solution", f"{challenge}:{nonce}")])
            self.assertEqual(r["headers"][":status"], "200")
            self.assertNotIn("x-pow-solution",
                             {k.lower() for k, _ in json.loads(r["body"])["headers"]})
            # Spent: the same proof again is refused.
            r = c.get("/paid/a", xff, extra=[("x-pow-solution", f"{challenge}:{nonce}")])
            self.assertEqual(r["headers"][":status"], "428")
            # A proof in the cookie, which the client sends as two cookie fields.
            challenge, bits = r["headers"]["x-pow-challenge"], r["headers"]["x-pow-difficulty"]
            nonce = self.solve(challenge, bits)
            r = c.get("/paid/a", xff, extra=[("cookie", "theme=dark"),
                                             ("cookie", f"tollgate_pow={challenge}:{nonce}")])
            self.assertEqual(r["headers"][":status"], "200", r)
            sent = {k.lower(): v for k, v in json.loads(r["body"])["headers"]}
            self.assertEqual(sent["cookie"], "theme=dark")  # the proof taken out
        finally:
            c.close()

    # --- what the operator sees ---------------------------------------------------------------

    def test_access_log_and_metrics(self):
        before = self.gw.metrics()
        xff = client_address()
        c = H2(self.gw.port)
        try:
            c.get("/bulk/logged", xff)
        finally:
            c.close()
        line = self.gw.process.wait_for_line('"path":"/bulk/logged"')
        entry = json.loads(line[line.index("{"):])
        self.assertEqual(entry["protocol"], "HTTP/2.0")
        self.assertEqual(entry["status"], 200)
        self.assertEqual(entry["client"], xff)
        self.assertEqual(entry["category"], "bulk")
        after = self.gw.metrics()
        self.assertGreaterEqual(after.value("tollgate_http2_streams_total", listener="public") -
                                before.value("tollgate_http2_streams_total", listener="public"), 1)
        self.assertGreaterEqual(
            after.value("tollgate_requests_total", category="bulk", decision="allowed") -
            before.value("tollgate_requests_total", category="bulk", decision="allowed"), 1)

    def test_header_block_past_the_limit_gets_431(self):
        c = H2(self.gw.port)
        try:
            r = c.get("/bulk/big-head", client_address(), extra=[("x-big", "v" * 5000)])
            self.assertEqual(r["headers"][":status"], "431")
            # The connection goes on.
            self.assertEqual(c.get("/bulk/after", client_address())["headers"][":status"], "200")
        finally:
            c.close()

    # --- abuse ---------------------------------------------------------------------------------

    def assert_calmed(self, c, reason, xff=None):
        """`c` gets GOAWAY ENHANCE_YOUR_CALM, counted under `reason`, and the gateway still
        serves."""
        c.pump(lambda: c.goaway is not None, timeout=10)
        c.close()
        self.assertEqual(c.goaway, h2.errors.ErrorCodes.ENHANCE_YOUR_CALM)
        self.assertTrue(h.eventually(lambda: self.gw.metrics().value(
            "tollgate_http2_goaways_total", listener="public", reason=reason) >= 1))
        fresh = H2(self.gw.port)
        try:
            self.assertEqual(fresh.get("/bulk/still", client_address())["headers"][":status"],
                             "200")
        finally:
            fresh.close()

    def test_rapid_reset_gets_goaway(self):
        before = self.gw.metrics().value("tollgate_violations_total", reason="protocol_abuse")
        c = H2(self.gw.port)
        xff = client_address()
        # Streams opened and reset at once, in batches, with nothing honest in between.
        for batch in range(10):
            for _ in range(50):
                sid = c.conn.get_next_available_stream_id()
                c.conn.send_headers(sid, [(":method", "GET"), (":path", "/bulk/r"),
                                          (":scheme", "http"), (":authority", "t"),
                                          ("x-forwarded-for", xff)], end_stream=True)
                c.conn.reset_stream(sid)
            c.flush()
            if c.closed:
                break
        self.assert_calmed(c, "rapid_reset")
        self.assertTrue(h.eventually(lambda: self.gw.metrics().value(
            "tollgate_violations_total", reason="protocol_abuse") > before))

    def test_ping_flood_gets_goaway(self):
        c = H2(self.gw.port)
        for i in range(3000):
            c.conn.ping(i.to_bytes(8, "big"))
        c.flush()
        self.assert_calmed(c, "flood")

    def test_settings_and_empty_data_floods_get_goaway(self):
        c = H2(self.gw.port)
        for _ in range(1500):
            c.conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100})
        c.flush()
        self.assert_calmed(c, "flood")
        c = H2(self.gw.port)
        sid = c.headers("/bulk/empty", client_address(), method="POST", end_stream=False)
        frame = bytes([0, 0, 0, 0, 0]) + sid.to_bytes(4, "big")  # DATA, length 0, no flags
        try:
            c.sock.sendall(frame * 1500)
        except OSError:
            pass
        self.assert_calmed(c, "flood")

    def test_continuation_flood_gets_goaway(self):
        c = H2(self.gw.port)
        # HEADERS without END_HEADERS, then CONTINUATION frames that never end the block.
        block = c.conn.encoder.encode([(":method", "GET"), (":path", "/bulk/x"),
                                       (":scheme", "http"), (":authority", "t")])
        c.sock.sendall(len(block).to_bytes(3, "big") + bytes([1, 0]) + (1).to_bytes(4, "big") +
                       block)
        junk = c.conn.encoder.encode([("x-filler", "a" * 1000)])
        continuation = len(junk).to_bytes(3, "big") + bytes([9, 0]) + (1).to_bytes(4, "big") + junk
        try:
            for _ in range(200):
                c.sock.sendall(continuation)
        except OSError:
            pass
        c.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.conn.initiate_connection()
        c.conn.data_to_send()
        self.assert_calmed(c, "header_block")

    def test_zero_window_stream_is_reset_and_the_connection_serves_on(self):
        c = H2(self.gw.port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        try:
            c.pump(lambda: False, timeout=0.3)  # the settings acknowledged
            start = time.time()
            sid = c.headers("/bulk/stuck?size=100000", client_address())
            self.assertTrue(c.pump(lambda: sid in c.resets, timeout=8), c.responses)
            self.assertLess(time.time() - start, 6)  # body_timeout is 1 s
            self.assertEqual(c.resets[sid], h2.errors.ErrorCodes.CANCEL)
            # A response without a body needs no window.
            r = c.get("/bulk/ok", client_address(), method="HEAD")
            self.assertEqual(r["headers"][":status"], "200")
        finally:
            c.close()

    def test_stream_reset_mid_body_stops_the_upstream_exchange(self):
        before = self.echo.stats()["requests"]
        c = H2(self.gw.port)
        try:
            sid = c.headers("/bulk/cut", client_address(), method="POST",
                            extra=[("content-length", "50000")], end_stream=False)
            c.conn.send_data(sid, b"x" * 10000)
            c.flush()
            time.sleep(0.3)
            c.conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.CANCEL)
            c.flush()
            time.sleep(0.3)
            # The upstream saw a request cut short: it never answered one.
            self.assertEqual(self.echo.stats()["requests"], before)
            r = c.get("/bulk/next", client_address())
            self.assertEqual(r["headers"][":status"], "200")
        finally:
            c.close()


class Drain(unittest.TestCase):
    """SIGTERM: an HTTP/2 client is told GOAWAY NO_ERROR, and the stream it has in flight is
    served to its end."""

    def test_sigterm_sends_goaway_and_finishes_streams_in_flight(self):
        echo = h.Echo()
        scratch = tempfile.mkdtemp(prefix="tollgate-h2-drain-")
        h.make_certificate(scratch)
        gw = h.Gateway(gateway_file(scratch), POLICY, echo.port)
        try:
            idle = H2(gw.port)  # python3-h2 reads no frame after a GOAWAY: kept streamless
            idle.pump(lambda: False, timeout=0.2)
            slow = subprocess.Popen(
                ["curl", "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}",
                 "-H", f"X-Forwarded-For: {client_address()}",
                 f"http://127.0.0.1:{gw.port}/bulk/slow?delay_ms=1500"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(0.5)
            gw.process.signal(__import__("signal").SIGTERM)
            self.assertTrue(idle.pump(lambda: idle.goaway is not None, timeout=10))
            self.assertEqual(idle.goaway, h2.errors.ErrorCodes.NO_ERROR)
            out, err = slow.communicate(timeout=20)
            self.assertEqual(out, "200", err)  # the stream in flight was served to its end
            idle.close()
            self.assertEqual(gw.process.wait(15), 0)
        finally:
            gw.stop()
            echo.stop()
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
