"""The proof-of-work page over HTTP/2 (docs/design.md §17, issue 25): Debian's headless Chromium
reaches a TLS listener with http2, takes h2 by ALPN, gets the 428 page on a stream, solves the
challenge in its Web Worker, sends the proof in the `tollgate_pow` cookie and ends on the
upstream's answer, every response on h2. Real tollgate and tollgate-echo processes on loopback.

Run: /usr/bin/python3 tests/browser/test_browser_h2.py BUILD_DIR [unittest args]
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "websocket"))
sys.path.insert(0, HERE)
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402
from cdp import Chromium  # noqa: E402
import test_browser  # noqa: E402
from test_browser import POLICY, echo_headers  # noqa: E402


def gateway(directory):
    return ("listeners:\n"
            "  - { name: public, address: 127.0.0.1, port: 0, http2: true,\n"
            f"      tls: {{ certificate: '{directory}/cert.pem', private_key: '{directory}/key.pem' }} }}\n"
            "admin: { address: 127.0.0.1, port: 0 }\n"
            "workers: 2\n"
            "upstreams:\n"
            '  app: { endpoints: ["{echo}"] }\n'
            "routes:\n"
            "  - { match: { path_prefix: /paid/ }, category: paid, upstream: app }\n"
            "default_route: { category: general, upstream: app }\n"
            'policies: ["{policy}"]\n')


class BrowserPageOverH2(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.echo = h.Echo()
        cls.scratch = tempfile.mkdtemp(prefix="tollgate-browser-h2-")
        h.make_certificate(cls.scratch)
        cls.gw = h.Gateway(gateway(cls.scratch), POLICY, cls.echo.port)
        cls.base = f"https://127.0.0.1:{cls.gw.port}"

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.echo.stop()
        shutil.rmtree(cls.scratch, ignore_errors=True)

    wait_text = test_browser.BrowserPage.wait_text

    async def test_pays_to_pass_over_h2(self):
        before = self.gw.metrics().value("tollgate_http2_streams_total", listener="public")
        async with Chromium(["--ignore-certificate-errors"]) as browser:
            page = await browser.new_page()
            await page.navigate(self.base + "/paid/first")  # the one request the limit allows
            self.assertEqual(echo_headers(await page.text())["x-forwarded-proto"], "https")
            await page.navigate(self.base + "/paid/second")
            text = await self.wait_text(page, lambda t: t.startswith("{") and "/paid/second" in t)
            self.assertNotIn("tollgate_pow", echo_headers(text).get("cookie", ""))
            received = [e["response"] for e in browser.events("Network.responseReceived",
                                                               page.session)
                        if "/paid/" in e["response"]["url"]]
            statuses = [(r["url"], r["status"]) for r in received]
            self.assertIn((self.base + "/paid/second", 428), statuses)
            self.assertEqual(statuses[-1], (self.base + "/paid/second", 200))
            # Every one of them came on HTTP/2.
            self.assertEqual({r.get("protocol") for r in received}, {"h2"}, received)
        after = self.gw.metrics()
        self.assertGreaterEqual(
            after.value("tollgate_http2_streams_total", listener="public") - before, 3)
        self.assertEqual(after.value("tollgate_requests_total", category="paid",
                                     decision="pow_passed"), 1)
        self.assertGreaterEqual(after.value("tollgate_pow_verifications_total", result="valid"), 1)


if __name__ == "__main__":
    unittest.main()
