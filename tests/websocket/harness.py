"""Support for the WebSocket integration tests: real tollgate and tollgate-echo processes on
loopback ports, Debian's python3-websockets as the client, raw sockets for what a polite client
will not send.

Run a module as `/usr/bin/python3 tests/websocket/test_X.py BUILD_DIR [unittest args]`.
Standard library only besides `websockets` (10.4).
"""

import asyncio
import atexit
import base64
import contextlib
import functools
import hashlib
import inspect
import itertools
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import websockets

BUILD_DIR = os.environ.get("TOLLGATE_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))

# Every process started, so that none outlives the test run, whatever happens.
_started = []


def binary(name):
    path = os.path.join(BUILD_DIR, name)
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is not built")
    return path


class Process:
    """A child process whose merged stdout/stderr is read line by line by a thread."""

    def __init__(self, argv):
        self.argv = argv
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
        _started.append(self)
        self._lines = []
        self._cursor = 0
        self._cond = threading.Condition()
        self._eof = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in self.p.stdout:
            with self._cond:
                self._lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def wait_for_line(self, needle, timeout=10.0):
        """The next line (after the last one returned) containing `needle`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                while self._cursor < len(self._lines):
                    line = self._lines[self._cursor]
                    self._cursor += 1
                    if needle in line:
                        return line
                if self._eof:
                    raise RuntimeError(f"{self.argv[0]} ended before a line with {needle!r}:\n"
                                       + self.output())
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"no line with {needle!r} within {timeout}s:\n" + self.output())
                self._cond.wait(left)

    def output(self):
        with self._cond:
            return "\n".join(self._lines)

    def signal(self, sig):
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def wait(self, timeout):
        """The exit status, or None if it is still running after `timeout` seconds."""
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace=12.0):
        """SIGTERM, then SIGKILL if it has not exited within `grace` seconds."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self._reader.join(2)
        if not self._reader.is_alive():
            self.p.stdout.close()
        if self in _started:
            _started.remove(self)


@atexit.register
def _stop_everything():
    for p in list(_started):
        if p.p.poll() is None:
            p.p.kill()
            p.p.wait()


def _port_after(line):
    m = re.search(r":(\d+)(?:\"\})?\s*$", line)  # text, or the end of a JSON log line
    if not m:
        raise RuntimeError("no port in: " + line)
    return int(m.group(1))


class Echo:
    """A running tollgate-echo."""

    def __init__(self):
        self.process = Process([binary("tollgate-echo"), "--address", "127.0.0.1", "--port", "0",
                                "--threads", "1"])
        self.port = _port_after(self.process.wait_for_line("listening on"))

    def stats(self):
        status, _, body = http_request(self.port, "GET /_echo/stats HTTP/1.1\r\nHost: echo\r\n"
                                       "Connection: close\r\n\r\n")
        assert status == 200, (status, body)
        return json.loads(body)

    def stop(self):
        self.process.stop()


def gateway_yaml(routes=(), upstreams=(), limits=None):
    """The gateway file of these tests: a public and an admin listener on ports the kernel
    picks, two workers, loopback trusted (tests pose as other clients with X-Forwarded-For),
    the echo as upstream `app` (plus `upstreams`, each "name: { ... }"), the WebSocket routes
    `routes` = [(path prefix, category[, upstream])] before the catch-all /ws/ -> websocket,
    and `limits` (the text of a limits: mapping) when given."""
    lines = ["listeners: [{ name: public, address: 127.0.0.1, port: 0 }]",
             "admin: { address: 127.0.0.1, port: 0 }",
             "workers: 2"]
    if limits:
        lines.append(f"limits: {limits}")
    lines += ["trusted_proxies: [127.0.0.1/32]",
              "upstreams:",
              '  app: { endpoints: ["{echo}"] }']
    lines += [f"  {u}" for u in upstreams]
    lines.append("routes:")
    for route in list(routes) + [("/ws/", "websocket")]:
        prefix, category, upstream = (route + ("app",))[:3]
        lines.append(f"  - {{ match: {{ path_prefix: {prefix}, header: {{ Upgrade: websocket }} }}, "
                     f"category: {category}, upstream: {upstream} }}")
    lines += ["default_route: { category: general, upstream: app }", 'policies: ["{policy}"]']
    return "\n".join(lines) + "\n"


class Gateway:
    """A running tollgate with a gateway file and a policy file written for the test.

    `gateway_yaml` may say {policy} (the policy file's path), {echo} (host:port of the echo) and
    {dir} (the temporary directory)."""

    def __init__(self, gateway_yaml, policy_yaml, echo_port, wait_admin=True, files=None):
        """`files`: {name: text} written into the directory before the gateway starts."""
        self.dir = tempfile.mkdtemp(prefix="tollgate-ws-")
        self.echo_port = echo_port
        for name, text in (files or {}).items():
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(text)
        self.write(gateway_yaml, policy_yaml)
        self.process = Process([binary("tollgate"), "--config", os.path.join(self.dir, "gateway.yaml")])
        try:
            self.port = _port_after(self.process.wait_for_line("listening on public"))
            self.admin_port = _port_after(self.process.wait_for_line("admin listening on")) if wait_admin else None
        except Exception:
            self.stop()
            raise

    def write(self, gateway_yaml, policy_yaml):
        g = (gateway_yaml.replace("{policy}", os.path.join(self.dir, "policy.yaml"))
             .replace("{echo}", f"127.0.0.1:{self.echo_port}")
             .replace("{dir}", self.dir))
        with open(os.path.join(self.dir, "policy.yaml"), "w") as f:
            f.write(policy_yaml)
        with open(os.path.join(self.dir, "gateway.yaml"), "w") as f:
            f.write(g)

    def reload(self, gateway_yaml, policy_yaml):
        """Rewrites the files, sends SIGHUP and returns the log line that says how it went."""
        self.write(gateway_yaml, policy_yaml)
        self.process.signal(signal.SIGHUP)
        return self.process.wait_for_line("reload")

    def metrics_text(self):
        status, _, body = http_request(self.admin_port, "GET /metrics HTTP/1.1\r\nHost: admin\r\n"
                                       "Connection: close\r\n\r\n")
        assert status == 200, (status, body)
        return body

    def metrics(self):
        return Metrics(self.metrics_text())

    def uri(self, path, scheme="ws"):
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def stop(self):
        self.process.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Metrics:
    """Prometheus text, parsed into samples."""

    _line = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
    _label = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

    def __init__(self, text):
        self.text = text
        self.samples = []
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = self._line.match(line)
            if m:
                labels = dict(self._label.findall(m.group(3) or ""))
                self.samples.append((m.group(1), labels, float(m.group(4))))

    def get(self, name, **labels):
        """The sum of `name`'s samples whose labels include `labels`; None if there is none."""
        found = [v for n, l, v in self.samples
                 if n == name and all(l.get(k) == str(x) for k, x in labels.items())]
        return sum(found) if found else None

    def value(self, name, **labels):
        """Like get, with 0 for a sample that is absent (counters shown only once non-zero)."""
        v = self.get(name, **labels)
        return 0 if v is None else v


def http_request(port, raw, timeout=5.0, sock=None):
    """Sends `raw` (ask for Connection: close) and returns (status, headers, body as text).
    Headers: a dict of lower-case names, repeats joined with ", "."""
    s = sock or socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.settimeout(timeout)
        s.sendall(raw.encode() if isinstance(raw, str) else raw)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            head_end = data.find(b"\r\n\r\n")
            if head_end >= 0:
                status, headers = parse_head(data[:head_end])
                if "content-length" in headers and len(data) >= head_end + 4 + int(headers["content-length"]):
                    break
        head_end = data.find(b"\r\n\r\n")
        if head_end < 0:
            raise RuntimeError(f"no response head: {data!r}")
        status, headers = parse_head(data[:head_end])
        body = data[head_end + 4:]
        if "content-length" in headers:
            body = body[:int(headers["content-length"])]
        return status, headers, body.decode("utf-8", "replace")
    finally:
        s.close()


def parse_head(head):
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = headers[name] + ", " + value if name in headers else value
    return status, headers


# --- addresses -------------------------------------------------------------------------------

_next_client = itertools.count(1)


def new_client_address():
    """A fresh client address (for X-Forwarded-For through trusted_proxies), so that tests
    sharing a gateway never share an address's connection count or limits."""
    n = next(_next_client)
    return f"10.{(os.getpid() >> 8) & 0xff}.{n // 250}.{n % 250 + 1}"


# --- the websockets client -------------------------------------------------------------------

def connect(gw, path, xff=None, **kw):
    """websockets.connect to the gateway with test defaults: no automatic pings, bounded
    handshake and close, X-Forwarded-For when `xff` is given."""
    kw.setdefault("ping_interval", None)
    kw.setdefault("open_timeout", 5)
    kw.setdefault("close_timeout", 5)
    if xff is not None:
        headers = dict(kw.pop("extra_headers", None) or {})
        headers["X-Forwarded-For"] = xff
        kw["extra_headers"] = headers
    uri = kw.pop("uri", None) or gw.uri(path)
    return websockets.connect(uri, **kw)


async def closed_with(ws, timeout=5.0):
    """Reads until the connection is closed; returns (code, reason, messages received on the
    way). The code is what the peer sent (None if no close frame came)."""
    messages = []
    try:
        async with asyncio.timeout(timeout):
            while True:
                messages.append(await ws.recv())
    except websockets.ConnectionClosed as e:
        rcvd = e.rcvd
        return (rcvd.code if rcvd else None), (rcvd.reason if rcvd else None), messages
    raise AssertionError("unreachable")


def eventually(predicate, timeout=5.0, interval=0.05):
    """Polls `predicate` until it returns something true; returns its last value (falsy when
    `timeout` seconds passed first). The blocking twin of wait_until."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


def tcp_queues(local_port, remote_port):
    """(send queue, receive queue) in bytes of the loopback TCP socket from `local_port` to
    `remote_port`, from /proc/net/tcp; None when there is none (not yet accepted, or closed)."""
    with open("/proc/net/tcp") as f:
        next(f)  # the column names
        for line in f:
            # "0100007F:1F90 0100007F:D3A2 01 00000000:00000000 ...": hexadecimal fields.
            local, remote, _, queues = line.split()[1:5]
            if (int(local.split(":")[1], 16), int(remote.split(":")[1], 16)) == (local_port, remote_port):
                send, receive = queues.split(":")
                return int(send, 16), int(receive, 16)
    return None


def free_port():
    """A loopback port nothing listens on (bound by the kernel's choice, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_until(predicate, timeout=5.0, interval=0.05):
    """Polls `predicate` (sync) until true; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v or time.monotonic() > deadline:
            return v
        await asyncio.sleep(interval)


async def open_tunnels(gw, category, expected, timeout=3.0):
    """The gauge tollgate_websocket_connections{category}, once it shows `expected` (a tunnel
    is counted as its relay starts, just after the 101 is written) or when `timeout` passed."""
    value = None

    def check():
        nonlocal value
        value = gw.metrics().get("tollgate_websocket_connections", category=category)
        return value == expected
    await wait_until(check, timeout)
    return value


# --- raw WebSocket over a plain socket ------------------------------------------------------

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def pattern(size):
    """The payload of the echo's pushed messages (send:N:SIZE)."""
    return bytes((ord("a") + i % 26) for i in range(size))


def accept_of(key):
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


class RawWs:
    """A WebSocket spoken by hand over an asyncio stream: the handshake computed here, frames
    built byte by byte, so that malformed ones can be sent."""

    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer
        self.buffer = b""

    @classmethod
    async def open(cls, port, path, headers=None, deflate=False, rcvbuf=None):
        """Connects and completes the handshake (a non-101 answer is kept in `status`).
        `rcvbuf`: a small receive buffer, so that the gateway's writes block soon when this
        client stops reading (transport.pause_reading)."""
        if rcvbuf is None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
            reader, writer = await asyncio.open_connection(sock=sock)
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        if deflate:
            extra += "Sec-WebSocket-Extensions: permessage-deflate\r\n"
        writer.write((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                      f"Sec-WebSocket-Version: 13\r\n{extra}\r\n").encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        status, response_headers = parse_head(head[:-4])
        self = cls(reader, writer)
        self.status = status
        self.headers = response_headers
        if status == 101:
            assert response_headers.get("sec-websocket-accept") == accept_of(key), response_headers
        return self

    @staticmethod
    def frame(opcode, payload=b"", fin=True, mask=True, rsv=0, length=None, key=None):
        """A frame's bytes. `length` overrides the written length (for lies); the 64-bit form
        is used when it is given as ('64', value)."""
        b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
        n = len(payload) if length is None else length
        mbit = 0x80 if mask else 0
        if isinstance(n, tuple):
            head = bytes([b0, mbit | 127]) + struct.pack(">Q", n[1])
        elif n < 126:
            head = bytes([b0, mbit | n])
        elif n < 65536:
            head = bytes([b0, mbit | 126]) + struct.pack(">H", n)
        else:
            head = bytes([b0, mbit | 127]) + struct.pack(">Q", n)
        if not mask:
            return head + payload
        key = key or os.urandom(4)
        return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))

    async def send(self, data):
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self, timeout=5.0, with_fin=False):
        """(opcode, payload) of the next frame from the server (unmasked), with its FIN bit
        last when `with_fin`; None at EOF."""
        async with asyncio.timeout(timeout):
            while True:
                parsed = self._parse()
                if parsed is not None:
                    return parsed if with_fin else parsed[:2]
                chunk = await self.reader.read(65536)
                if not chunk:
                    return None
                self.buffer += chunk

    async def read_message(self, timeout=5.0):
        """(opcode, payload) of the next data message, its fragments joined (the upstream may
        fragment what it sends); control frames on the way are skipped. None at EOF."""
        async with asyncio.timeout(timeout):
            opcode, parts = None, []
            while True:
                f = await self.read_frame(timeout, with_fin=True)
                if f is None:
                    return None
                op, payload, fin = f
                if op >= 0x8:
                    if op == 0x8:
                        raise AssertionError(f"close frame instead of a message: {payload!r}")
                    continue
                if opcode is None:
                    assert op != 0x0, "a continuation first"
                    opcode = op
                else:
                    assert op == 0x0, f"opcode {op} inside a message"
                parts.append(payload)
                if fin:
                    return opcode, b"".join(parts)

    def _parse(self):
        b = self.buffer
        if len(b) < 2:
            return None
        op = b[0] & 0x0F
        masked = b[1] & 0x80
        n = b[1] & 0x7F
        at = 2
        if n == 126:
            if len(b) < 4:
                return None
            n = struct.unpack(">H", b[2:4])[0]
            at = 4
        elif n == 127:
            if len(b) < 10:
                return None
            n = struct.unpack(">Q", b[2:10])[0]
            at = 10
        key = None
        if masked:
            if len(b) < at + 4:
                return None
            key = b[at:at + 4]
            at += 4
        if len(b) < at + n:
            return None
        payload = b[at:at + n]
        if key:
            payload = bytes(x ^ key[i % 4] for i, x in enumerate(payload))
        self.buffer = b[at + n:]
        return op, payload, bool(b[0] & 0x80)

    async def close_code(self, timeout=5.0):
        """Reads frames until a close frame; returns its code (None if the stream ended
        without one). Answers it, as a client should."""
        while True:
            f = await self.read_frame(timeout)
            if f is None:
                return None
            op, payload = f
            if op == 0x8:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
                try:
                    await self.send(self.frame(0x8, payload[:2]))
                except (ConnectionError, OSError):
                    pass
                return code

    async def eof(self, timeout=5.0):
        """True when the server ends the stream within `timeout` (reads and drops the rest)."""
        try:
            async with asyncio.timeout(timeout):
                while await self.reader.read(65536):
                    pass
            return True
        except (ConnectionError, OSError):
            return True
        except TimeoutError:
            return False

    async def read_until_close(self, timeout=10.0):
        """Reads every frame until a close frame or the end of the stream. Returns (messages
        as (opcode, payload) with fragments joined, the close code or None, bytes left over
        that do not make a whole frame)."""
        messages, opcode, parts, code = [], None, [], None
        try:
            while True:
                f = await self.read_frame(timeout, with_fin=True)
                if f is None:
                    break
                op, payload, fin = f
                if op == 0x8:
                    code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
                    break
                if op >= 0x8:
                    continue
                opcode = op if opcode is None else opcode
                parts.append(payload)
                if fin:
                    messages.append((opcode, b"".join(parts)))
                    opcode, parts = None, []
        except (ConnectionError, OSError):
            pass
        return messages, code, self.buffer

    def gateway_queues(self):
        """(send queue, receive queue) of the gateway's end of this connection (tcp_queues)."""
        mine = self.writer.get_extra_info("sockname")[1]
        gateway = self.writer.get_extra_info("peername")[1]
        return tcp_queues(gateway, mine)

    async def push_until_blocked(self, count=200, size=100000):
        """Stops reading and asks the echo for `count` x `size` bytes, and returns once the
        gateway's writes to this client block: its end of the connection holds bytes it cannot
        send, at two looks 50 ms apart (on loopback, sent is delivered while there is room).
        The connection should have been opened with a small rcvbuf."""
        self.writer.transport.pause_reading()
        await self.send(self.frame(0x1, f"send:{count}:{size}".encode()))
        blocked = lambda: (self.gateway_queues() or (0, 0))[0] > 0
        looks = 0
        deadline = time.monotonic() + 5
        while looks < 2:
            assert time.monotonic() < deadline, "the gateway's writes to this client never blocked"
            looks = looks + 1 if blocked() else 0
            await asyncio.sleep(0.05)

    async def read_by_gateway(self, timeout=5.0):
        """Whether the gateway reads all that this client sent within `timeout` (its end of the
        connection holds no unread bytes)."""
        return await wait_until(lambda: (self.gateway_queues() or (0, 1))[1] == 0, timeout)

    def abort(self):
        self.writer.transport.abort()

    def close(self):
        self.writer.close()


# --- certificates ----------------------------------------------------------------------------

def make_certificate(directory):
    """A fresh self-signed certificate for 127.0.0.1 (cert.pem, key.pem) in `directory`."""
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key,
                    "-out", cert], check=True, capture_output=True, timeout=30)
    return cert, key


# --- test cases ------------------------------------------------------------------------------

def bounded(seconds):
    """Sets a test's own time bound (the default is 15 s)."""
    def wrap(f):
        f.time_bound = seconds
        return f
    return wrap


class Case(unittest.IsolatedAsyncioTestCase):
    """Every async test_* method runs under a time bound (its `bounded`, default 15 s)."""

    default_bound = 15.0

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        for name, f in list(vars(cls).items()):
            if name.startswith("test") and inspect.iscoroutinefunction(f):
                setattr(cls, name, cls._timed(f))

    @classmethod
    def _timed(cls, f):
        @functools.wraps(f)
        async def run(self, *a, **kw):
            bound = getattr(f, "time_bound", cls.default_bound)
            try:
                return await asyncio.wait_for(f(self, *a, **kw), bound)
            except TimeoutError:
                raise AssertionError(f"{f.__name__} did not finish within {bound} s") from None
        return run



@contextlib.contextmanager
def gateway_with_echo(gateway_yaml, policy_yaml, files=None):
    """An echo and a Gateway in front of it for a with-block (`files` as Gateway takes them);
    both stopped after it, however it ends."""
    echo = Echo()
    try:
        gw = Gateway(gateway_yaml, policy_yaml, echo.port, files=files)
        try:
            yield gw
        finally:
            gw.stop()
    finally:
        echo.stop()


class GatewayCase(Case):
    """A Case whose tests share one echo and one gateway, started once for the class from
    `gateway_file()` (by default the class's GATEWAY), the class's POLICY and its FILES
    (written beside them before the gateway starts). Plain test methods work as well."""

    GATEWAY = None
    POLICY = None
    FILES = None

    @classmethod
    def gateway_file(cls):
        return cls.GATEWAY

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.echo = Echo()
        try:
            cls.gw = Gateway(cls.gateway_file(), cls.POLICY, cls.echo.port, files=cls.FILES)
        except Exception:
            cls.echo.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.echo.stop()
        super().tearDownClass()

def main():
    """Runs the calling module's tests: argv[1] is the build directory."""
    global BUILD_DIR
    args = sys.argv[1:]
    if args and not args[0].startswith("-") and os.path.isdir(args[0]):
        BUILD_DIR = args.pop(0)
    # TOLLGATE_BUILD_DIR wins over the argument: ctest's build directory, other binaries.
    BUILD_DIR = os.environ.get("TOLLGATE_BUILD_DIR", BUILD_DIR)
    unittest.main(module="__main__", argv=[sys.argv[0]] + args, verbosity=2)
