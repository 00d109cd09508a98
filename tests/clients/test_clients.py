"""The proof-of-work client libraries of clients/ (issue 13, part 6) against a real gateway: a
tollgate and a tollgate-echo on loopback ports, a pay-to-pass category and a category whose
proofs violations require. Each client (clients/python/tollgate_pow.py as a function and as a
command, clients/js/tollgate-pow.mjs run by `node` from PATH with each of its hash engines,
clients/js/solve.mjs) answers a live 428 and the request sent again gets the upstream's 200;
the libraries refuse what no gateway issues.

Run: /usr/bin/python3 tests/clients/test_clients.py BUILD_DIR [unittest args]
"""

import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "websocket"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402
import tollgate_pow  # noqa: E402

JS_MODULE = os.path.abspath(os.path.join(ROOT, "clients", "js", "tollgate-pow.mjs"))
JS_CLI = os.path.abspath(os.path.join(ROOT, "clients", "js", "solve.mjs"))
PY_CLI = os.path.abspath(os.path.join(ROOT, "clients", "python", "tollgate_pow.py"))

PAID_BITS = 10
GUARDED_BITS = 8

# /paid: one request per address, then a 428 of PAID_BITS (pay to pass). /guarded: a proof of
# GUARDED_BITS once the upstream has flagged the address (the echo's ?violation=abuse).
POLICY = f"""
categories:
  paid:
    limits:
      ipv4_individual: {{ short: {{ rate: 1/h, burst: 1 }} }}
    pow: {{ on_limit: true, on_limit_bits: {PAID_BITS} }}
  guarded:
    limits:
      ipv4_individual: {{ short: {{ rate: 1000/s, burst: 1000 }} }}
    pow: {{ enabled: true, base_bits: {GUARDED_BITS}, step_bits: 0, max_bits: {GUARDED_BITS} }}
  general:
    limits:
      ipv4_individual: {{ short: {{ rate: 1000/s, burst: 1000 }} }}
violations:
  abuse:      {{ levels: [individual] }}
  pow_failed: {{ levels: [network] }}
"""

GATEWAY = """listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
trusted_proxies: [127.0.0.1/32]
upstreams:
  app: { endpoints: ["{echo}"] }
routes:
  - { match: { path_prefix: /paid }, category: paid, upstream: app }
  - { match: { path_prefix: /guarded }, category: guarded, upstream: app }
default_route: { category: general, upstream: app }
policies: ["{policy}"]
"""


def leading_zero_bits(data):
    """Leading zero bits of SHA-256(data), counted here independently of the libraries."""
    value = int.from_bytes(hashlib.sha256(data).digest(), "big")
    return 256 - value.bit_length()


def node():
    path = shutil.which("node")
    if path is None:
        raise RuntimeError("node is not on PATH (scripts/deps.sh installs Debian's nodejs)")
    return path


def run_node(script, *args, timeout=20):
    """Runs an ES module's text with `node` (the module under test is importable as
    MODULE); returns (exit status, stdout, stderr)."""
    with tempfile.NamedTemporaryFile("w", suffix=".mjs", delete=False) as f:
        f.write(f"import * as pow from {json.dumps(JS_MODULE)};\n" + script)
        path = f.name
    try:
        p = subprocess.run([node(), path, *args], capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    finally:
        os.unlink(path)


class Clients(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.echo = h.Echo()
        try:
            cls.gw = h.Gateway(GATEWAY, POLICY, cls.echo.port)
        except Exception:
            cls.echo.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.echo.stop()

    # --- helpers -----------------------------------------------------------------------------

    def url(self, path):
        return f"http://127.0.0.1:{self.gw.port}{path}"

    def get(self, path, client, solution=None):
        extra = f"X-PoW-Solution: {solution}\r\n" if solution else ""
        return h.http_request(self.gw.port, f"GET {path} HTTP/1.1\r\nHost: t\r\n"
                              f"X-Forwarded-For: {client}\r\n{extra}Connection: close\r\n\r\n")

    def challenged(self, path="/paid/x"):
        """A fresh client address and the live 428 it got: (client, headers, body as JSON)."""
        client = h.new_client_address()
        if path.startswith("/paid"):
            self.assertEqual(self.get(path, client)[0], 200)  # the one request the limit allows
        else:
            # The upstream flags the address (through a category without proofs: failed proofs
            # of other tests may already require one in /guarded of this network).
            self.assertEqual(self.get("/flag?violation=abuse", client)[0], 200)
        status, headers, body = self.get(path, client)
        self.assertEqual(status, 428, body)
        return client, headers, json.loads(body)

    def assert_passes(self, path, client, solution, bits):
        """`solution` is real work for its challenge and the gateway forwards the request with
        it to the upstream, which never sees the header."""
        challenge, _, nonce = solution.partition(":")
        self.assertRegex(nonce, r"^[A-Za-z0-9_-]{1,64}$")
        self.assertGreaterEqual(leading_zero_bits(f"{challenge}:{nonce}".encode()), bits)
        before = self.echo.stats()["requests"]
        status, _, body = self.get(path, client, solution)
        self.assertEqual(status, 200, body)
        seen = json.loads(body)
        self.assertEqual(seen["target"], path)
        self.assertNotIn("x-pow-solution", [name.lower() for name, _ in seen["headers"]])
        self.assertEqual(self.echo.stats()["requests"], before + 1)

    # --- Python ------------------------------------------------------------------------------

    def test_python_solution_for_urllib_http_error_gets_200(self):
        client = h.new_client_address()
        self.assertEqual(self.get("/paid/py", client)[0], 200)
        request = urllib.request.Request(self.url("/paid/py"), headers={"X-Forwarded-For": client})
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=5)
        error = caught.exception
        self.assertEqual(error.code, 428)
        solution = tollgate_pow.solution_for(error.code, error.headers)
        error.close()
        self.assertTrue(solution.startswith(error.headers["X-PoW-Challenge"] + ":"))
        request.add_header("X-PoW-Solution", solution)
        with urllib.request.urlopen(request, timeout=5) as response:
            self.assertEqual(response.status, 200)
            self.assertEqual(json.loads(response.read())["target"], "/paid/py")

    def test_python_solution_for_http_client_headers_and_a_violation_driven_challenge(self):
        client, _, body = self.challenged("/guarded/y")
        self.assertEqual(body["difficulty"], GUARDED_BITS)
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=5)
        try:
            conn.request("GET", "/guarded/y", headers={"X-Forwarded-For": client})
            response = conn.getresponse()
            response.read()
            self.assertEqual(response.status, 428)
            # Both forms http.client gives: the message and the list of pairs.
            from_message = tollgate_pow.solution_for(response.status, response.headers)
            from_pairs = tollgate_pow.solution_for(response.status, response.getheaders())
        finally:
            conn.close()
        self.assertEqual(from_message, from_pairs)  # the same challenge, the same search
        self.assert_passes("/guarded/y", client, from_message, GUARDED_BITS)

    def test_python_open_with_pow_and_a_plain_dict(self):
        client = h.new_client_address()
        request = urllib.request.Request(self.url("/paid/open"), headers={"X-Forwarded-For": client})
        with tollgate_pow.open_with_pow(request, timeout=5) as first:
            self.assertEqual(first.status, 200)  # no 428 yet: nothing solved
        with tollgate_pow.open_with_pow(request, timeout=5) as second:
            self.assertEqual(second.status, 200)
        # (the second request was over the limit: it got a 428 first, and paid)
        client, headers, _ = self.challenged()
        upper = {k.upper(): v for k, v in headers.items()}  # a dict in another case
        self.assert_passes("/paid/x", client, tollgate_pow.solution_for("428", upper), PAID_BITS)

    def test_python_command_line(self):
        client, headers, _ = self.challenged()
        p = subprocess.run([sys.executable, PY_CLI, headers["x-pow-challenge"],
                            headers["x-pow-difficulty"]], capture_output=True, text=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_passes("/paid/x", client, f"{headers['x-pow-challenge']}:{p.stdout.strip()}",
                           PAID_BITS)
        for args in (["abc", "65"], ["a:b", "4"], ["abc"], ["abc", "x"]):
            p = subprocess.run([sys.executable, PY_CLI, *args], capture_output=True, text=True,
                               timeout=20)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(p.stdout, "", args)

    def test_a_wrong_nonce_gets_a_428_with_a_reason(self):
        client, headers, body = self.challenged()
        challenge = headers["x-pow-challenge"]
        # A nonce with too few zero bits, found here: the gateway must refuse it.
        nonce = next(n for n in map(str, range(1000))
                     if leading_zero_bits(f"{challenge}:{n}".encode()) < PAID_BITS)
        status, again, refused = self.get("/paid/x", client, f"{challenge}:{nonce}")
        self.assertEqual(status, 428, refused)
        self.assertEqual(json.loads(refused)["reason"], "insufficient_work")
        self.assertNotEqual(again["x-pow-challenge"], challenge)  # a fresh challenge to solve
        # The library's answer to the fresh one passes.
        self.assert_passes("/paid/x", client, tollgate_pow.solution_for(428, again), PAID_BITS)

    def test_python_refuses_bad_input(self):
        good = "AdaU_5wemoe8JKrZO9j6AGEA"
        for challenge, bits in ((good, 65), (good, -1), (good, True), (good, 8.0), (good, "8"),
                                ("a:b", 8), ("", 8), ("a b", 8), ("a=", 8), (b"abc", 8),
                                ("a" * 513, 8)):
            with self.assertRaises(ValueError, msg=(challenge, bits)):
                tollgate_pow.solve(challenge, bits)
        headers = {"X-PoW-Challenge": good, "X-PoW-Difficulty": "8", "X-PoW-Algorithm": "sha256"}
        self.assertIsNone(tollgate_pow.solution_for(200, headers))
        self.assertIsNone(tollgate_pow.solution_for(429, headers))
        self.assertIsNone(tollgate_pow.solution_for(428, {"Content-Type": "text/plain"}))
        for bad in ({"X-PoW-Difficulty": "65"}, {"X-PoW-Difficulty": "-1"},
                    {"X-PoW-Difficulty": ""}, {"X-PoW-Algorithm": "scrypt"},
                    {"X-PoW-Challenge": "a:b"}):
            with self.assertRaises(ValueError, msg=bad):
                tollgate_pow.solution_for(428, {**headers, **bad})
        # 0 bits: any nonce; 64 bits would not end here, so only the limits are checked.
        self.assertRegex(tollgate_pow.solve(good, 0), r"^[A-Za-z0-9_-]{1,64}$")

    # --- offline: every solver's nonces checked here, many challenges at every small difficulty --

    def test_every_nonce_has_the_bits_asked_for(self):
        """A solver one bit short passes a live test half the time: 20 challenges at each of
        0-12 bits (and 16 once; WebCrypto up to 10) leave it no chance, for the Python function
        and each engine of the JS module, whose bit checks differ (bytes, hex strings, words)."""
        challenges = [f"ch{i}_{b}-x" for b in range(13) for i in range(20)] + ["ch16"]
        bits = [b for b in range(13) for _ in range(20)] + [16]
        for challenge, b in zip(challenges, bits):
            nonce = tollgate_pow.solve(challenge, b)
            self.assertRegex(nonce, r"^[A-Za-z0-9_-]{1,64}$")
            self.assertGreaterEqual(leading_zero_bits(f"{challenge}:{nonce}".encode()), b, (challenge, nonce))
        code, out, err = run_node("""
const [challenges, bits] = JSON.parse(process.argv[2]);
const out = {};
for (const engine of ["node", "js", "webcrypto", "browser"]) {
  out[engine] = [];
  for (let i = 0; i < challenges.length; ++i) {
    if (engine === "webcrypto" && bits[i] > 10) break;  // 40 times slower: up to 10 bits
    out[engine].push(await pow.solveChallenge(challenges[i], bits[i], { engine }));
  }
}
console.log(JSON.stringify(out));
""", json.dumps([challenges, bits]), timeout=60)
        self.assertEqual(code, 0, err)
        solved = json.loads(out)
        self.assertEqual(sorted(solved), ["browser", "js", "node", "webcrypto"])
        for engine, nonces in solved.items():
            self.assertEqual(len(nonces), len(challenges) if engine != "webcrypto" else 11 * 20, engine)
            for challenge, b, nonce in zip(challenges, bits, nonces):
                self.assertRegex(nonce, r"^[A-Za-z0-9_-]{1,64}$")
                self.assertGreaterEqual(leading_zero_bits(f"{challenge}:{nonce}".encode()), b,
                                        (engine, challenge, nonce))

    def test_js_sha256_matches_node_crypto(self):
        """The module's own SHA-256 (the browsers' engine) against OpenSSL's through node:crypto:
        challenges of every length 1-200 (tails of 0-63 bytes after the full blocks) with nonces
        that keep the last block single or make it two."""
        code, out, err = run_node("""
import { createHash } from "node:crypto";
const words = new Int32Array(2);
let checked = 0;
const wrong = [];
for (let length = 1; length <= 200; ++length) {
  const challenge = "Ab_-9".repeat(40).slice(0, length);
  const hash = pow.prefixHasher(challenge);
  for (const nonce of ["0", "zz", "1a2b3c", "x".repeat(40), "y".repeat(55), "Z".repeat(64)]) {
    hash(nonce, words);
    const digest = createHash("sha256").update(`${challenge}:${nonce}`).digest();
    if (digest.readInt32BE(0) !== words[0] || digest.readInt32BE(4) !== words[1]) wrong.push([length, nonce]);
    ++checked;
  }
}
console.log(JSON.stringify({ checked, wrong }));
""")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out), {"checked": 1200, "wrong": []})

    # --- JavaScript in Node --------------------------------------------------------------------

    def test_js_solution_for_each_engine_gets_200(self):
        for engine in ("node", "js", "webcrypto", "browser"):
            with self.subTest(engine=engine):
                client = h.new_client_address()
                self.assertEqual(self.get("/paid/js", client)[0], 200)
                code, out, err = run_node("""
const [url, client, engine] = process.argv.slice(2);
const response = await fetch(url, { headers: { "X-Forwarded-For": client } });
let progress = 0;
const solution = await pow.solutionFor(response, { engine, onProgress: () => ++progress });
console.log(JSON.stringify({ status: response.status, solution, progress }));
""", self.url("/paid/js"), client, engine)
                self.assertEqual(code, 0, err)
                result = json.loads(out)
                self.assertEqual(result["status"], 428)
                self.assertGreaterEqual(result["progress"], 1)
                self.assert_passes("/paid/js", client, result["solution"], PAID_BITS)

    def test_js_fetch_with_pow_retries_once_with_the_header(self):
        client = h.new_client_address()
        self.assertEqual(self.get("/paid/fetch", client)[0], 200)
        valid = h.Metrics(self.gw.metrics_text()).value("tollgate_pow_verifications_total",
                                                        result="valid")
        code, out, err = run_node("""
const [url, client] = process.argv.slice(2);
const response = await pow.fetchWithPow(url, { headers: { "X-Forwarded-For": client } });
console.log(JSON.stringify({ status: response.status, body: await response.json() }));
""", self.url("/paid/fetch"), client)
        self.assertEqual(code, 0, err)
        result = json.loads(out)
        self.assertEqual(result["status"], 200, result)
        self.assertEqual(result["body"]["target"], "/paid/fetch")
        self.assertNotIn("x-pow-solution", [n.lower() for n, _ in result["body"]["headers"]])
        # The 200 was paid for with a proof (the limit allows one request per address).
        self.assertTrue(h.eventually(lambda: h.Metrics(self.gw.metrics_text()).value(
            "tollgate_pow_verifications_total", result="valid") == valid + 1), "no valid proof counted")

    def valid_proofs(self):
        return h.Metrics(self.gw.metrics_text()).value("tollgate_pow_verifications_total",
                                                       result="valid")

    def test_js_fetch_with_pow_keeps_the_clearance_and_solves_once(self):
        client, _, _ = self.challenged("/guarded/clear-js")
        valid = self.valid_proofs()
        code, out, err = run_node("""
const [url, client] = process.argv.slice(2);
const statuses = [];
for (let i = 0; i < 3; ++i) {
  const response = await pow.fetchWithPow(url + i, { headers: { "X-Forwarded-For": client } });
  statuses.push(response.status);
}
console.log(JSON.stringify(statuses));
""", self.url("/guarded/clear-js"), client)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out), [200, 200, 200])
        # One proof for three requests: the clearance it earned carried the other two.
        self.assertEqual(self.valid_proofs(), valid + 1)

    def test_python_open_with_pow_keeps_the_clearance_and_solves_once(self):
        client, _, _ = self.challenged("/guarded/clear-py")
        valid = self.valid_proofs()
        for i in range(3):
            request = urllib.request.Request(self.url(f"/guarded/clear-py{i}"),
                                             headers={"X-Forwarded-For": client})
            with tollgate_pow.open_with_pow(request, timeout=5) as response:
                self.assertEqual(response.status, 200)
        self.assertEqual(self.valid_proofs(), valid + 1)

    def test_js_reads_the_body_when_the_headers_are_not_exposed_and_a_wrong_nonce_is_refused(self):
        client = h.new_client_address()
        self.assertEqual(self.get("/paid/cors", client)[0], 200)
        code, out, err = run_node("""
const [url, client] = process.argv.slice(2);
const headers = { "X-Forwarded-For": client };
const live = await fetch(url, { headers });
// What a cross-origin script sees without Access-Control-Expose-Headers: status and body.
const bare = new Response(await live.text(), { status: 428 });
const solution = await pow.solutionFor(bare);
const [challenge] = solution.split(":");
const wrong = await fetch(url, { headers: { ...headers, "X-PoW-Solution": `${challenge}:!!` } });
console.log(JSON.stringify({ solution, wrong: wrong.status, reason: (await wrong.json()).reason }));
""", self.url("/paid/cors"), client)
        self.assertEqual(code, 0, err)
        result = json.loads(out)
        self.assertEqual((result["wrong"], result["reason"]), (428, "malformed"))
        # The wrong answer did not spend the challenge: the real one still passes.
        self.assert_passes("/paid/cors", client, result["solution"], PAID_BITS)

    def test_js_command_line(self):
        client, headers, _ = self.challenged()
        p = subprocess.run([node(), JS_CLI, headers["x-pow-challenge"], headers["x-pow-difficulty"]],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_passes("/paid/x", client, f"{headers['x-pow-challenge']}:{p.stdout.strip()}",
                           PAID_BITS)
        for args in (["abc", "65"], ["a:b", "4"], ["abc"], ["abc", "x"]):
            p = subprocess.run([node(), JS_CLI, *args], capture_output=True, text=True, timeout=20)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(p.stdout, "", args)

    def test_js_refuses_bad_input_and_stops_when_aborted(self):
        code, out, err = run_node("""
const good = "AdaU_5wemoe8JKrZO9j6AGEA";
const refusals = [];
for (const [challenge, bits] of [[good, 65], [good, -1], [good, 1.5], [good, "8"], ["a:b", 8],
                                 ["", 8], ["a b", 8], ["a=", 8], [42, 8], ["a".repeat(513), 8]]) {
  try { await pow.solveChallenge(challenge, bits); refusals.push(null); }
  catch (e) { refusals.push(e.name); }
}
const ok = new Response("{}", { status: 200, headers: { "X-PoW-Challenge": good, "X-PoW-Difficulty": "8" } });
const other = new Response("{}", { status: 428, headers: { "X-PoW-Challenge": good, "X-PoW-Difficulty": "8", "X-PoW-Algorithm": "scrypt" } });
const deep = new Response("{}", { status: 428, headers: { "X-PoW-Challenge": good, "X-PoW-Difficulty": "65" } });
const bad = async (r) => { try { await pow.solutionFor(r); return null; } catch (e) { return e.name; } };
const aborted = [];
for (const engine of ["node", "js", "webcrypto"]) {
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 100);
  const started = Date.now();
  try { await pow.solveChallenge(good, 60, { engine, signal: controller.signal }); aborted.push(null); }
  catch (e) { aborted.push([e.name, Date.now() - started]); }
}
console.log(JSON.stringify({ refusals, ok: await pow.solutionFor(ok), other: await bad(other),
                             deep: await bad(deep), aborted }));
""")
        self.assertEqual(code, 0, err)
        result = json.loads(out)
        self.assertEqual(result["refusals"], ["RangeError"] * 4 + ["TypeError"] * 6)
        self.assertIsNone(result["ok"])
        self.assertEqual(result["other"], "Error")
        self.assertEqual(result["deep"], "RangeError")
        for name, ms in result["aborted"]:
            self.assertEqual(name, "AbortError")
            self.assertLess(ms, 2000)


if __name__ == "__main__":
    h.main()
