"""Certificates by ACME (docs/design.md §17, issue 25 item 5) against Debian's `pebble`, the ACME
test server, on loopback: pebble-challtestsrv answers pebble's DNS with 127.0.0.1 for every
name, pebble validates http-01 on the gateway's plain listener (its httpPort) and issues; the
TLS listener then serves pebble's certificate without a restart (openssl s_client shows the
issuer), the storage files are 0600, a restart reuses the stored certificate without a new
order, a certificate is renewed when its renewal point comes (brought near by the test knob
TOLLGATE_ACME_RENEW_AFTER_SECONDS, docs/configuration.md), and tls-alpn-01 proves a name on the
TLS listener itself (pebble's tlsPort); with the ACME server out of reach, the listener serves
its self-signed placeholder and the next try waits a jittered minute.

Run: /usr/bin/python3 tests/edge/test_acme.py BUILD_DIR [unittest args]
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402

DOMAIN = "acme.tollgate.test"
POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
"""


def gateway_file(plain_port, tls_port, storage, directory, ca, challenge="http-01",
                 domain=DOMAIN):
    text = h.gateway_yaml()
    return (f"listeners:\n"
            f"  - {{ name: web, address: 127.0.0.1, port: {plain_port} }}\n"
            f"  - name: public\n    address: 127.0.0.1\n    port: {tls_port}\n"
            f"    tls:\n      acme:\n        directory: '{directory}'\n"
            f"        email: ops@example.com\n        domains: [{domain}]\n"
            f"        challenge: {challenge}\n        storage: '{storage}'\n        ca: '{ca}'\n"
            + text[text.index("\n") + 1:])


class Pebble:
    """pebble and pebble-challtestsrv on loopback ports chosen free; http-01 checked on
    `http_port`."""

    def __init__(self, scratch, http_port, tls_port, nonce_reject="0"):
        self.cert = os.path.join(scratch, "pebble.pem")
        key = os.path.join(scratch, "pebble.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=pebble", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", key, "-out", self.cert], check=True, capture_output=True,
                       timeout=30)
        self.port, management, dns = h.free_port(), h.free_port(), h.free_port()
        config = os.path.join(scratch, "pebble.json")
        with open(config, "w") as f:
            json.dump({"pebble": {"listenAddress": f"127.0.0.1:{self.port}",
                                  "managementListenAddress": f"127.0.0.1:{management}",
                                  "certificate": self.cert, "privateKey": key,
                                  "httpPort": http_port, "tlsPort": tls_port,
                                  "ocspResponderURL": "",
                                  "externalAccountBindingRequired": False}}, f)
        self.dns = h.Process(["pebble-challtestsrv", "-defaultIPv4", "127.0.0.1", "-defaultIPv6",
                              "", "-dns01", f"127.0.0.1:{dns}", "-http01", "", "-https01", "",
                              "-tlsalpn01", "", "-management", f"127.0.0.1:{h.free_port()}"])
        # pebble takes these settings from its environment only.
        env = dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT=nonce_reject)
        self.saved = os.environ.copy()
        os.environ.update(env)
        try:
            self.process = h.Process(["pebble", "-config", config, "-dnsserver",
                                      f"127.0.0.1:{dns}"])
        finally:
            os.environ.clear()
            os.environ.update(self.saved)
        self.process.wait_for_line("ACME directory available", timeout=30)
        self.directory = f"https://127.0.0.1:{self.port}/dir"

    def stop(self):
        self.process.stop()
        self.dns.stop()


def served(port, domain=DOMAIN):
    """The issuer and serial of the certificate served for `domain` on `port`."""
    hello = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                            "-servername", domain], input=b"", capture_output=True, timeout=20)
    out = subprocess.run(["openssl", "x509", "-noout", "-issuer", "-serial"], input=hello.stdout,
                         capture_output=True, timeout=20).stdout.decode()
    return out


class Acme(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.echo = h.Echo()
        cls.scratch = tempfile.mkdtemp(prefix="tollgate-acme-")
        cls.storage = os.path.join(cls.scratch, "acme")
        cls.plain, cls.tls = h.free_port(), h.free_port()
        cls.pebble = Pebble(cls.scratch, cls.plain, cls.tls)
        cls.gw = None

    @classmethod
    def tearDownClass(cls):
        if cls.gw:
            cls.gw.stop()
        cls.pebble.stop()
        cls.echo.stop()
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def start(self, env=None, **kw):
        saved = os.environ.copy()
        os.environ.update(env or {})
        try:
            gw = h.Gateway(gateway_file(self.plain, self.tls, kw.pop("storage", self.storage),
                                        self.pebble.directory, self.pebble.cert, **kw),
                           POLICY, self.echo.port)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        type(self).gw = gw
        return gw

    def stop(self):
        type(self).gw.stop()
        type(self).gw = None

    def test_1_issued_by_http01_and_served_without_a_restart(self):
        gw = self.start()
        # Until then, the placeholder: self-signed for the domain.
        gw.process.wait_for_line("acme public: order", timeout=30)
        gw.process.wait_for_line("http-01 challenge answered", timeout=60)
        gw.process.wait_for_line("acme public: certificate stored", timeout=60)
        gw.process.wait_for_line("acme: certificates installed", timeout=30)
        self.assertIn("Pebble", served(self.tls))
        for name in ("account.key", f"{DOMAIN}.key", f"{DOMAIN}.crt"):
            mode = stat.S_IMODE(os.stat(os.path.join(self.storage, name)).st_mode)
            self.assertEqual(mode, 0o600, name)
        m = re.search(r'^tollgate_certificate_expiry_timestamp_seconds\{name="' + re.escape(DOMAIN)
                      + r'"\} (\S+)$', gw.metrics_text(), re.M)
        self.assertIsNotNone(m)
        self.assertGreater(float(m.group(1)), time.time())
        # The challenge path is answered before admission only for tokens under way.
        status, _, _ = h.http_request(self.plain, "GET /.well-known/acme-challenge/nope HTTP/1.1"
                                      "\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 200)  # forwarded to the echo like any request
        self.stop()

    def test_2_a_restart_reuses_the_stored_certificate(self):
        with open(os.path.join(self.storage, f"{DOMAIN}.crt")) as f:
            before = f.read()
        gw = self.start()
        gw.process.wait_for_line("acme public: stored certificate reused", timeout=30)
        served_serial = served(self.tls)
        self.assertIn("Pebble", served_serial)
        time.sleep(2)
        self.assertNotIn("acme public: order", gw.process.output())
        with open(os.path.join(self.storage, f"{DOMAIN}.crt")) as f:
            self.assertEqual(f.read(), before)
        # A reload makes the contexts again from storage: the certificate stays served.
        self.assertIn("in force", gw.reload(
            gateway_file(self.plain, self.tls, self.storage, self.pebble.directory,
                         self.pebble.cert), POLICY))
        self.assertIn("Pebble", served(self.tls))
        self.stop()

    def test_3_renewed_when_due_and_served(self):
        gw = self.start({"TOLLGATE_ACME_RENEW_AFTER_SECONDS": "1"})
        # The stored certificate is past its (forced) renewal point: a new order at start.
        gw.process.wait_for_line("acme public: stored certificate reused", timeout=30)
        gw.process.wait_for_line("acme public: certificate stored", timeout=60)
        gw.process.wait_for_line("acme: certificates installed", timeout=30)
        first = served(self.tls)
        gw.process.wait_for_line("acme public: certificate stored", timeout=60)
        gw.process.wait_for_line("acme: certificates installed", timeout=30)
        second = served(self.tls)
        self.assertIn("Pebble", second)
        self.assertNotEqual(re.findall("serial=.*", first), re.findall("serial=.*", second))
        self.assertGreaterEqual(gw.process.output().count("acme public: account"), 2)
        self.stop()

    def test_4_issued_by_tls_alpn01_on_the_tls_listener(self):
        domain = "alpn.tollgate.test"
        storage = os.path.join(self.scratch, "alpn")
        gw = self.start(storage=storage, challenge="tls-alpn-01", domain=domain)
        gw.process.wait_for_line("tls-alpn-01 challenge ready", timeout=30)
        gw.process.wait_for_line(f"{domain} authorized", timeout=60)
        gw.process.wait_for_line("acme public: certificate stored", timeout=60)
        gw.process.wait_for_line("acme: certificates installed", timeout=30)
        self.assertIn("Pebble", served(self.tls, domain))
        # No challenge under way: acme-tls/1 handshakes are refused, others served.
        hello = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.tls}",
                                "-servername", domain, "-alpn", "acme-tls/1"], input=b"",
                               capture_output=True, timeout=20)
        self.assertNotEqual(hello.returncode, 0)
        self.assertNotIn("http-01 challenge answered", gw.process.output())
        self.stop()

    def test_5_a_placeholder_until_issued_and_backoff_after_a_failure(self):
        domain = "down.tollgate.test"
        storage = os.path.join(self.scratch, "down")
        saved = self.pebble.directory
        # An ACME server that cannot be reached: nothing listens on the port.
        self.pebble.directory = f"https://127.0.0.1:{h.free_port()}/dir"
        try:
            gw = self.start(storage=storage, domain=domain)
        finally:
            self.pebble.directory = saved
        line = gw.process.wait_for_line("acme public: order failed (1 in a row)", timeout=30)
        wait = int(re.search(r"next try in (\d+) s", line).group(1))
        self.assertTrue(30 <= wait <= 60, line)  # 1 minute, jittered down to half
        # The placeholder: self-signed for the domain, served meanwhile.
        hello = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.tls}",
                                "-servername", domain], input=b"", capture_output=True,
                               timeout=20)
        out = subprocess.run(["openssl", "x509", "-noout", "-subject", "-issuer", "-ext",
                              "subjectAltName"], input=hello.stdout, capture_output=True,
                             timeout=20).stdout.decode()
        self.assertIn(f"subject=CN = {domain}", out)
        self.assertIn(f"issuer=CN = {domain}", out)
        self.assertIn(f"DNS:{domain}", out)
        self.assertFalse(os.path.exists(os.path.join(storage, f"{domain}.crt")))
        self.stop()

    def test_6_a_bad_nonce_is_tried_once_more(self):
        # A pebble that rejects every nonce: each signed request is sent twice, then the order
        # fails naming the problem.
        scratch = os.path.join(self.scratch, "nonces")
        os.makedirs(scratch)
        strict = Pebble(scratch, self.plain, self.tls, nonce_reject="100")
        saved = self.pebble
        type(self).pebble = strict
        try:
            gw = self.start(storage=os.path.join(scratch, "acme"))
        finally:
            type(self).pebble = saved
        try:
            gw.process.wait_for_line("badNonce, once more with a fresh nonce", timeout=30)
            line = gw.process.wait_for_line("order failed (1 in a row)", timeout=30)
            self.assertIn("urn:ietf:params:acme:error:badNonce", line)
        finally:
            self.stop()
            strict.stop()


if __name__ == "__main__":
    unittest.main()
