"""Several certificates on one TLS listener, chosen by SNI (docs/design.md §17, issue 25 item 3),
through a real gateway and real clients that are not ours: `openssl s_client -servername` shows
which certificate each name gets (exact names, one-label wildcards, the first as the default
for an unknown name or none), curl verifies a name's certificate end to end, a reload replaces
one certificate, and a broken file leaves the certificates in force.

Run: /usr/bin/python3 tests/edge/test_sni.py BUILD_DIR [unittest args]
"""

import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
"""


def certificate(directory, name, cn, sans):
    """A fresh self-signed certificate `name`.pem with `name`.key, common name `cn`, SANs."""
    cert, key = (os.path.join(directory, f"{name}.{ext}") for ext in ("pem", "key"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", f"/CN={cn}",
                    "-addext", f"subjectAltName={sans}", "-keyout", key, "-out", cert],
                   check=True, capture_output=True, timeout=30)
    return cert, key


def gateway_file():
    listener = ("listeners:\n  - name: public\n    address: 127.0.0.1\n    port: 0\n"
                "    tls:\n      certificates:\n"
                "        - { certificate: '{dir}/default.pem', private_key: '{dir}/default.key' }\n"
                "        - { certificate: '{dir}/a.pem', private_key: '{dir}/a.key' }\n"
                "        - { certificate: '{dir}/b.pem', private_key: '{dir}/b.key' }\n")
    text = h.gateway_yaml()
    return listener + text[text.index("\n") + 1:]


class Sni(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.echo = h.Echo()
        cls.files = {}
        scratch = __import__("tempfile").mkdtemp(prefix="tollgate-sni-")
        cls.scratch = scratch
        certificate(scratch, "default", "default.test", "IP:127.0.0.1,DNS:localhost")
        certificate(scratch, "a", "a.test", "DNS:a.test")
        certificate(scratch, "b", "b.test", "DNS:*.b.test,DNS:b.test")
        for name in ("default.pem", "default.key", "a.pem", "a.key", "b.pem", "b.key"):
            with open(os.path.join(scratch, name)) as f:
                cls.files[name] = f.read()
        cls.gw = h.Gateway(gateway_file(), POLICY, cls.echo.port, files=cls.files)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.echo.stop()
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def served(self, name):
        """The common name of the certificate served for SNI `name` (None: no SNI)."""
        args = ["openssl", "s_client", "-connect", f"127.0.0.1:{self.gw.port}"]
        args += ["-noservername"] if name is None else ["-servername", name]
        hello = subprocess.run(args, input=b"", capture_output=True, timeout=20)
        subject = subprocess.run(["openssl", "x509", "-noout", "-subject"], input=hello.stdout,
                                 capture_output=True, timeout=20).stdout.decode()
        return subject.strip().rsplit("CN", 1)[-1].lstrip(" =")

    def test_each_name_gets_its_certificate(self):
        cases = [("a.test", "a.test"), ("A.Test", "a.test"), ("b.test", "b.test"),
                 ("x.b.test", "b.test"), ("deep.x.b.test", "default.test"),
                 ("unknown.test", "default.test"), ("localhost", "default.test"),
                 (None, "default.test")]
        for name, cn in cases:
            with self.subTest(name=name):
                self.assertEqual(self.served(name), cn)

    def test_curl_verifies_a_name_end_to_end(self):
        for name, cert in (("a.test", "a.pem"), ("x.b.test", "b.pem")):
            out = subprocess.run(
                ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--resolve",
                 f"{name}:{self.gw.port}:127.0.0.1", "--cacert", os.path.join(self.gw.dir, cert),
                 f"https://{name}:{self.gw.port}/x"], capture_output=True, timeout=20)
            self.assertEqual(out.stdout.decode(), "200", (name, out.stderr))
        # The other certificate does not verify that name: the choice is real.
        out = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--resolve",
             f"a.test:{self.gw.port}:127.0.0.1", "--cacert", os.path.join(self.gw.dir, "b.pem"),
             f"https://a.test:{self.gw.port}/x"], capture_output=True, timeout=20)
        self.assertEqual(out.stdout.decode(), "000")

    def test_reload_replaces_one_certificate_and_keeps_them_on_a_broken_file(self):
        gw = self.gw
        certificate(gw.dir, "a", "a-renewed.test", "DNS:a.test")
        self.assertIn("in force", gw.reload(gateway_file(), POLICY))
        self.assertEqual(self.served("a.test"), "a-renewed.test")
        self.assertEqual(self.served("x.b.test"), "b.test")
        # A broken key: the reload is refused, naming the key, and every certificate stays.
        with open(os.path.join(gw.dir, "b.key"), "w") as f:
            f.write("not a key\n")
        line = gw.reload(gateway_file(), POLICY)
        self.assertIn("listeners.public.tls.certificates[2].private_key", line)
        self.assertEqual(self.served("x.b.test"), "b.test")
        self.assertEqual(self.served("a.test"), "a-renewed.test")
        with open(os.path.join(gw.dir, "b.key"), "w") as f:
            f.write(self.files["b.key"])

    def test_a_listener_names_either_one_pair_or_several(self):
        both = gateway_file().replace(
            "    tls:\n", "    tls:\n      certificate: '{dir}/a.pem'\n      private_key: '{dir}/a.key'\n")
        path = os.path.join(self.gw.dir, "both.yaml")
        with open(path, "w") as f:
            f.write(both.replace("{dir}", self.gw.dir).replace("{policy}", os.path.join(self.gw.dir, "policy.yaml"))
                    .replace("{echo}", f"127.0.0.1:{self.echo.port}"))
        out = subprocess.run([h.binary("tollgate"), "--check-config", path], capture_output=True,
                             text=True, timeout=20)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("listeners[0].tls.certificates", out.stderr + out.stdout)
        self.assertIn("not both", out.stderr + out.stdout)


if __name__ == "__main__":
    unittest.main()
