"""Verified identity through a real gateway (docs/design.md §15, issue 23): tokens made live by a
library that is not ours (Debian's python3-jwt over python3-cryptography) against a JWK Set file;
each algorithm verified, each refusal answered 401 with its reason and a token_invalid
violation; limits keyed on a claim and on a composite key counted exactly; a hot token not
verified again (tollgate_token_checks_total); the key set rotated by SIGHUP; on_invalid:
anonymous.

Run: /usr/bin/python3 tests/identity/test_jwt.py BUILD_DIR [unittest args]
"""

import base64
import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import jwt  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: E402

import harness as h  # noqa: E402

SECRET = "shared-secret-for-hs256-of-the-test"
ISS, AUD = "https://id.test/", "api"
os.environ["TOLLGATE_TEST_JWT_SECRET"] = SECRET  # secret_env of every gateway started here

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      ipv4_network: { short: { rate: 1000/s, burst: 1000 } }
      per_user: { key: { jwt_claim: sub }, short: { rate: 1/m, burst: 3 } }
      per_plan: { key: { jwt_claim: org.plan }, short: { rate: 1/m, burst: 1000 } }
      per_key_address: { key: [ { header: X-Api-Key }, individual ], short: { rate: 1/m, burst: 2 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
"""


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwk_of(key, kid):
    alg = ("RS256" if isinstance(key, rsa.RSAPrivateKey) else
           "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "EdDSA")
    j = json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(key.public_key()))
    j["kid"] = kid
    return j


def gateway_file(on_invalid="reject"):
    return h.gateway_yaml().replace(
        "default_route:",
        "identity:\n"
        "  jwt:\n"
        "    jwks_file: {dir}/jwks.json\n"
        f"    issuer: {ISS}\n"
        f"    audience: [{AUD}, other]\n"
        "    algorithms: [RS256, PS256, ES256, ES384, EdDSA, HS256]\n"
        "    secret_env: TOLLGATE_TEST_JWT_SECRET\n"
        "    leeway: 5s\n"
        f"    on_invalid: {on_invalid}\n"
        "default_route:")


class Keys:
    def __init__(self):
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.p256 = ec.generate_private_key(ec.SECP256R1())
        self.p384 = ec.generate_private_key(ec.SECP384R1())
        self.ed = ed25519.Ed25519PrivateKey.generate()
        self.rotated = ec.generate_private_key(ec.SECP256R1())

    def set(self, *pairs):
        return json.dumps({"keys": [jwk_of(k, kid) for k, kid in pairs]})

    def first_set(self):
        return self.set((self.rsa, "rsa"), (self.p256, "p256"), (self.p384, "p384"), (self.ed, "ed"))


def claims(sub="alice", **extra):
    now = int(time.time())
    c = {"sub": sub, "iss": ISS, "aud": AUD, "iat": now, "exp": now + 600,
         "org": {"plan": "free"}, "jti": os.urandom(6).hex()}
    c.update(extra)
    return c


def get(gw, token=None, xff=None, headers=""):
    auth = f"Authorization: Bearer {token}\r\n" if token is not None else ""
    fwd = f"X-Forwarded-For: {xff}\r\n" if xff else ""
    return h.http_request(gw.port, f"GET /api HTTP/1.1\r\nHost: t\r\n{auth}{fwd}{headers}"
                                   "Connection: close\r\n\r\n")


class JwtGateway(h.GatewayCase):
    POLICY = POLICY

    @classmethod
    def gateway_file(cls):
        return gateway_file()

    @classmethod
    def setUpClass(cls):
        cls.keys = Keys()
        cls.FILES = {"jwks.json": cls.keys.first_set()}
        super().setUpClass()

    def refused(self, token, reason):
        before = self.gw.metrics().value("tollgate_violations_total", reason="token_invalid")
        status, headers, body = get(self.gw, token, xff=h.new_client_address())
        self.assertEqual(status, 401, body)
        problem = json.loads(body)
        self.assertEqual(problem["code"], "token_invalid")
        self.assertEqual(problem["reason"], reason)
        self.assertEqual(headers["www-authenticate"], 'Bearer error="invalid_token"')
        self.assertEqual(headers["content-type"], "application/problem+json")
        after = self.gw.metrics().value("tollgate_violations_total", reason="token_invalid")
        self.assertEqual(after, before + 1)

    def test_each_algorithm_verifies(self):
        k = self.keys
        for key, alg, kid in [(k.rsa, "RS256", "rsa"), (k.rsa, "PS256", "rsa"),
                              (k.p256, "ES256", "p256"), (k.p384, "ES384", "p384"),
                              (k.ed, "EdDSA", "ed"), (SECRET, "HS256", None)]:
            with self.subTest(alg=alg):
                headers = {"kid": kid} if kid else {}
                token = jwt.encode(claims(sub=f"user-{alg}"), key, algorithm=alg, headers=headers)
                status, _, body = get(self.gw, token, xff=h.new_client_address())
                self.assertEqual(status, 200, body)

    def test_each_refusal_has_its_reason(self):
        k = self.keys
        rs = lambda c, **kw: jwt.encode(c, k.rsa, algorithm="RS256", headers={"kid": "rsa"}, **kw)
        now = int(time.time())
        unsigned = (b64(json.dumps({"alg": "none"}).encode()) + "." +
                    b64(json.dumps(claims()).encode()) + ".")
        # Algorithm confusion: HS256 keyed with the RSA public key's PEM.
        pem = k.rsa.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo)
        head = b64(json.dumps({"alg": "HS256", "kid": "rsa"}).encode())
        body = b64(json.dumps(claims()).encode())
        confused = head + "." + body + "." + b64(hmac.new(pem, f"{head}.{body}".encode(),
                                                          hashlib.sha256).digest())
        cases = [
            (unsigned, "alg_none"),
            (jwt.encode(claims(), k.rsa, algorithm="RS512", headers={"kid": "rsa"}), "alg_not_allowed"),
            (confused, "bad_signature"),
            (jwt.encode(claims(), k.rsa, algorithm="RS256", headers={"kid": "nope"}), "unknown_kid"),
            (jwt.encode(claims(), k.p256, algorithm="ES256", headers={"kid": "rsa"}), "key_mismatch"),
            (rs(claims(exp=now - 60)), "expired"),
            (rs(claims(nbf=now + 60)), "not_yet_valid"),
            (rs(claims(iat=now + 60)), "issued_in_future"),
            (rs(claims(iss="https://other.test/")), "issuer"),
            (rs(claims(aud="admin")), "audience"),
            (rs(claims(pad="x" * 9000)), "too_long"),
            ("not.a.token!", "malformed"),
            (rs(claims())[:-4] + "AAAA", "bad_signature"),
        ]
        for token, reason in cases:
            with self.subTest(reason=reason):
                self.refused(token, reason)

    def test_two_authorization_fields_are_refused(self):
        token = jwt.encode(claims(), self.keys.rsa, algorithm="RS256", headers={"kid": "rsa"})
        status, _, body = get(self.gw, token, xff=h.new_client_address(),
                              headers=f"Authorization: Bearer {token}\r\n")
        self.assertEqual(status, 401, body)
        self.assertEqual(json.loads(body)["reason"], "malformed")

    def test_a_limit_keyed_on_a_claim_counts_the_subject_across_tokens_and_addresses(self):
        sub = "carol-" + os.urandom(4).hex()
        statuses = []
        for _ in range(5):
            # A new token each time (its jti differs) from a new address: the subject is one.
            token = jwt.encode(claims(sub=sub), self.keys.p256, algorithm="ES256",
                               headers={"kid": "p256"})
            status, headers, body = get(self.gw, token, xff=h.new_client_address())
            statuses.append(status)
            if status == 429:
                self.assertIn("per_user", body)
        self.assertEqual(statuses, [200, 200, 200, 429, 429])
        # Another subject is not limited by carol's bucket, and a request without a token is
        # anonymous: address limits only.
        other = jwt.encode(claims(sub=sub + "-2"), self.keys.p256, algorithm="ES256",
                           headers={"kid": "p256"})
        self.assertEqual(get(self.gw, other, xff=h.new_client_address())[0], 200)
        for _ in range(4):
            self.assertEqual(get(self.gw, None, xff=h.new_client_address())[0], 200)

    def test_a_composite_key_is_one_bucket_per_key_and_address(self):
        key = "k-" + os.urandom(4).hex()
        a, b = h.new_client_address(), h.new_client_address()
        hdr = f"X-Api-Key: {key}\r\n"
        self.assertEqual([get(self.gw, None, xff=a, headers=hdr)[0] for _ in range(3)],
                         [200, 200, 429])
        # The same key from another address has a bucket of its own; another key from a also.
        self.assertEqual([get(self.gw, None, xff=b, headers=hdr)[0] for _ in range(3)],
                         [200, 200, 429])
        self.assertEqual(get(self.gw, None, xff=a, headers=f"X-Api-Key: {key}x\r\n")[0], 200)

    def test_a_hot_token_is_not_verified_again(self):
        token = jwt.encode(claims(sub="hot-" + os.urandom(4).hex()), self.keys.ed,
                           algorithm="EdDSA", headers={"kid": "ed"})
        # Burst 3 on per_user: the rest are 429, after the token was checked all the same.
        m0 = self.gw.metrics()
        for _ in range(20):
            self.assertIn(get(self.gw, token, xff=h.new_client_address())[0], (200, 429))
        m1 = self.gw.metrics()
        verified = (m1.value("tollgate_token_checks_total", result="verified") -
                    m0.value("tollgate_token_checks_total", result="verified"))
        cached = (m1.value("tollgate_token_checks_total", result="cached") -
                  m0.value("tollgate_token_checks_total", result="cached"))
        # Two workers: each verifies the token once at most.
        self.assertGreaterEqual(verified, 1)
        self.assertLessEqual(verified, 2)
        self.assertEqual(verified + cached, 20)

    def test_z_the_key_set_rotates_by_sighup(self):
        k = self.keys
        old = jwt.encode(claims(sub="rot-old"), k.p256, algorithm="ES256", headers={"kid": "p256"})
        new = jwt.encode(claims(sub="rot-new"), k.rotated, algorithm="ES256", headers={"kid": "p256-2"})
        self.assertEqual(get(self.gw, old, xff=h.new_client_address())[0], 200)
        self.refused(new, "unknown_kid")
        with open(os.path.join(self.gw.dir, "jwks.json"), "w") as f:
            f.write(k.set((k.rotated, "p256-2")))
        self.gw.process.signal(signal.SIGHUP)
        self.assertIn("in force", self.gw.process.wait_for_line("reload"))
        # Each worker adopts the new configuration once it has posted it: wait for both.
        self.assertTrue(h.eventually(lambda: all(
            get(self.gw, old, xff=h.new_client_address())[0] == 401 for _ in range(6))))
        # The old token was verified (and remembered) under the old set: refused now.
        self.refused(old, "unknown_kid")
        self.assertEqual(get(self.gw, new, xff=h.new_client_address())[0], 200)
        # A broken key set is refused by the reload, which keeps the set in force.
        with open(os.path.join(self.gw.dir, "jwks.json"), "w") as f:
            f.write('{"keys": [}')
        self.gw.process.signal(signal.SIGHUP)
        line = self.gw.process.wait_for_line("reload")
        self.assertIn("jwks_file", line)
        self.assertEqual(get(self.gw, new, xff=h.new_client_address())[0], 200)


class JwksServer:
    """A local HTTP server whose one page is a JWK Set the test changes (or breaks) at will."""

    def __init__(self, text, tls=None):
        """`tls`: (cert, key) to serve https with."""
        import http.server
        import ssl
        import threading
        outer = self
        self.text, self.status, self.hits = text, 200, 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits += 1
                body = outer.text.encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/jwk-set+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class JwksUrl(unittest.TestCase):
    def test_the_key_set_is_fetched_refreshed_and_kept_when_a_fetch_fails(self):
        keys = Keys()
        served = JwksServer(keys.set((keys.p256, "a")))
        try:
            url = f"    jwks_url: http://127.0.0.1:{served.port}/jwks.json\n    jwks_refresh: 1s\n"
            with h.gateway_with_echo(
                    gateway_file().replace("    jwks_file: {dir}/jwks.json\n", url), POLICY) as gw:
                self.assertIn("1 keys from", gw.process.wait_for_line("keys from"))
                old = jwt.encode(claims(sub="u-old"), keys.p256, algorithm="ES256", headers={"kid": "a"})
                # Each request its own subject: per_user (burst 3) stays out of the way.
                new_token = lambda: jwt.encode(claims(sub="u-" + os.urandom(4).hex()), keys.rotated,
                                               algorithm="ES256", headers={"kid": "b"})
                new = new_token()
                self.assertEqual(get(gw, old, xff=h.new_client_address())[0], 200)
                status, _, body = get(gw, new, xff=h.new_client_address())
                self.assertEqual((status, json.loads(body)["reason"]), (401, "unknown_kid"))
                # The set rotates at the source: the next refresh brings it, without a restart.
                served.text = keys.set((keys.rotated, "b"))
                self.assertTrue(h.eventually(
                    lambda: get(gw, new_token(), xff=h.new_client_address())[0] == 200, timeout=5))
                status, _, body = get(gw, old, xff=h.new_client_address())
                self.assertEqual((status, json.loads(body)["reason"]), (401, "unknown_kid"))
                # A failing source (500, then a broken set) keeps the last good set.
                served.status = 500
                self.assertIn("status 500", gw.process.wait_for_line("the keys in force stay"))
                served.status, served.text = 200, '{"keys": "no"}'
                self.assertIn("not a usable JWK Set", gw.process.wait_for_line("the keys in force stay"))
                self.assertEqual(get(gw, new_token(), xff=h.new_client_address())[0], 200)
                # A reload that keeps the URL keeps the keys fetched (no request refused meanwhile).
                served.text = keys.set((keys.rotated, "b"))
                hits = served.hits
                gw.process.signal(signal.SIGHUP)
                self.assertIn("in force", gw.process.wait_for_line("reload"))
                for _ in range(6):
                    self.assertEqual(get(gw, new_token(), xff=h.new_client_address())[0], 200)
                self.assertTrue(h.eventually(lambda: served.hits > hits, timeout=5))
        finally:
            served.stop()


class CookieSource(unittest.TestCase):
    def test_a_token_in_a_cookie(self):
        keys = Keys()
        cookie = gateway_file().replace("    leeway: 5s\n",
                                        "    leeway: 5s\n    from: { cookie: session }\n")
        with h.gateway_with_echo(cookie, POLICY, files={"jwks.json": keys.first_set()}) as gw:
            sub = "cookie-" + os.urandom(4).hex()
            token = jwt.encode(claims(sub=sub), keys.ed, algorithm="EdDSA", headers={"kid": "ed"})
            # Cookies split over two fields, as HTTP/2 clients send them: per_user (burst 3)
            # counts the subject.
            statuses = [get(gw, None, xff=h.new_client_address(),
                            headers=f"Cookie: a=1\r\nCookie: session={token}; b=2\r\n")[0]
                        for _ in range(4)]
            self.assertEqual(statuses, [200, 200, 200, 429])
            # The same cookie twice: which would the upstream read? Refused.
            status, _, body = get(gw, None, xff=h.new_client_address(),
                                  headers=f"Cookie: session={token}; session=x\r\n")
            self.assertEqual((status, json.loads(body)["reason"]), (401, "malformed"))
            # No WWW-Authenticate for a cookie, and an Authorization header is not the source.
            status, headers, body = get(gw, "garbage", xff=h.new_client_address(),
                                        headers="Cookie: session=not.a.token\r\n")
            self.assertEqual(status, 401)
            self.assertNotIn("www-authenticate", headers)
            self.assertEqual(get(gw, "garbage", xff=h.new_client_address())[0], 200)


class JwksUrlOverTls(unittest.TestCase):
    def test_the_key_set_comes_over_https_from_a_server_the_gateway_trusts(self):
        import tempfile
        keys = Keys()
        directory = tempfile.mkdtemp(prefix="tollgate-jwks-tls-")
        cert, key = h.make_certificate(directory)
        # A second server whose certificate (trusted too) names another host only.
        other_cert, other_key = (os.path.join(directory, n) for n in ("other.pem", "other.key"))
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                        "/CN=other.test", "-addext", "subjectAltName=DNS:other.test", "-keyout",
                        other_key, "-out", other_cert], check=True, capture_output=True, timeout=30)
        bundle = os.path.join(directory, "bundle.pem")
        with open(bundle, "w") as out:
            for pem in (cert, other_cert):
                with open(pem) as f:
                    out.write(f.read())
        served = JwksServer(keys.set((keys.p256, "a")), tls=(cert, key))
        misnamed = JwksServer(keys.set((keys.p256, "a")), tls=(other_cert, other_key))
        echo = h.Echo()
        gateways = []
        try:
            def start(server):
                gw = h.Gateway(gateway_file().replace(
                    "    jwks_file: {dir}/jwks.json\n",
                    f"    jwks_url: https://localhost:{server.port}/jwks.json\n    jwks_refresh: 1s\n"),
                    POLICY, echo.port)
                gateways.append(gw)
                return gw
            # OpenSSL's default verify paths honour SSL_CERT_FILE: the test's CA is trusted.
            os.environ["SSL_CERT_FILE"] = bundle
            try:
                good = start(served)
                wrong_name = start(misnamed)  # its certificate does not name localhost
            finally:
                del os.environ["SSL_CERT_FILE"]
            untrusted = start(served)  # started without the test's certificates
            self.assertIn("1 keys from https://localhost", good.process.wait_for_line("keys from"))
            token = jwt.encode(claims(sub="tls-" + os.urandom(4).hex()), keys.p256,
                               algorithm="ES256", headers={"kid": "a"})
            self.assertEqual(get(good, token, xff=h.new_client_address())[0], 200)
            for gw in (wrong_name, untrusted):
                line = gw.process.wait_for_line("the keys in force stay")
                self.assertIn("TLS", line)
                status, _, body = get(gw, token, xff=h.new_client_address())
                self.assertEqual((status, json.loads(body)["reason"]), (401, "unknown_kid"))
        finally:
            for gw in gateways:
                gw.stop()
            echo.stop()
            served.stop()
            misnamed.stop()
            shutil.rmtree(directory, ignore_errors=True)


class AnonymousOnInvalid(unittest.TestCase):
    def test_a_refused_token_is_anonymous(self):
        keys = Keys()
        with h.gateway_with_echo(gateway_file("anonymous"), POLICY,
                                 files={"jwks.json": keys.first_set()}) as gw:
            expired = jwt.encode(claims(sub="dave", exp=int(time.time()) - 600), keys.rsa,
                                 algorithm="RS256", headers={"kid": "rsa"})
            # Refused, so anonymous: per_user does not apply, and nothing is a violation.
            for _ in range(5):
                self.assertEqual(get(gw, expired, xff=h.new_client_address())[0], 200)
            m = gw.metrics()
            self.assertEqual(m.value("tollgate_violations_total", reason="token_invalid"), 0)
            self.assertGreaterEqual(m.value("tollgate_token_checks_total", result="expired"), 5)
            self.assertEqual(m.value("tollgate_requests_total", decision="unauthorized"), 0)


if __name__ == "__main__":
    h.main()
