"""Scripts on other origins calling an API behind the gateway (issue 13, part 4): with `cors` on
a category the gateway answers preflights itself (never charged, never challenged), and its own
428, 429 and 403 carry CORS fields with Access-Control-Expose-Headers, so that a script reads
the challenge and the rate-limit fields and answers with X-PoW-Solution. Raw HTTP for the
fields, and Debian's headless Chromium running clients/js/tollgate-pow.mjs on another origin
for the real thing. Real tollgate and tollgate-echo processes on loopback.

Run: /usr/bin/python3 tests/browser/test_cors.py BUILD_DIR [unittest args]
"""

import asyncio
import base64
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "websocket"))
sys.path.insert(0, HERE)
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402
from cdp import Chromium  # noqa: E402

MODULE = os.path.join(HERE, "..", "..", "clients", "js", "tollgate-pow.mjs")

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
  api:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 2 } }
    pow: { enabled: false, on_limit: true, on_limit_bits: 8 }
    cors: { allow_origins: ["{origin}", "https://app.example"], max_age: 5m, expose_headers: [ETag] }
  open:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
    cors: { allow_origins: ["*"], allow_methods: [GET, POST], allow_headers: [Content-Type] }
  login:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
    cors: { allow_origins: ["https://login.example"], allow_credentials: true }
  closed:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
    pow: { enabled: false, on_limit: true, on_limit_bits: 8 }
"""

GATEWAY = ("listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
           "admin: { address: 127.0.0.1, port: 0 }\n"
           "workers: 2\n"
           "trusted_proxies: [127.0.0.1/32]\n"
           "upstreams:\n"
           '  app: { endpoints: ["{echo}"] }\n'
           "routes:\n"
           "  - { match: { path_prefix: /api/ }, category: api, upstream: app }\n"
           "  - { match: { path_prefix: /open/ }, category: open, upstream: app }\n"
           "  - { match: { path_prefix: /closed/ }, category: closed, upstream: app }\n"
           "  - { match: { method: POST, path: /login }, category: login, upstream: app }\n"
           "default_route: { category: general, upstream: app }\n"
           'policies: ["{policy}"]\n'
           "access: { deny: [192.0.2.0/24] }\n")


def request(gw, method, path, client, origin=None, extra=""):
    """(status, headers, body) of one request as `client` (X-Forwarded-For)."""
    o = f"Origin: {origin}\r\n" if origin else ""
    return h.http_request(gw.port, f"{method} {path} HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: "
                          f"{client}\r\n{o}{extra}Connection: close\r\n\r\n")


def exposed(headers):
    return [v.strip().lower() for v in headers.get("access-control-expose-headers", "").split(",")]


class Cors(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.echo = h.Echo()
        cls.origin = f"http://127.0.0.1:{cls.echo.port}"
        cls.gw = h.Gateway(GATEWAY, POLICY.replace("{origin}", cls.origin), cls.echo.port)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.echo.stop()

    def test_a_preflight_is_answered_by_the_gateway_and_charged_nothing(self):
        before = self.echo.stats()["requests"]
        for _ in range(5):  # more than the burst of 2
            status, head, body = request(
                self.gw, "OPTIONS", "/api/items", "10.9.0.1", self.origin,
                "Access-Control-Request-Method: PUT\r\n"
                "Access-Control-Request-Headers: content-type, x-pow-solution\r\n")
            self.assertEqual(status, 200, body)
            self.assertEqual(body, "")
            self.assertNotIn("content-type", head)
            self.assertEqual(head["access-control-allow-origin"], self.origin)
            self.assertIn("PUT", head["access-control-allow-methods"])
            self.assertEqual(head["access-control-allow-headers"],
                             "content-type, x-pow-solution, X-PoW-Solution, X-PoW-Clearance")
            self.assertEqual(head["access-control-max-age"], "300")
            self.assertEqual(head["vary"], "Origin")
            self.assertNotIn("x-ratelimit-remaining", head)
        self.assertEqual(self.echo.stats()["requests"], before)  # none reached the upstream
        # The limits saw none of them: the first real request has its whole burst.
        status, head, _ = request(self.gw, "PUT", "/api/items", "10.9.0.1", self.origin)
        self.assertEqual(status, 200)
        self.assertEqual(head["x-ratelimit-remaining"], "1")
        self.assertEqual(head["access-control-allow-origin"], self.origin)

        # Configured headers are answered as configured; a name list that is not one is not
        # echoed.
        status, head, _ = request(self.gw, "OPTIONS", "/open/x", "10.9.0.1", "https://any.example",
                                  "Access-Control-Request-Method: POST\r\n"
                                  "Access-Control-Request-Headers: x-a\r\n")
        self.assertEqual(head["access-control-allow-headers"], "Content-Type, X-PoW-Solution, X-PoW-Clearance")
        self.assertEqual(head["access-control-allow-methods"], "GET, POST")
        status, head, _ = request(self.gw, "OPTIONS", "/api/x", "10.9.0.1", self.origin,
                                  "Access-Control-Request-Method: GET\r\n"
                                  "Access-Control-Request-Headers: a\"b, c;d\r\n")
        self.assertEqual(head["access-control-allow-headers"], "X-PoW-Solution, X-PoW-Clearance")

    def test_the_gateways_refusals_are_readable_by_an_allowed_origin(self):
        client = "10.9.0.2"
        for _ in range(2):
            status, head, body = request(self.gw, "GET", "/api/a", client, self.origin)
            self.assertEqual(status, 200)
            self.assertEqual(head["access-control-allow-origin"], self.origin)
            self.assertIn("x-ratelimit-remaining", exposed(head))
            self.assertIn("etag", exposed(head))  # the operator's, after the gateway's
        status, head, body = request(self.gw, "GET", "/api/a", client, self.origin)
        self.assertEqual(status, 428)
        self.assertEqual(head["access-control-allow-origin"], self.origin)
        self.assertIn("x-pow-challenge", exposed(head))
        self.assertIn("x-pow-difficulty", exposed(head))
        self.assertNotIn("access-control-allow-credentials", head)
        # "*": any origin, named back; 429's Retry-After readable.
        request(self.gw, "GET", "/open/b", client, "https://else.example")
        status, head, _ = request(self.gw, "GET", "/open/b", client, "https://else.example")
        self.assertEqual(status, 429)
        self.assertEqual(head["access-control-allow-origin"], "https://else.example")
        self.assertIn("retry-after", exposed(head))
        # The deny list's 403 too.
        status, head, _ = request(self.gw, "GET", "/api/c", "192.0.2.9", self.origin)
        self.assertEqual(status, 403)
        self.assertEqual(head["access-control-allow-origin"], self.origin)

    def test_a_preflight_is_routed_by_the_method_it_asks_for(self):
        # POST /login is the login category's; a preflight for it is an OPTIONS, which no
        # route names: routed by its own method it would meet the default route's category.
        before = self.echo.stats()["requests"]
        preflight = "Access-Control-Request-Method: POST\r\n"
        status, head, body = request(self.gw, "OPTIONS", "/login", "10.9.0.5",
                                     "https://login.example", preflight)
        self.assertEqual(status, 200, body)
        self.assertEqual(head["access-control-allow-origin"], "https://login.example")
        self.assertEqual(head["access-control-allow-credentials"], "true")
        self.assertEqual(self.echo.stats()["requests"], before)
        # Another category's origin is not the login's.
        status, head, _ = request(self.gw, "OPTIONS", "/login", "10.9.0.5", self.origin, preflight)
        self.assertNotIn("access-control-allow-origin", head)
        # A GET to /login is the default route's (no cors): the upstream answers its preflight.
        status, head, body = request(self.gw, "OPTIONS", "/login", "10.9.0.5",
                                     "https://login.example",
                                     "Access-Control-Request-Method: GET\r\n")
        self.assertEqual(json.loads(body)["method"], "OPTIONS")

    def admin(self, method, path):
        status, _, body = h.http_request(self.gw.admin_port, f"{method} {path} HTTP/1.1\r\n"
                                         "Host: admin\r\nContent-Length: 0\r\n"
                                         "Connection: close\r\n\r\n")
        return status, body

    def test_a_banned_address_gets_403_to_its_preflight_too(self):
        preflight = "Access-Control-Request-Method: PUT\r\n"
        self.assertEqual(self.admin("PUT", "/admin/bans/10.9.0.7?duration=1h")[0], 201)
        self.assertEqual(self.admin("PUT", "/admin/bans/10.9.0.9?duration=1h")[0], 201)
        for client in ("10.9.0.7", "10.9.0.9"):
            status, head, _ = request(self.gw, "OPTIONS", "/api/items", client, self.origin, preflight)
            self.assertEqual(status, 403, client)
            self.assertEqual(head["access-control-allow-origin"], self.origin)
        # Lifted, the ban ends at once: the one that sorts last too.
        self.assertEqual(self.admin("DELETE", "/admin/bans/10.9.0.9")[0], 200)
        status, _, _ = request(self.gw, "OPTIONS", "/api/items", "10.9.0.9", self.origin, preflight)
        self.assertEqual(status, 200)
        status, _, _ = request(self.gw, "OPTIONS", "/api/items", "10.9.0.7", self.origin, preflight)
        self.assertEqual(status, 403)
        self.assertEqual(self.admin("DELETE", "/admin/bans/10.9.0.7")[0], 200)

    def test_other_origins_get_nothing_to_read(self):
        client = "10.9.0.3"
        for _ in range(3):
            status, head, _ = request(self.gw, "GET", "/api/d", client, "https://evil.example")
        self.assertEqual(status, 428)
        self.assertNotIn("access-control-allow-origin", head)
        self.assertEqual(head["vary"], "Origin")
        status, head, _ = request(self.gw, "OPTIONS", "/api/d", client, "https://evil.example",
                                  "Access-Control-Request-Method: GET\r\n")
        self.assertEqual(status, 200)
        self.assertNotIn("access-control-allow-origin", head)
        self.assertNotIn("access-control-allow-methods", head)
        # Without Origin nothing changes but Vary; a category without cors forwards OPTIONS.
        status, head, _ = request(self.gw, "GET", "/general", client)
        self.assertNotIn("access-control-allow-origin", head)
        status, head, body = request(self.gw, "OPTIONS", "/elsewhere", client, self.origin,
                                     "Access-Control-Request-Method: GET\r\n")
        self.assertEqual(json.loads(body)["method"], "OPTIONS")  # the upstream answered

    async def test_a_script_on_another_origin_pays_with_the_client_module(self):
        with open(MODULE, "rb") as f:
            module = "data:text/javascript;base64," + base64.b64encode(f.read()).decode()
        gateway = f"http://127.0.0.1:{self.gw.port}"
        async with Chromium() as browser:
            page = await browser.new_page()
            await page.navigate(self.origin + "/a-page-of-the-app")  # the script's origin
            result = await page.send("Runtime.evaluate", {"awaitPromise": True, "returnByValue": True,
                "expression": f"""(async () => {{
                  const pow = await import({json.dumps(module)});
                  const out = [];
                  for (let i = 0; i < 4; i++) {{
                    const r = await pow.fetchWithPow({json.dumps(gateway)} + '/api/from-script',
                                                     {{ method: 'POST', body: 'x' }});
                    out.push([r.status, r.headers.get('X-RateLimit-Remaining'),
                              (await r.json()).method]);
                  }}
                  let closed;
                  try {{ await fetch({json.dumps(gateway)} + '/closed/x'); closed = 'read'; }}
                  catch (e) {{ closed = e.name; }}
                  return {{ out, closed }};
                }})()"""})
            value = result["result"].get("value")
            self.assertIsNotNone(value, result)
            # Two within the burst, then two paid for with a proof each (preflighted, since
            # X-PoW-Solution is not a simple header), every answer readable.
            self.assertEqual([s for s, _, _ in value["out"]], [200, 200, 200, 200])
            self.assertEqual([m for _, _, m in value["out"]], ["POST"] * 4)
            self.assertEqual(value["out"][0][1], "1")
            self.assertEqual(value["closed"], "TypeError")  # no cors: the browser hides it
            methods = [(url.split(str(self.gw.port))[1], e["request"]["method"])
                       for url, e in [(e["request"]["url"], e) for e in
                                      browser.events("Network.requestWillBeSent", page.session)]
                       if str(self.gw.port) in url]
            self.assertIn(("/api/from-script", "OPTIONS"), methods)


if __name__ == "__main__":
    unittest.main(verbosity=2)
