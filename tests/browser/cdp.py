"""A headless Chromium (Debian's `chromium`) driven over the Chrome DevTools Protocol, with
Debian's python3-websockets as the protocol's transport: no driver from npm, no download.

    async with Chromium() as browser:
        page = await browser.new_page()
        await page.navigate("http://127.0.0.1:8080/")
        text = await page.evaluate("document.body.innerText")
"""

import asyncio
import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time

import websockets

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# As root, with no network but loopback: no sandbox (root cannot have one without user
# namespaces), and none of the background fetches a closed network refuses.
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio",
         "--remote-debugging-port=0", "--remote-allow-origins=*"]


class Chromium:
    """A Chromium process with a fresh profile, and the browser's DevTools connection."""

    def __init__(self, flags=()):
        """`flags`: further command-line flags (a test's own)."""
        self.flags = list(flags)
        self.profile = tempfile.mkdtemp(prefix="tollgate-chromium-")
        self.process = None
        self.ws = None
        self._ids = itertools.count(1)
        self._pending = {}
        self._events = []
        self._changed = asyncio.Event()
        self._reader = None

    async def __aenter__(self):
        self.process = subprocess.Popen([CHROMIUM, *FLAGS, *self.flags,
                                         f"--user-data-dir={self.profile}",
                                         "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        stdin=subprocess.DEVNULL)
        # Chromium writes the port it took and the browser target's path to this file.
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + 30
        while True:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    lines = f.read().split("\n")
                if len(lines) >= 2 and lines[1]:
                    break
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError("chromium did not open its DevTools port in 30 s")
            await asyncio.sleep(0.05)
        url = f"ws://127.0.0.1:{int(lines[0])}{lines[1]}"
        self.ws = await websockets.connect(url, max_size=None, ping_interval=None)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc):
        if self._reader:
            self._reader.cancel()
        if self.ws:
            await self.ws.close()
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # A terminated Chromium leaves its singleton socket's folder in /tmp (named by a link
        # in the profile): removed with the profile, so that test runs leave nothing behind.
        try:
            socket_dir = os.path.dirname(os.readlink(os.path.join(self.profile, "SingletonSocket")))
            if os.path.basename(socket_dir).startswith("org.chromium.Chromium."):
                shutil.rmtree(socket_dir, ignore_errors=True)
        except OSError:
            pass
        shutil.rmtree(self.profile, ignore_errors=True)

    async def _read(self):
        async for raw in self.ws:
            message = json.loads(raw)
            if "id" in message:
                future = self._pending.pop(message["id"], None)
                if future and not future.done():
                    if "error" in message:
                        future.set_exception(RuntimeError(f"CDP error: {message['error']}"))
                    else:
                        future.set_result(message.get("result", {}))
            else:
                self._events.append(message)
                self._changed.set()

    async def send(self, method, params=None, session=None, timeout=30):
        """The result of CDP command `method`, on the browser or in target `session`."""
        message = {"id": next(self._ids), "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        future = asyncio.get_running_loop().create_future()
        self._pending[message["id"]] = future
        await self.ws.send(json.dumps(message))
        return await asyncio.wait_for(future, timeout)

    def events(self, method, session=None):
        """Every event `method` received so far (of `session`, when given)."""
        return [e["params"] for e in self._events
                if e["method"] == method and (session is None or e.get("sessionId") == session)]

    async def wait_event(self, method, session=None, after=0, timeout=30):
        """The first event `method` past the first `after` of them."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.events(method, session)
            if len(found) > after:
                return found[after]
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method} in {timeout} s")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                pass

    async def new_page(self, width=1000, height=800, mobile=False):
        """A new tab, attached, with Page, Runtime and Network events on."""
        target = (await self.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        session = (await self.send("Target.attachToTarget",
                                   {"targetId": target, "flatten": True}))["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Network"):
            await page.send(f"{domain}.enable")
        await page.send("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": 2 if mobile else 1,
                         "mobile": mobile})
        return page


class Page:
    """One tab of a Chromium."""

    def __init__(self, browser, session):
        self.browser = browser
        self.session = session

    async def send(self, method, params=None, timeout=30):
        return await self.browser.send(method, params, self.session, timeout)

    async def navigate(self, url):
        loads = len(self.browser.events("Page.loadEventFired", self.session))
        await self.send("Page.navigate", {"url": url})
        await self.browser.wait_event("Page.loadEventFired", self.session, after=loads)

    async def evaluate(self, expression, timeout=30):
        """The value of a JavaScript expression in the page."""
        result = await self.send("Runtime.evaluate", {"expression": expression,
                                                      "returnByValue": True}, timeout)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def text(self):
        return await self.evaluate("document.body ? document.body.innerText : ''")

    async def screenshot(self, path):
        data = (await self.send("Page.captureScreenshot", {"format": "png"}))["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def requests(self):
        """(url, request headers with cookies) of every request the tab sent so far."""
        extra = {e["requestId"]: e["headers"]
                 for e in self.browser.events("Network.requestWillBeSentExtraInfo", self.session)}
        return [(e["request"]["url"], extra.get(e["requestId"], e["request"]["headers"]))
                for e in self.browser.events("Network.requestWillBeSent", self.session)]

    def responses(self):
        """(url, status, headers) of every response the tab received so far, but for the
        browser's own /favicon.ico: it asks for that whenever it likes, sometimes after the
        page's last request."""
        return [(e["response"]["url"], e["response"]["status"], e["response"]["headers"])
                for e in self.browser.events("Network.responseReceived", self.session)
                if not e["response"]["url"].endswith("/favicon.ico")]
