"""Concurrency limits through a real gateway (docs/design.md §15, issue 23): five slow requests
of one user hold its five places across both workers, the sixth gets 429 too_many_in_flight and
nothing is charged; a place comes back when a request ends, when its client goes away, and
when an upgrade's WebSocket closes.

Run: /usr/bin/python3 tests/identity/test_concurrency.py BUILD_DIR [unittest args]
"""

import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      ipv4_network: { short: { rate: 1000/s, burst: 1000 } }
      inflight_per_user: { key: { header: X-User }, concurrency: 5 }
      per_user: { key: { header: X-User }, short: { rate: 1/m, burst: 100 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
      inflight_per_user: { key: { header: X-User }, concurrency: 1 }
"""


def request(gw, user, delay_ms=0, xff=None):
    return h.http_request(gw.port, f"GET /slow?delay_ms={delay_ms} HTTP/1.1\r\nHost: t\r\n"
                                   f"X-User: {user}\r\nX-Forwarded-For: {xff or h.new_client_address()}"
                                   "\r\nConnection: close\r\n\r\n", timeout=10)


class Concurrency(h.GatewayCase):
    POLICY = POLICY
    GATEWAY = h.gateway_yaml()

    def in_background(self, user, delay_ms):
        """A request sent on a thread; its (status, headers, body) in the list returned."""
        out = []
        t = threading.Thread(target=lambda: out.append(request(self.gw, user, delay_ms)))
        t.start()
        return t, out

    def remaining(self, user):
        """per_user's remaining after one more request: how many requests were charged."""
        status, headers, _ = request(self.gw, user)
        self.assertEqual(status, 200)
        return int(headers["x-ratelimit-remaining"])

    async def test_the_sixth_of_five_in_flight_is_refused_and_charged_nothing(self):
        user = "u-" + os.urandom(4).hex()
        first = self.in_background(user, 700)
        rest = [self.in_background(user, 2500) for _ in range(4)]
        time.sleep(0.4)  # all five reached the upstream (on either worker)
        status, headers, body = request(self.gw, user)
        self.assertEqual(status, 429, body)
        self.assertEqual(headers["x-ratelimit-reason"], "too_many_in_flight")
        self.assertEqual(headers["retry-after"], "1")
        problem = json.loads(body)
        self.assertEqual((problem["code"], problem["level"]), ("too_many_in_flight", "inflight_per_user"))
        # Another user is not held up by this one's places.
        self.assertEqual(request(self.gw, user + "-other")[0], 200)
        # The first request ends: its place comes back.
        first[0].join()
        self.assertEqual(first[1][0][0], 200)
        # One more takes the free place (and ends at once).
        self.assertEqual(request(self.gw, user)[0], 200)
        for t, out in rest:
            t.join()
            self.assertEqual(out[0][0], 200)
        # per_user was charged by the five, the one after the first ended and the one that reads
        # it: the refusal was charged nothing.
        self.assertEqual(self.remaining(user), 100 - 5 - 1 - 1)

    async def test_a_client_that_goes_away_gives_its_place_back(self):
        user = "u-" + os.urandom(4).hex()
        socks = []
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", self.gw.port))
            s.sendall(f"GET /slow?delay_ms=5000 HTTP/1.1\r\nHost: t\r\nX-User: {user}\r\n"
                      f"X-Forwarded-For: {h.new_client_address()}\r\n\r\n".encode())
            socks.append(s)
        time.sleep(0.3)
        self.assertEqual(request(self.gw, user)[0], 429)
        # Three clients reset their connections, two close them: the gateway sees them go while
        # the upstream still works on their requests (5 s), closes those upstream connections,
        # and the places come back at once.
        for i, s in enumerate(socks):
            if i < 3:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        started = time.monotonic()
        self.assertTrue(h.eventually(lambda: request(self.gw, user)[0] == 200, timeout=3))
        self.assertLess(time.monotonic() - started, 2.0)
        statuses = [request(self.gw, user)[0] for _ in range(5)]
        self.assertEqual(statuses, [200] * 5)

    async def test_an_open_websocket_holds_its_place_until_it_closes(self):
        user = "u-" + os.urandom(4).hex()
        async with h.connect(self.gw, "/ws/x", extra_headers={"X-User": user}) as ws:
            await ws.send("hello")
            self.assertEqual(await ws.recv(), "hello")
            with self.assertRaises(Exception) as refused:
                async with h.connect(self.gw, "/ws/x", extra_headers={"X-User": user}):
                    pass
            self.assertIn("429", str(refused.exception))
        # Closed: the place is free again.
        async def reopen():
            async with h.connect(self.gw, "/ws/x", extra_headers={"X-User": user}) as ws:
                await ws.send("again")
                return await ws.recv()
        for _ in range(50):
            try:
                self.assertEqual(await reopen(), "again")
                break
            except Exception:
                time.sleep(0.05)
        else:
            self.fail("the WebSocket's place did not come back")


if __name__ == "__main__":
    h.main()
