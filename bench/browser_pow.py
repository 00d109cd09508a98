"""How long a browser takes to pass the proof-of-work page (issue 13): Debian's headless
Chromium against a real tollgate and tollgate-echo on loopback, pay-to-pass categories of 16
and 20 bits, the time from the navigation to the upstream's answer on screen, and the page's
own hash rate on a challenge it cannot finish (40 bits). Also how long the page takes to answer
a script while its worker hashes (it must stay responsive).

Run: bash bench/browser_pow.sh [ROUNDS16] [ROUNDS20]   (after scripts/test.sh or a build)
"""

import asyncio
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "websocket"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "browser"))
os.environ.setdefault("TOLLGATE_BUILD_DIR", os.path.join(HERE, "..", "build"))

import harness as h  # noqa: E402
from cdp import Chromium  # noqa: E402

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
  b16:
    limits: { ipv4_individual: { short: { rate: 1/h, burst: 1 } } }
    pow: { enabled: false, on_limit: true, on_limit_bits: 16 }
  b20:
    limits: { ipv4_individual: { short: { rate: 1/h, burst: 1 } } }
    pow: { enabled: false, on_limit: true, on_limit_bits: 20 }
  b40:
    limits: { ipv4_individual: { short: { rate: 1/h, burst: 1 } } }
    pow: { enabled: false, on_limit: true, on_limit_bits: 40 }
"""

GATEWAY = ("listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
           "admin: { address: 127.0.0.1, port: 0 }\n"
           "workers: 1\n"
           "upstreams:\n"
           '  app: { endpoints: ["{echo}"] }\n'
           "routes:\n"
           "  - { match: { path_prefix: /b16/ }, category: b16, upstream: app }\n"
           "  - { match: { path_prefix: /b20/ }, category: b20, upstream: app }\n"
           "  - { match: { path_prefix: /b40/ }, category: b40, upstream: app }\n"
           "default_route: { category: general, upstream: app }\n"
           'policies: ["{policy}"]\n'
           "pow: { challenge_ttl: 600s }\n")


async def pass_once(browser, base, path):
    """Seconds from navigating to `path` (a 428 page) to the upstream's answer on screen."""
    page = await browser.new_page()
    start = time.monotonic()
    await page.send("Page.navigate", {"url": base + path})
    while True:
        try:
            text = await page.text()
        except RuntimeError:
            text = ""
        if text.startswith("{") and path in text:
            return time.monotonic() - start
        await asyncio.sleep(0.02)


async def main(rounds16, rounds20):
    echo = h.Echo()
    gw = h.Gateway(GATEWAY, POLICY, echo.port)
    base = f"http://127.0.0.1:{gw.port}"
    try:
        for prefix in ("/b16/", "/b20/", "/b40/"):  # spend each category's one free request
            h.http_request(gw.port, f"GET {prefix}warm HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        async with Chromium() as browser:
            await pass_once(browser, base, "/b16/jit-warm-up")
            results = {}
            for bits, rounds in ((16, rounds16), (20, rounds20)):
                times = [await pass_once(browser, base, f"/b{bits}/{i}") for i in range(rounds)]
                results[bits] = times
            page = await browser.new_page()
            await page.send("Page.navigate", {"url": base + "/b40/rate"})
            await asyncio.sleep(1.0)
            lag = []
            for _ in range(20):
                t = time.monotonic()
                await page.evaluate("1")
                lag.append((time.monotonic() - t) * 1000)
                await asyncio.sleep(0.1)
            first = await page.evaluate("document.getElementById('tollgate-status').textContent")
            t0 = time.monotonic()
            await asyncio.sleep(3.0)
            last = await page.evaluate("document.getElementById('tollgate-status').textContent")
            t1 = time.monotonic()
            # WebCrypto's digest() in the same page, batched 512 promises at a time, for 2 s
            # (what the page would manage with WebCrypto alone).
            webcrypto = (await page.send("Runtime.evaluate", {"awaitPromise": True, "returnByValue": True,
                "expression": """(async () => {
                  const enc = new TextEncoder(), p = 'x'.repeat(90) + ':';
                  let n = 0; const t = performance.now();
                  while (performance.now() - t < 2000) {
                    const d = [];
                    for (let i = 0; i < 512; i++) d.push(crypto.subtle.digest('SHA-256', enc.encode(p + (n++).toString(36))));
                    await Promise.all(d);
                  }
                  return n / ((performance.now() - t) / 1000);
                })()"""}))["result"]["value"]
    finally:
        gw.stop()
        echo.stop()

    def tries(status):
        return int("".join(c for c in status.split(" tries")[0] if c.isdigit()))

    rate = (tries(last) - tries(first)) / (t1 - t0)
    print(f"headless Chromium {os.popen('chromium --version').read().strip()}, "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"page hash rate (40-bit challenge, 3 s): {rate / 1e3:.0f}k hashes/s; "
          f"WebCrypto digest() in the same page: {webcrypto / 1e3:.0f}k hashes/s")
    for bits, times in results.items():
        print(f"{bits} bits: {len(times)} passes, median {statistics.median(times):.2f} s, "
              f"mean {statistics.mean(times):.2f} s, max {max(times):.2f} s "
              f"(expected work 2^{bits} = {2 ** bits / rate:.2f} s at that rate)")
    print(f"page answers a script while solving: median {statistics.median(lag):.1f} ms, "
          f"max {max(lag):.1f} ms over {len(lag)} probes")


if __name__ == "__main__":
    r16 = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    r20 = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    asyncio.run(main(r16, r20))
