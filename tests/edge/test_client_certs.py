"""Client certificates on TLS listeners (docs/design.md §17, issue 25 item 4), through a real
gateway and curl: a certificate signed by `client_ca` is accepted, none is fine under
`client_verify: optional` and fails the handshake under `required`, one from another CA is
refused under both; a limit keyed by `client_cert: sha256` gives each certificate its own bucket,
a key file names a tier by `sha256:<fingerprint>`; the facts reach the upstream in the fields
`client_cert_headers` names, and a client's own copies of those fields do not; a reload reads
the CA file again and keeps the one in force when the new one is broken.

Run: /usr/bin/python3 tests/edge/test_client_certs.py BUILD_DIR [unittest args]
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
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
  certs:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      per_cert: { key: { client_cert: sha256 }, short: { rate: 1/h, burst: 3 } }
tiers:
  multipliers: { free: 1, gold: 2 }
  default: free
  from:
    - key_file: { file: keys.yaml, key: { client_cert: sha256 } }
"""

HEADERS = "{ subject: X-Client-Subject, san: X-Client-San, sha256: X-Client-Cert-Sha256 }"


def tls_listener(name, verify):
    return (f"  - name: {name}\n    address: 127.0.0.1\n    port: 0\n    tls:\n"
            "      certificate: '{dir}/server.pem'\n      private_key: '{dir}/server.key'\n"
            f"      client_ca: '{{dir}}/ca.pem'\n      client_verify: {verify}\n"
            f"      client_cert_headers: {HEADERS}\n")


GATEWAY = ("listeners:\n" + tls_listener("public", "optional") + tls_listener("strict", "required")
           + "  - { name: plain, address: 127.0.0.1, port: 0 }\n"
           "admin: { address: 127.0.0.1, port: 0 }\nworkers: 2\n"
           'upstreams:\n  app: { endpoints: ["{echo}"] }\n'
           "routes:\n  - { match: { path_prefix: /limited/ }, category: certs, upstream: app }\n"
           'default_route: { category: general, upstream: app }\npolicies: ["{policy}"]\n')


def make_files(scratch):
    """Every certificate the tests use, and the files the gateway reads, by name."""
    ca = certs.Authority(scratch, "ca", "Tollgate Test Clients")
    other = certs.Authority(scratch, "other", "Another CA")
    server = certs.Authority(scratch, "server-ca", "Tollgate Test Servers")
    server.issue("server", "/CN=localhost", "IP:127.0.0.1,DNS:localhost", usage="serverAuth")
    ca.issue("alice", "/CN=alice/O=Tollgate Test", "DNS:alice.test,email:alice@example.test")
    ca.issue("bob", "/CN=bob/O=Tollgate Test", "URI:spiffe://test/bob")
    ca.issue("carol", "/CN=carol/O=Tollgate Test")
    other.issue("mallory", "/CN=alice/O=Tollgate Test", "DNS:alice.test")
    files = {name: certs.read(os.path.join(scratch, name))
             for name in ("server.pem", "server.key", "ca.pem", "other.pem")}
    files["keys.yaml"] = f"'sha256:{certs.fingerprint(os.path.join(scratch, 'alice.pem'))}': gold\n"
    return files


def listener_ports(gw):
    """The port of each listener of `gw`, by name, from its log."""
    return {name: int(port) for name, port in
            re.findall(r"listening on (\w+) 127\.0\.0\.1:(\d+)", gw.process.output())}


def curl(scratch, port, paths, who=None, headers=(), plain=False):
    """curl over one connection to `port` for every path of `paths`, with the client
    certificate `who` of `scratch` (None: none) and extra `headers`; returns (statuses,
    [response bodies], curl's exit code). A status 0: no response (the handshake failed)."""
    args = ["curl", "-s", "--cacert", os.path.join(scratch, "server-ca.pem")]
    if who:
        args += ["--cert", os.path.join(scratch, f"{who}.pem"),
                 "--key", os.path.join(scratch, f"{who}.key")]
    for name, value in headers:
        args += ["-H", f"{name}: {value}"]
    out_dir = tempfile.mkdtemp(dir=scratch)
    for i, path in enumerate(paths):
        args += ["-o", os.path.join(out_dir, str(i)), "-w", "%{http_code}\\n",
                 f"{'http' if plain else 'https'}://127.0.0.1:{port}{path}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    statuses = [int(s) for s in done.stdout.split()]
    bodies = []
    for i in range(len(paths)):
        p = os.path.join(out_dir, str(i))
        bodies.append(certs.read(p) if os.path.exists(p) else "")
    return statuses, bodies, done.returncode


class ClientCertificates(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="tollgate-certs-")
        cls.files = make_files(cls.scratch)
        cls.echo = h.Echo()
        try:
            cls.gw = h.Gateway(GATEWAY, POLICY, cls.echo.port, files=cls.files)
        except Exception:
            cls.echo.stop()
            raise
        cls.ports = listener_ports(cls.gw)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.echo.stop()
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def cert(self, name):
        return os.path.join(self.scratch, f"{name}.pem"), os.path.join(self.scratch, f"{name}.key")

    def curl(self, listener, paths, who=None, headers=()):
        return curl(self.scratch, self.ports[listener], paths, who, headers, listener == "plain")

    @staticmethod
    def forwarded(body, name):
        """The values of header `name` the echo received."""
        return [v for n, v in json.loads(body)["headers"] if n.lower() == name.lower()]

    def test_a_certificate_signed_by_client_ca_is_accepted_and_forwarded(self):
        for listener in ("public", "strict"):
            with self.subTest(listener=listener):
                statuses, bodies, _ = self.curl(listener, ["/echo"], "alice")
                self.assertEqual(statuses, [200])
                self.assertEqual(self.forwarded(bodies[0], "X-Client-Subject"),
                                 ["O=Tollgate Test,CN=alice"])
                self.assertEqual(self.forwarded(bodies[0], "X-Client-San"),
                                 ["DNS:alice.test, email:alice@example.test"])
                self.assertEqual(self.forwarded(bodies[0], "X-Client-Cert-Sha256"),
                                 [certs.fingerprint(self.cert("alice")[0])])
        statuses, bodies, _ = self.curl("public", ["/echo"], "bob")
        self.assertEqual(self.forwarded(bodies[0], "X-Client-San"), ["URI:spiffe://test/bob"])
        # No subjectAltName: no line for it.
        statuses, bodies, _ = self.curl("public", ["/echo"], "carol")
        self.assertEqual(self.forwarded(bodies[0], "X-Client-San"), [])
        self.assertEqual(self.forwarded(bodies[0], "X-Client-Subject"), ["O=Tollgate Test,CN=carol"])

    def test_no_certificate_passes_under_optional_and_fails_the_handshake_under_required(self):
        statuses, bodies, _ = self.curl("public", ["/echo"])
        self.assertEqual(statuses, [200])
        self.assertEqual(self.forwarded(bodies[0], "X-Client-Cert-Sha256"), [])
        statuses, _, code = self.curl("strict", ["/echo"])
        self.assertEqual(statuses, [0])
        self.assertNotEqual(code, 0)

    def test_a_certificate_from_another_ca_is_refused(self):
        for listener in ("public", "strict"):
            with self.subTest(listener=listener):
                statuses, _, code = self.curl(listener, ["/echo"], "mallory")
                self.assertEqual(statuses, [0])
                self.assertNotEqual(code, 0)

    def test_a_client_sent_copy_of_a_forwarded_field_does_not_reach_the_upstream(self):
        spoof = [("X-Client-Subject", "CN=admin"), ("x-client-cert-sha256", "0" * 64),
                 ("X-Client-San", "DNS:admin.test")]
        statuses, bodies, _ = self.curl("public", ["/echo"], "alice", spoof)
        self.assertEqual(statuses, [200])
        self.assertEqual(self.forwarded(bodies[0], "X-Client-Subject"), ["O=Tollgate Test,CN=alice"])
        self.assertEqual(self.forwarded(bodies[0], "X-Client-Cert-Sha256"),
                         [certs.fingerprint(self.cert("alice")[0])])
        # Without a certificate, and on a listener without TLS: dropped all the same.
        for listener, who in (("public", None), ("plain", None)):
            with self.subTest(listener=listener):
                statuses, bodies, _ = self.curl(listener, ["/echo"], who, spoof)
                self.assertEqual(statuses, [200])
                for name, _ in spoof:
                    self.assertEqual(self.forwarded(bodies[0], name), [])

    def test_a_limit_keyed_by_the_certificate_gives_each_its_own_bucket_and_tier(self):
        # Burst 3 a certificate, each in its own bucket over one connection; alice's
        # fingerprint is in the key file as gold (x2): 6.
        for who, admitted in (("carol", 3), ("bob", 3), ("alice", 6)):
            with self.subTest(who=who):
                statuses, _, _ = self.curl("public", [f"/limited/{i}" for i in range(8)], who)
                self.assertEqual(statuses, [200] * admitted + [429] * (8 - admitted))
        # Without a certificate the limit does not apply (its key is missing).
        statuses, _, _ = self.curl("public", [f"/limited/{i}" for i in range(8)])
        self.assertEqual(statuses, [200] * 8)


class Reload(unittest.TestCase):
    def test_reload_reads_the_ca_again_and_keeps_it_when_the_new_one_is_broken(self):
        scratch = tempfile.mkdtemp(prefix="tollgate-certs-")
        self.addCleanup(shutil.rmtree, scratch, True)
        files = make_files(scratch)
        with h.gateway_with_echo(GATEWAY, POLICY, files) as gw:
            port = listener_ports(gw)["strict"]

            def status(who):
                return curl(scratch, port, ["/echo"], who)[0]
            self.assertEqual(status("alice"), [200])
            # A broken CA file: the reload is refused, naming its key; the CA in force stays.
            with open(os.path.join(gw.dir, "ca.pem"), "w") as f:
                f.write("not a certificate\n")
            line = gw.reload(GATEWAY, POLICY)
            self.assertIn("listeners.public.tls.client_ca", line)
            self.assertEqual(status("alice"), [200])
            self.assertEqual(status("mallory"), [0])
            # Another CA: its clients are accepted on new connections, the old CA's refused.
            with open(os.path.join(gw.dir, "ca.pem"), "w") as f:
                f.write(files["other.pem"])
            self.assertIn("in force", gw.reload(GATEWAY, POLICY))
            self.assertEqual(status("mallory"), [200])
            self.assertEqual(status("alice"), [0])


if __name__ == "__main__":
    unittest.main()
