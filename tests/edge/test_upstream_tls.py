"""Upstreams over TLS (docs/design.md §17, issue 25 item 6), through a real gateway in front of
nginx from Debian serving TLS with certificates made here: the name sent as SNI (the configured
server_name, else the endpoint's host; none for an address), a certificate from another CA or
for another name refused with a 502 and a log line naming the upstream and the reason, a client
certificate presented to an upstream that requires one, several requests over one pooled TLS
connection, sessions resumed on new connections, and a WebSocket tunnel over TLS.

nginx answers every request with what it saw of the connection: its number, the requests it
carried, the SNI, whether the session was resumed, the client certificate's subject.

Run: /usr/bin/python3 tests/edge/test_upstream_tls.py BUILD_DIR [unittest args]
"""

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
sys.path.insert(0, os.path.dirname(__file__))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import certs  # noqa: E402
import harness as h  # noqa: E402

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
"""

FACTS = ('"conn=$connection req=$connection_requests sni=$ssl_server_name proto=$ssl_protocol '
         'reused=$ssl_session_reused client=$ssl_client_s_dn\\n"')


class Nginx:
    """nginx serving TLS on three ports: `keep` (keep-alive), `once` (one request a
    connection) and `mtls` (a client certificate signed by clients-ca.pem required)."""

    def __init__(self, directory, echo_port):
        self.dir = directory
        self.ports = {name: h.free_port() for name in ("keep", "once", "mtls")}
        for sub in ("body", "proxy", "fcgi", "uwsgi", "scgi"):
            os.makedirs(os.path.join(directory, sub), exist_ok=True)
        os.chmod(directory, 0o777)
        d = directory

        def server(name, extra):
            return (f"  server {{\n    listen 127.0.0.1:{self.ports[name]} ssl;\n"
                    f"    ssl_certificate {d}/upstream.pem;\n    ssl_certificate_key {d}/upstream.key;\n"
                    f"    {extra}\n"
                    f"    location /ws/ {{ proxy_pass http://127.0.0.1:{echo_port};\n"
                    "      proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade;\n"
                    '      proxy_set_header Connection "upgrade"; }\n'
                    f"    location / {{ default_type text/plain; return 200 {FACTS}; }}\n  }}\n")
        conf = (f"worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n"
                "events { worker_connections 64; }\nhttp {\n  access_log off;\n"
                f"  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n"
                f"  fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n"
                f"  scgi_temp_path {d}/scgi;\n  ssl_session_cache shared:tls:1m;\n"
                "  ssl_protocols TLSv1.2 TLSv1.3;\n"
                + server("keep", "keepalive_requests 1000;")
                + server("once", "keepalive_requests 1;")
                + server("mtls", f"ssl_verify_client on; ssl_client_certificate {d}/clients-ca.pem;")
                + "}\n")
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)
        self.process = h.Process(["/usr/sbin/nginx", "-p", d, "-c", os.path.join(d, "nginx.conf"),
                                  "-g", "daemon off;"])
        ok = h.eventually(lambda: all(self._listening(p) for p in self.ports.values()), 10)
        if not ok:
            raise RuntimeError("nginx did not start:\n" + self.process.output())

    @staticmethod
    def _listening(port):
        import socket
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self):
        self.process.stop()


def upstreams(ports):
    """The gateway's upstreams, each reached under /<name>/."""
    keep, once, mtls = ports["keep"], ports["once"], ports["mtls"]
    trust = "ca: '{dir}/upstream-ca.pem'"
    return {
        "named": f'endpoints: ["127.0.0.1:{keep}"], tls: {{ {trust}, server_name: api.internal }}',
        "by_host": f'endpoints: ["localhost:{keep}"], tls: {{ {trust} }}',
        "by_address": f'endpoints: ["127.0.0.1:{keep}"], tls: {{ {trust} }}',
        "once": f'endpoints: ["127.0.0.1:{once}"], tls: {{ {trust}, server_name: api.internal }}',
        "wrong_ca": f'endpoints: ["127.0.0.1:{keep}"], tls: {{ ca: "{{dir}}/rogue-ca.pem", '
                    "server_name: api.internal }",
        "wrong_name": f'endpoints: ["127.0.0.1:{keep}"], tls: {{ {trust}, server_name: other.internal }}',
        "unverified": f'endpoints: ["127.0.0.1:{keep}"], tls: {{ ca: "{{dir}}/rogue-ca.pem", '
                      "server_name: other.internal, verify: false }",
        "mtls": f'endpoints: ["127.0.0.1:{mtls}"], tls: {{ {trust}, server_name: api.internal, '
                "certificate: '{dir}/gateway-client.pem', private_key: '{dir}/gateway-client.key' }",
        "mtls_without": f'endpoints: ["127.0.0.1:{mtls}"], tls: {{ {trust}, server_name: api.internal }}',
    }


def gateway_file(ports):
    lines = ["listeners: [{ name: public, address: 127.0.0.1, port: 0 }]",
             "admin: { address: 127.0.0.1, port: 0 }",
             "workers: 1",  # one worker: one pool, whose connections and sessions the tests count
             "upstreams:"]
    lines += [f"  {name}: {{ {text} }}" for name, text in upstreams(ports).items()]
    lines += ["routes:",
              "  - { match: { path_prefix: /ws/, header: { Upgrade: websocket } }, "
              "category: websocket, upstream: named }"]
    lines += [f"  - {{ match: {{ path_prefix: /{name}/ }}, category: general, upstream: {name} }}"
              for name in upstreams(ports)]
    lines += ["default_route: { category: general, upstream: named }", 'policies: ["{policy}"]']
    return "\n".join(lines) + "\n"


def facts(body):
    """nginx's answer as a dict: conn, req, sni, reused, client."""
    out = {}
    for part in body.strip().split(" "):
        k, _, v = part.partition("=")
        out[k] = v
    return out


class UpstreamTls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="tollgate-upstream-tls-")
        ca = certs.Authority(cls.scratch, "upstream-ca", "Upstream CA")
        certs.Authority(cls.scratch, "rogue-ca", "Rogue CA")
        clients = certs.Authority(cls.scratch, "clients-ca", "Upstream Clients CA")
        ca.issue("upstream", "/CN=api.internal", "DNS:api.internal,DNS:localhost,IP:127.0.0.1",
                 usage="serverAuth")
        clients.issue("gateway-client", "/CN=tollgate/O=Gateway", usage="clientAuth")
        cls.echo = h.Echo()
        cls.nginx = None
        cls.gw = None
        try:
            cls.nginx = Nginx(cls.scratch, cls.echo.port)
            files = {n: certs.read(os.path.join(cls.scratch, n)) for n in
                     ("upstream-ca.pem", "rogue-ca.pem", "gateway-client.pem", "gateway-client.key")}
            cls.gw = h.Gateway(gateway_file(cls.nginx.ports), POLICY, cls.echo.port, files=files)
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.gw:
            cls.gw.stop()
        if cls.nginx:
            cls.nginx.stop()
        cls.echo.stop()
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def get(self, path):
        status, _, body = h.http_request(
            self.gw.port, f"GET {path} HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
        return status, body

    def test_the_name_is_sent_as_sni_and_verified(self):
        for upstream, sni in (("named", "api.internal"), ("by_host", "localhost"),
                              ("by_address", ""), ("mtls", "api.internal")):
            with self.subTest(upstream=upstream):
                status, body = self.get(f"/{upstream}/x")
                self.assertEqual(status, 200, body)
                self.assertEqual(facts(body)["sni"], sni)

    def test_a_certificate_that_does_not_verify_is_a_502_naming_upstream_and_reason(self):
        for upstream, reason in (("wrong_ca", "unable to get local issuer certificate"),
                                 ("wrong_name", "hostname mismatch")):
            with self.subTest(upstream=upstream):
                status, body = self.get(f"/{upstream}/x")
                self.assertEqual(status, 502, body)
                self.assertIn(f"upstream {upstream} failed the TLS handshake", body)
                line = self.gw.process.wait_for_line(f"upstream {upstream} endpoint")
                self.assertIn(f"certificate verify failed: {reason}", line)
        # verify: false takes any certificate (tests only).
        status, body = self.get("/unverified/x")
        self.assertEqual(status, 200, body)
        errors = self.gw.metrics().value("tollgate_upstream_errors_total", upstream="wrong_name")
        self.assertEqual(errors, 1)

    def test_a_client_certificate_is_presented_to_an_upstream_that_asks(self):
        status, body = self.get("/mtls/x")
        self.assertEqual(status, 200, body)
        self.assertEqual(facts(body)["client"], "O=Gateway,CN=tollgate")  # nginx: RFC 4514
        # Without one, nginx answers 400 itself, relayed as it is.
        status, body = self.get("/mtls_without/x")
        self.assertEqual(status, 400)

    def test_requests_share_one_pooled_tls_connection(self):
        seen = [facts(self.get(f"/named/{i}")[1]) for i in range(5)]
        self.assertEqual(len({f["conn"] for f in seen}), 1, seen)
        requests = [int(f["req"]) for f in seen]
        self.assertEqual(requests, list(range(requests[0], requests[0] + 5)))

    def test_a_new_connection_resumes_the_session_of_the_last(self):
        # nginx closes each connection after one request: every request opens a new one, and
        # every one after the first resumes the session the one before left.
        seen = [facts(self.get(f"/once/{i}")[1]) for i in range(4)]
        self.assertEqual(len({f["conn"] for f in seen}), 4, seen)
        self.assertEqual([f["reused"] for f in seen[1:]], ["r", "r", "r"], seen)
        # TLS 1.3, whose tickets come after the handshake: kept when the exchange ends.
        self.assertEqual({f["proto"] for f in seen}, {"TLSv1.3"})

    def test_a_websocket_tunnel_runs_over_a_tls_upstream(self):
        async def run():
            async with h.connect(self.gw, "/ws/echo") as ws:
                for text in ("one", "two" * 5000):
                    await ws.send(text)
                    self.assertEqual(await ws.recv(), text)
                await ws.send(b"\x00\x01binary")
                self.assertEqual(await ws.recv(), b"\x00\x01binary")
        asyncio.run(asyncio.wait_for(run(), 15))

    def test_check_config_loads_the_upstreams_tls_files(self):
        path = os.path.join(self.gw.dir, "broken.yaml")
        with open(os.path.join(self.gw.dir, "not-a-ca.pem"), "w") as f:
            f.write("nothing here\n")
        text = gateway_file(self.nginx.ports).replace("{dir}/upstream-ca.pem", "{dir}/not-a-ca.pem")
        with open(path, "w") as f:
            f.write(text.replace("{dir}", self.gw.dir)
                    .replace("{policy}", os.path.join(self.gw.dir, "policy.yaml")))
        out = subprocess.run([h.binary("tollgate"), "--check-config", path], capture_output=True,
                             text=True, timeout=20)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("upstreams.named.tls.ca: cannot load", out.stderr + out.stdout)


if __name__ == "__main__":
    unittest.main()
