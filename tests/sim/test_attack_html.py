"""`tollgate simulate --html` and attack mode through the real binary (docs/simulator.md,
docs/design.md §16): a generated access log of steady traffic and a burst from many addresses,
replayed through a policy with attack_mode; the JSON report's time series and changes of
level; the HTML page loaded in headless Chromium, which must draw it and fetch nothing.

Run: /usr/bin/python3 tests/sim/test_attack_html.py BUILD_DIR [unittest args]
"""

import asyncio
import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib
from datetime import datetime, timedelta, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "websocket"))
sys.path.insert(0, os.path.join(HERE, "..", "browser"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402
from cdp import Chromium  # noqa: E402

GATEWAY = """
listeners: [{ name: public, address: 127.0.0.1, port: 8080 }]
upstreams: { app: { endpoints: ["127.0.0.1:9000"] } }
routes:
  - { match: { path_prefix: /static/ }, category: static_files, upstream: app }
default_route: { category: general, upstream: app }
policies: [policy.yaml]
"""

# Limits far above the traffic: every refusal is attack mode's.
POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
    attack_mode:
      baseline: { window: 60s, floor: 10/s }
      sustain: 3s
      levels:
        elevated: { above: 3x }
        severe:   { above: 10x, admit: [allowed] }
      cool_down: 8s
  static_files:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
"""

T0 = datetime(2026, 11, 23, 9, 24, 23, tzinfo=timezone.utc)


def line(at, client, target="/x", category="general"):
    """A Tollgate text access line of a request decided `at` seconds after T0."""
    t = (T0 + timedelta(seconds=at + 0.001)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return (f'{t} access {client} "GET {target} HTTP/1.1" 200 category={category} '
            f"decision=allowed limit=- upstream=app upstream_time=0.001 bytes=1 0.001000s\n")


def attack_log():
    """10/s from ten addresses for 200 s, 2/s of static files, and 200/s more from 4000
    addresses from 120 s to 140 s."""
    out = []
    for s in range(200):
        for i in range(10):
            out.append(line(s + 0.05 + i * 0.1, f"10.0.0.{i + 1}"))
        for i in range(2):
            out.append(line(s + 0.3 + i * 0.5, "10.0.0.1", "/static/a.css", "static_files"))
        if 120 <= s < 140:
            for j in range(200):
                n = (s - 120) * 200 + j
                out.append(line(s + 0.0025 + j * 0.005, f"10.1.{n // 250}.{n % 250 + 1}"))
    return "".join(out)


def png_pixels(data):
    """(width, height, rows of RGB(A) bytes) of an 8-bit truecolour PNG, unfiltered."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line_ = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line_[x - channels] if x >= channels else 0
            b, c = prev[x], prev[x - channels] if x >= channels else 0
            if kind == 1:
                line_[x] = (line_[x] + a) & 255
            elif kind == 2:
                line_[x] = (line_[x] + b) & 255
            elif kind == 3:
                line_[x] = (line_[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line_[x] = (line_[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line_))
        prev = line_
    return width, height, channels, rows


class AttackReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tollgate-attack-html-")
        for name, text in (("gateway.yaml", GATEWAY), ("policy.yaml", POLICY),
                           ("access.log", attack_log())):
            with open(os.path.join(cls.dir, name), "w") as f:
                f.write(text)
        cls.config = os.path.join(cls.dir, "gateway.yaml")
        cls.log = os.path.join(cls.dir, "access.log")
        cls.html = os.path.join(cls.dir, "report.html")
        p = subprocess.run([h.binary("tollgate"), "simulate", "--config", cls.config, "--log",
                            cls.log, "--json", "--html", cls.html],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        cls.report = json.loads(p.stdout)
        with open(cls.html, encoding="utf-8") as f:
            cls.page = f.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_json_has_the_changes_of_level_and_the_series(self):
        run = self.report["configurations"][0]
        changes = [(c["time"], c["category"], c["from"], c["to"]) for c in run["attack_changes"]]
        self.assertEqual(changes, [
            ("2026-11-23T09:26:27.000000Z", "general", "normal", "severe"),
            ("2026-11-23T09:26:52.000000Z", "general", "severe", "elevated"),
            ("2026-11-23T09:27:00.000000Z", "general", "elevated", "normal")])
        self.assertIn("21x the baseline 10/s", run["attack_changes"][0]["why"])
        g = run["categories"]["general"]
        self.assertEqual(g["attack_mode"], {"elevated": 3, "severe": 10})
        self.assertEqual(g["under_attack"], 16 * 210 + 9 * 10)
        s = g["series"]
        self.assertEqual(s["start"], "2026-11-23T09:24:23.000000Z")
        self.assertEqual(s["bucket_seconds"], 1)
        self.assertEqual(len(s["requests"]), 200)
        self.assertEqual(sum(s["requests"]), g["requests"])
        self.assertEqual(sum(s["under_attack"]), g["under_attack"])
        self.assertEqual(s["requests"][130], 210)
        self.assertEqual(s["under_attack"][130], 210)
        self.assertEqual(s["admitted"][100], 10)
        self.assertEqual(s["level"][123:125] + s["level"][148:150] + s["level"][156:158],
                         [0, 3, 3, 1, 1, 0])
        self.assertEqual(s["baseline"][100], 10)
        # A category without attack mode has its series, without levels.
        f = run["categories"]["static_files"]
        self.assertIsNone(f["attack_mode"])
        self.assertEqual(f["series"]["requests"][0], 2)
        self.assertNotIn("level", f["series"])

    def test_text_report_lists_the_changes(self):
        p = subprocess.run([h.binary("tollgate"), "simulate", "--config", self.config, "--log",
                            self.log], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("attack mode, category general: 3 changes of level", p.stdout)
        self.assertIn("2026-11-23T09:26:52.000000Z severe -> elevated: rate 10/s", p.stdout)

    def test_page_is_self_contained(self):
        for outside in ("http://", "https://", "src=", "<script", "url(", "@import", "href="):
            self.assertNotIn(outside, self.page.lower())
        self.assertIn("Content-Security-Policy", self.page)
        self.assertIn("default-src 'none'", self.page)
        for category in ("general", "static_files"):
            self.assertIn(f'id="category-{category}"', self.page)
        self.assertGreaterEqual(self.page.count("<svg"), 5)
        self.assertIn("normal &rarr; severe", self.page)
        self.assertIn("severe &rarr; elevated", self.page)
        self.assertIn("21x the baseline 10/s", self.page)
        self.assertIn("requests per second", self.page)
        self.assertIn("time (UTC)", self.page)

    def test_page_escapes_what_it_is_given(self):
        # A configuration file name is the operator's: it reaches the page escaped.
        odd = os.path.join(self.dir, "<b>&'odd\".yaml")
        shutil.copy(self.config, odd)
        out = os.path.join(self.dir, "odd.html")
        p = subprocess.run([h.binary("tollgate"), "simulate", "--config", odd, "--log", self.log,
                            "--html", out], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out, encoding="utf-8") as f:
            page = f.read()
        self.assertNotIn("<b>", page)
        self.assertIn("&lt;b&gt;&amp;&#39;odd&quot;.yaml", page)

    def test_chromium_draws_the_page_and_fetches_nothing(self):
        asyncio.run(self.draw())

    async def draw(self):
        async with Chromium() as browser:
            page = await browser.new_page(width=1100, height=1400)
            url = "file://" + self.html
            await page.navigate(url)
            title = await page.evaluate("document.title")
            self.assertIn("tollgate simulate", title)
            svgs = await page.evaluate("document.querySelectorAll('svg').length")
            self.assertGreaterEqual(svgs, 5)
            shot = (await page.send("Page.captureScreenshot", {"format": "png"}))["data"]
            # Only the page itself was asked for.
            urls = [u for u, _ in page.requests()]
            self.assertEqual(urls, [url])
        png = base64.b64decode(shot)
        with open(os.path.join(self.dir, "shot.png"), "wb") as f:
            f.write(png)
        width, height, channels, rows = png_pixels(png)
        self.assertEqual((width, height), (1100, 1400))
        colours, inked = set(), 0
        for row in rows[::4]:
            for x in range(0, width * channels, channels * 4):
                rgb = row[x:x + 3]
                colours.add(rgb)
                inked += rgb != b"\xff\xff\xff"
        # Charts: thousands of inked pixels and the legend's many colours.
        self.assertGreater(inked, 2000)
        self.assertGreater(len(colours), 12)


if __name__ == "__main__":
    unittest.main()
