"""The proof-of-work page in a real browser (docs/design.md §5 "Browsers", issue 13): Debian's headless
Chromium opens a page behind the gateway, gets the 428 page, solves the challenge by itself in
a Web Worker, stores the proof in the `tollgate_pow` cookie, reloads, and ends on the upstream's
answer; the upstream never sees the cookie, a replayed cookie is refused, a browser without
JavaScript gets the explanation. Real tollgate and tollgate-echo processes on loopback.

Run: /usr/bin/python3 tests/browser/test_browser.py BUILD_DIR [unittest args]
Screenshots of the page go to BUILD_DIR/browser/.
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "websocket"))
sys.path.insert(0, HERE)
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402
from cdp import Chromium  # noqa: E402

# /paid/ pays to pass at 12 bits once its one request is spent; /guarded/ asks a proof of a
# client with violations; /hard/ asks 40 bits (never solved here: the page's progress).
POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
  paid:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
    pow: { enabled: false, on_limit: true, on_limit_bits: 12 }
  guarded:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
    pow: { enabled: true, base_bits: 12, step_bits: 0, max_bits: 12 }
  hard:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
    pow: { enabled: false, on_limit: true, on_limit_bits: 40 }
violations:
  rejected: { levels: [individual] }
  pow_failed: { levels: [network] }
"""

GATEWAY = ("listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
           "admin: { address: 127.0.0.1, port: 0 }\n"
           "workers: 2\n"
           "upstreams:\n"
           '  app: { endpoints: ["{echo}"] }\n'
           '  dead: { endpoints: ["127.0.0.1:1"] }\n'
           "routes:\n"
           "  - { match: { path_prefix: /paid/ }, category: paid, upstream: app }\n"
           "  - { match: { path_prefix: /dead/ }, category: paid, upstream: dead }\n"
           "  - { match: { path_prefix: /guarded/ }, category: guarded, upstream: app }\n"
           "  - { match: { path_prefix: /hard/ }, category: hard, upstream: app }\n"
           "default_route: { category: general, upstream: app }\n"
           'policies: ["{policy}"]\n'
           "pow: { page: { title: Tollgate test check, text: Solving a puzzle for the test. } }\n")

SHOTS = os.path.join(h.BUILD_DIR, "browser")


def echo_headers(text):
    """The headers the upstream received, from the echo's JSON answer shown as the page."""
    answer = json.loads(text)
    return {name.lower(): value for name, value in answer["headers"]}


class BrowserPage(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(SHOTS, exist_ok=True)
        cls.echo = h.Echo()
        cls.gw = h.Gateway(GATEWAY, POLICY, cls.echo.port)
        cls.base = f"http://127.0.0.1:{cls.gw.port}"

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.echo.stop()

    async def wait_text(self, page, predicate, timeout=20):
        """The page's text once `predicate` holds for it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                text = await page.text()
            except RuntimeError:  # between two documents: no context to evaluate in
                text = ""
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never got there; it shows: {text[:500]!r}")
            await asyncio.sleep(0.05)

    async def test_pays_to_pass_by_itself_and_the_upstream_never_sees_the_cookie(self):
        before = self.gw.metrics()
        valid = before.value("tollgate_pow_verifications_total", result="valid")
        passed = before.value("tollgate_requests_total", category="paid", decision="pow_passed")
        async with Chromium() as browser:
            page = await browser.new_page()
            # A cookie of the site's own: it must still reach the upstream.
            await page.send("Network.setCookie", {"name": "session", "value": "s1",
                                                  "url": self.base + "/"})
            await page.navigate(self.base + "/paid/first")  # the one request the limit allows
            self.assertEqual(echo_headers(await page.text())["x-real-ip"], "127.0.0.1")
            await page.navigate(self.base + "/paid/second")
            text = await self.wait_text(page, lambda t: t.startswith("{") and "/paid/second" in t)
            headers = echo_headers(text)
            self.assertNotIn("tollgate_pow", headers.get("cookie", ""))
            self.assertEqual(headers.get("cookie"), "session=s1")
            self.assertNotIn("x-pow-solution", headers)

            # What the browser did: a 428 page, then the same URL with the proof in the cookie.
            responses = [(url, status) for url, status, _ in page.responses()]
            self.assertIn((self.base + "/paid/second", 428), responses)
            self.assertEqual(responses[-1], (self.base + "/paid/second", 200))
            sent = [hd for url, hd in page.requests() if url == self.base + "/paid/second"]
            cookie = {k.lower(): v for k, v in sent[-1].items()}.get("cookie", "")
            proof = [c.split("=", 1)[1] for c in cookie.split("; ") if c.startswith("tollgate_pow=")]
            self.assertEqual(len(proof), 1, cookie)
            # The gateway told the browser to drop the spent proof.
            self.assertNotIn("tollgate_pow", await page.evaluate("document.cookie"))

        after = self.gw.metrics()
        self.assertEqual(after.value("tollgate_pow_verifications_total", result="valid"), valid + 1)
        self.assertEqual(after.value("tollgate_requests_total", category="paid",
                                     decision="pow_passed"), passed + 1)
        # The same cookie again: a replay, refused as from the header.
        status, head, body = h.http_request(
            self.gw.port, "GET /paid/third HTTP/1.1\r\nHost: t\r\nAccept: application/json\r\n"
            f"Cookie: tollgate_pow={proof[0]}\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 428, body)
        self.assertEqual(json.loads(body)["reason"], "replayed")
        self.assertIn("tollgate_pow=; Path=/; Max-Age=0", head.get("set-cookie", ""))

    async def test_a_client_with_violations_passes_the_check_by_itself(self):
        # The upstream flags this client once: from now on /guarded/ asks it for a proof.
        status, _, _ = h.http_request(self.gw.port, "GET /x?violation=rejected HTTP/1.1\r\n"
                                      "Host: t\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 200)
        async with Chromium() as browser:
            page = await browser.new_page()
            await page.navigate(self.base + "/guarded/page")
            text = await self.wait_text(page, lambda t: t.startswith("{") and "/guarded/page" in t)
            self.assertNotIn("cookie", echo_headers(text))
            responses = [(url, status) for url, status, _ in page.responses()]
            self.assertEqual(responses[0], (self.base + "/guarded/page", 428))

    async def test_a_cleared_browser_navigates_on_without_solving_again(self):
        # Clearance (docs/design.md §16): the page solves once, the proof earns a clearance
        # cookie, and the next three navigations pass without a 428.
        self.violate()
        async with Chromium() as browser:
            page = await browser.new_page()
            await page.navigate(self.base + "/guarded/solve")
            await self.wait_text(page, lambda t: t.startswith("{") and "/guarded/solve" in t)
            for n in range(3):
                await page.navigate(self.base + f"/guarded/next{n}")
                text = await self.wait_text(
                    page, lambda t, n=n: t.startswith("{") and f"/guarded/next{n}" in t)
                # The upstream sees neither the clearance nor its cookie.
                headers = echo_headers(text)
                self.assertNotIn("x-pow-clearance", headers)
                self.assertNotIn("tollgate_clearance", headers.get("cookie", ""))
            responses = [(url, status) for url, status, _ in page.responses()]
            self.assertEqual(responses.count((self.base + "/guarded/solve", 428)), 1, responses)
            for n in range(3):
                self.assertEqual([st for url, st in responses if url.endswith(f"/guarded/next{n}")],
                                 [200], responses)
            # The clearance is not a script's to read.
            self.assertNotIn("tollgate_clearance", await page.evaluate("document.cookie"))

    def violate(self, source=None):
        """The upstream flags the client (from `source`, a local address) once."""
        status, _, _ = h.http_request(self.gw.port, "GET /x?violation=rejected HTTP/1.1\r\n"
                                      "Host: t\r\nConnection: close\r\n\r\n", sock=self.connect(source))
        self.assertEqual(status, 200)

    def connect(self, source=None):
        """A connection to the gateway from loopback address `source` (127.0.0.1 by default)."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((source or "127.0.0.1", 0))
        s.connect(("127.0.0.1", self.gw.port))
        return s

    def guarded(self, path, fields="", source=None):
        return h.http_request(self.gw.port, f"GET {path} HTTP/1.1\r\nHost: t\r\n{fields}"
                                            "Connection: close\r\n\r\n", sock=self.connect(source))

    def test_raw_an_api_client_sends_its_clearance_back_until_it_violates_again(self):
        self.violate()
        before = self.gw.metrics()
        status, head, _ = self.guarded("/guarded/api")
        self.assertEqual(status, 428)
        nonce = subprocess.run([h.binary("tollgate"), "pow", "solve", head["x-pow-challenge"],
                                head["x-pow-difficulty"]], capture_output=True, text=True,
                               check=True, timeout=60).stdout.strip()
        status, head, _ = self.guarded(
            "/guarded/api", f"X-PoW-Solution: {head['x-pow-challenge']}:{nonce}\r\n")
        self.assertEqual(status, 200)
        clearance = head["x-pow-clearance"]
        self.assertRegex(clearance, r"^[A-Za-z0-9_-]{60}$")
        self.assertNotIn("set-cookie", head)  # the proof came in the header: no cookie
        # Sent back, it passes, again and again; the upstream never sees it.
        for n in range(3):
            status, head, body = self.guarded(f"/guarded/api{n}", f"X-PoW-Clearance: {clearance}\r\n")
            self.assertEqual(status, 200, body)
            self.assertNotIn("x-pow-clearance", echo_headers(body))
        # Counted: one issued, three accepted.
        after = self.gw.metrics()
        for result, n in (("issued", 1), ("accepted", 3)):
            self.assertEqual(after.value("tollgate_pow_clearances_total", result=result) -
                             before.value("tollgate_pow_clearances_total", result=result), n)
        # Without it, the requirement stands.
        self.assertEqual(self.guarded("/guarded/api")[0], 428)
        # Bound to the address: another client's is no good (127.0.0.2 with violations too).
        self.violate("127.0.0.2")
        self.assertEqual(self.guarded("/guarded/api", f"X-PoW-Clearance: {clearance}\r\n",
                                      "127.0.0.2")[0], 428)
        # A violation after it was earned voids it.
        time.sleep(0.01)
        self.violate()
        status, _, body = self.guarded("/guarded/api", f"X-PoW-Clearance: {clearance}\r\n")
        self.assertEqual(status, 428, body)

    async def test_without_javascript_the_page_says_what_to_do(self):
        async with Chromium() as browser:
            page = await browser.new_page()
            await page.send("Emulation.setScriptExecutionDisabled", {"value": True})
            await page.navigate(self.base + "/hard/one")
            await page.navigate(self.base + "/hard/two")
            await asyncio.sleep(1)  # time enough to have reloaded, were anything running
            text = await page.text()
            self.assertIn("This check needs JavaScript", text)
            self.assertIn("X-PoW-Solution", text)
            _, status, headers = page.responses()[-1]
            self.assertEqual(status, 428)
            headers = {k.lower(): v for k, v in headers.items()}
            self.assertTrue(headers["content-type"].startswith("text/html"))
            self.assertIn(headers["x-pow-challenge"], text)
            await page.screenshot(os.path.join(SHOTS, "challenge-no-javascript.png"))

    async def test_the_page_shows_progress_and_stays_responsive(self):
        async with Chromium() as browser:
            page = await browser.new_page()
            await page.navigate(self.base + "/hard/a")
            await page.navigate(self.base + "/hard/b")  # 40 bits: still solving when we look
            text = await self.wait_text(page, lambda t: "per second" in t)
            self.assertIn("Tollgate test check", text)
            # The solver is in a worker: the page answers at once while it works.
            start = time.monotonic()
            self.assertEqual(await page.evaluate("1 + 1"), 2)
            self.assertLess(time.monotonic() - start, 1.0)
            tries = [int(await page.evaluate(
                "document.getElementById('tollgate-status').textContent.match(/([\\d,.\\s]+) tries/)[1]"
                ".replace(/\\D/g, '')")) for _ in range(1)]
            await asyncio.sleep(0.6)
            later = int(await page.evaluate(
                "document.getElementById('tollgate-status').textContent.match(/([\\d,.\\s]+) tries/)[1]"
                ".replace(/\\D/g, '')"))
            self.assertGreater(later, tries[0])
            await page.screenshot(os.path.join(SHOTS, "challenge-desktop.png"))
            phone = await browser.new_page(width=390, height=844, mobile=True)
            await phone.navigate(self.base + "/hard/c")
            await self.wait_text(phone, lambda t: "per second" in t)
            await phone.screenshot(os.path.join(SHOTS, "challenge-phone.png"))

    async def test_the_page_stops_after_three_refused_proofs_and_without_cookies(self):
        h.http_request(self.gw.port, "GET /hard/w HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        async with Chromium() as browser:
            page = await browser.new_page()
            # A proof refused three times in a row (here a malformed one, put back before each
            # load since the gateway clears it): the page says why and stops reloading.
            for _ in range(3):
                await page.send("Network.setCookie", {"name": "tollgate_pow", "value": "AAAA:0",
                                                      "url": self.base + "/"})
                await page.navigate(self.base + "/hard/refused")
            text = await self.wait_text(page, lambda t: "three times" in t)
            self.assertIn("(malformed)", text)
            status = await page.evaluate("document.getElementById('tollgate-status').textContent")
            await asyncio.sleep(0.5)  # no worker started: the text stays
            self.assertEqual(await page.evaluate(
                "document.getElementById('tollgate-status').textContent"), status)
            await page.screenshot(os.path.join(SHOTS, "challenge-refused.png"))
            # A browser that keeps no cookies is told so rather than reloaded for ever.
            other = await browser.new_page()
            await other.send("Emulation.setDocumentCookieDisabled", {"disabled": True})
            await other.navigate(self.base + "/hard/nocookies")
            await self.wait_text(other, lambda t: "This check needs cookies" in t)

    def test_zz_an_operators_template_loads_on_reload_and_a_bad_one_is_refused(self):
        page = lambda: h.http_request(  # noqa: E731
            self.gw.port, "GET /hard/tpl HTTP/1.1\r\nHost: t\r\nAccept: text/html\r\n"
            "Connection: close\r\n\r\n")
        with open(os.path.join(self.gw.dir, "page.html"), "w") as f:
            f.write("<!doctype html><title>{{title}}</title><main data-c=\"{{challenge}}\" "
                    "data-d=\"{{difficulty}}\">{{text}}</main><script>solve()</script>")
        custom = GATEWAY.replace("pow: { page: { title: Tollgate test check,",
                                 "pow: { page: { template: page.html, title: Ours,")
        self.assertIn("in force", self.gw.reload(custom, POLICY))
        # Each worker takes the new configuration as it next turns to its queue.
        h.eventually(lambda: "<title>Ours</title>" in page()[2])
        status, head, body = page()
        self.assertEqual(status, 428)
        self.assertTrue(body.startswith("<!doctype html><title>Ours</title>"), body[:200])
        self.assertIn(f'data-c="{head["x-pow-challenge"]}"', body)
        # Only the template's own script may run: its hash, and nothing else.
        self.assertIn("script-src 'sha256-", head["content-security-policy"])
        with open(os.path.join(self.gw.dir, "page.html"), "w") as f:
            f.write("<main>{{challenge}}</main><script>var d = {{difficulty}};</script>")
        line = self.gw.reload(custom, POLICY)
        self.assertIn("pow.page.template", line)
        self.assertIn("a placeholder inside <script>", line)
        status, _, body = page()
        self.assertTrue(body.startswith("<!doctype html><title>Ours</title>"), body[:200])
        self.gw.reload(GATEWAY, POLICY)

    def solved_cookie(self, path):
        """A fresh proof for /paid/ (its one request spent first), as `challenge:nonce`."""
        h.http_request(self.gw.port, f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        status, head, _ = h.http_request(
            self.gw.port, f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 428)
        challenge = head["x-pow-challenge"]
        nonce = subprocess.run([h.binary("tollgate"), "pow", "solve", challenge,
                                head["x-pow-difficulty"]], capture_output=True, text=True,
                               check=True, timeout=60).stdout.strip()
        return f"{challenge}:{nonce}"

    def test_raw_cookie_lines_the_upstream_gets_as_sent_less_the_proof(self):
        # A stale pair of the same name first (one set for a parent domain by a sibling site,
        # which the gateway's clearing cannot reach): the valid one after it still pays.
        proof = self.solved_cookie("/paid/raw1")
        status, head, body = h.http_request(
            self.gw.port, "GET /paid/raw1 HTTP/1.1\r\nHost: t\r\nAccept: application/json\r\n"
            f"Cookie: a=1;tollgate_pow=AAAA:0; tollgate_pow={proof}; b=\"x;y\"\r\n"
            "Connection: close\r\n\r\n")
        self.assertEqual(status, 200, body)
        # The site's pairs byte for byte, both proofs gone.
        self.assertEqual(json.loads(body)["headers"].count(["Cookie", 'a=1; b="x;y"']), 1, body)
        self.assertIn("tollgate_pow=; Path=/; Max-Age=0", head.get("set-cookie", ""))
        # Cookie named by Connection is hop-by-hop like any other field.
        status, _, body = h.http_request(
            self.gw.port, "GET /x HTTP/1.1\r\nHost: t\r\nConnection: cookie, close\r\n"
            "Cookie: a=1\r\n\r\n")
        self.assertEqual(status, 200)
        self.assertNotIn("cookie", echo_headers(body))

    def test_raw_a_proof_spent_on_a_502_is_cleared_too(self):
        proof = self.solved_cookie("/dead/x")
        status, head, body = h.http_request(
            self.gw.port, "GET /dead/x HTTP/1.1\r\nHost: t\r\nAccept: application/json\r\n"
            f"Cookie: tollgate_pow={proof}\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 502, body)
        self.assertIn("tollgate_pow=; Path=/; Max-Age=0", head.get("set-cookie", ""))

    def test_raw_head_answered_by_the_gateway_has_no_body(self):
        # The 428 page to HEAD: its length, no bytes; the next request on the connection is
        # read as the next request, and its answer as the next answer.
        h.http_request(self.gw.port, "GET /hard/h HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        with socket.create_connection(("127.0.0.1", self.gw.port), timeout=5) as s:
            s.sendall(b"HEAD /hard/h HTTP/1.1\r\nHost: t\r\nAccept: text/html\r\n\r\n"
                      b"GET /after-head HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        first, _, rest = data.partition(b"\r\n\r\n")
        status, head = h.parse_head(first)
        self.assertEqual(status, 428)
        self.assertGreater(int(head["content-length"]), 1000)  # the page's length
        self.assertTrue(rest.startswith(b"HTTP/1.1 200 "), rest[:100])
        self.assertIn(b"/after-head", rest)

    def test_api_clients_still_get_json_and_browsers_get_a_strict_page(self):
        h.http_request(self.gw.port, "GET /hard/warm HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        status, head, body = h.http_request(
            self.gw.port, "GET /hard/api HTTP/1.1\r\nHost: t\r\nAccept: */*\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 428)
        self.assertEqual(head["content-type"], "application/problem+json")
        self.assertEqual(json.loads(body)["code"], "pow_required")
        # 40 bits at the default solver_hash_rate would take days: the challenge lives the
        # longest a challenge may, one day, not the 60 s of an easy one.
        self.assertAlmostEqual(json.loads(body)["expires"] - time.time(), 86400, delta=5)
        status, head, body = h.http_request(
            self.gw.port, "GET /hard/page HTTP/1.1\r\nHost: t\r\n"
            "Accept: text/html,application/xhtml+xml,*/*;q=0.8\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 428)
        self.assertEqual(head["content-type"], "text/html; charset=utf-8")
        self.assertEqual(head["cache-control"], "no-store")
        self.assertTrue(head["content-security-policy"].startswith("default-src 'none'"))
        self.assertIn(f'data-challenge="{head["x-pow-challenge"]}"', body)
        self.assertEqual(head["x-pow-difficulty"], "40")
        self.assertNotIn("set-cookie", head)  # no cookie sent, none to clear


if __name__ == "__main__":
    unittest.main(verbosity=2)
