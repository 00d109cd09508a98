"""Consumer tiers through a real gateway (docs/design.md §15, issue 23): a key file (plain and
sha256: keys, unknown keys refused 401 unknown_key), a JWT claim and a network file each set a
request's tier; the tier scales its limits exactly (free 10, premium 30 of a burst of 10 x3,
restricted half), the headers and the 429 body show the scaled numbers and name the tier, and
tollgate_rate_limited_total counts each tier's rejections under its `consumer_tier` label, whose
values follow the tier names of a reload.

Run: /usr/bin/python3 tests/identity/test_tiers.py BUILD_DIR [unittest args]
"""

import hashlib
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import jwt  # noqa: E402

import harness as h  # noqa: E402

SECRET = "tiers-test-secret-of-some-length"
os.environ["TOLLGATE_TEST_JWT_SECRET"] = SECRET
PREMIUM_KEY = "k-premium-" + os.urandom(4).hex()

POLICY = """
tiers:
  multipliers: { restricted: 0.5, free: 1, premium: 3 }
  default: free
  from:
    - jwt_claim: plan
    - key_file: { file: keys.yaml, key: { header: X-Api-Key }, unknown: reject }
    - network: { file: datacenters.txt, tier: restricted }
  pow_bits: { restricted: 4 }
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 4 } }
      ipv4_network: { short: { rate: 1000/s, burst: 1000 } }
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/m, burst: 10 } }
      per_user: { key: { jwt_claim: sub }, short: { rate: 1/m, burst: 2 } }
      everyone: { key: global, short: { rate: 1000/s, burst: 5000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
"""

KEYS = (f"k-free: free\nk-free-2: free\n"
        f"sha256:{hashlib.sha256(PREMIUM_KEY.encode()).hexdigest()}: premium\n"
        f"k-restricted: restricted\n"
        f"k-metrics-free: free\nk-metrics-premium: premium\n")
DATACENTERS = "# data centres\n203.0.113.0/24\n\n198.51.100.7/32  # one host\n"

GATEWAY = h.gateway_yaml().replace(
    "default_route:",
    "identity:\n  jwt: { algorithms: [HS256], secret_env: TOLLGATE_TEST_JWT_SECRET }\n"
    "logging: { access_log: stdout }\n"
    "default_route:")


def get(gw, xff, headers=""):
    return h.http_request(gw.port, f"GET /api HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: {xff}\r\n"
                                   f"{headers}Connection: close\r\n\r\n")


class Tiers(h.GatewayCase):
    GATEWAY = GATEWAY
    POLICY = POLICY
    FILES = {"keys.yaml": KEYS, "datacenters.txt": DATACENTERS}

    def burst(self, n, key):
        """n requests with X-Api-Key `key`, each from a new address: the statuses."""
        return [get(self.gw, h.new_client_address(), f"X-Api-Key: {key}\r\n")
                for _ in range(n)]

    def test_free_and_premium_keys_get_10_and_30_of_a_burst_of_10(self):
        free = self.burst(40, "k-free")
        premium = self.burst(40, PREMIUM_KEY)
        self.assertEqual([s for s, _, _ in free].count(200), 10)
        self.assertEqual([s for s, _, _ in premium].count(200), 30)
        # The headers show the tier's numbers, and the 429 names it.
        status, headers, _ = premium[0]
        self.assertEqual(status, 200)
        # q, the burst, is x3; w, the time the burst takes to refill, stays (3x the rate).
        self.assertIn('"per_key.short";q=30;w=600', headers["ratelimit-policy"])
        self.assertIn('"ipv4_individual.short";q=12;w=240', headers["ratelimit-policy"])
        # A global limit is not scaled.
        self.assertIn('"everyone.short";q=5000;w=5', headers["ratelimit-policy"])
        status, headers, body = premium[-1]
        self.assertEqual(status, 429)
        self.assertEqual(headers["x-ratelimit-limit"], "30")
        problem = json.loads(body)
        self.assertEqual((problem["level"], problem["consumer_tier"]), ("per_key", "premium"))
        status, headers, body = free[-1]
        self.assertEqual((status, headers["x-ratelimit-limit"]), (429, "10"))
        self.assertEqual(json.loads(body)["consumer_tier"], "free")
        # The access log names the tier too.
        line = self.gw.process.wait_for_line("limit=per_key.short consumer_tier=premium")
        self.assertIn(" 429 category=general decision=limited ", line)

    def test_metrics_count_each_tiers_rejections_under_consumer_tier(self):
        before = self.gw.metrics()
        # per_key's burst of 10: 14 free requests are 4 rejections, 37 premium ones (x3) 7.
        free = [s for s, _, _ in self.burst(14, "k-metrics-free")]
        premium = [s for s, _, _ in self.burst(37, "k-metrics-premium")]
        self.assertEqual((free.count(429), premium.count(429)), (4, 7))
        m = self.gw.metrics()

        def rejected(metrics, tier):
            return metrics.value("tollgate_rate_limited_total", category="general",
                                 level="per_key", tier="short", mode="enforce", consumer_tier=tier)

        self.assertEqual(rejected(m, "free") - rejected(before, "free"), 4)
        self.assertEqual(rejected(m, "premium") - rejected(before, "premium"), 7)
        self.assertEqual(rejected(m, "restricted") - rejected(before, "restricted"), 0)
        # The configured tiers have their series from the start; no other value appears.
        tiers = {labels["consumer_tier"] for name, labels, _ in m.samples
                 if name == "tollgate_rate_limited_total"}
        self.assertEqual(tiers, {"restricted", "free", "premium"})
        self.assertIsNotNone(m.get("tollgate_rate_limited_total", category="websocket",
                                   level="ipv4_individual", consumer_tier="premium"))
        # No other family carries the label.
        for name, labels, _ in m.samples:
            if name != "tollgate_rate_limited_total":
                self.assertNotIn("consumer_tier", labels, name)
        check = subprocess.run(["promtool", "check", "metrics"], input=m.text.encode(),
                               capture_output=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertEqual((check.stdout + check.stderr).strip(), b"")

    def test_an_unknown_key_is_refused_and_nothing_goes_upstream(self):
        before = self.echo.stats()
        status, _, body = get(self.gw, h.new_client_address(), "X-Api-Key: k-made-up\r\n")
        self.assertEqual(status, 401, body)
        self.assertEqual(json.loads(body)["code"], "unknown_key")
        self.assertEqual(self.echo.stats(), before)
        # Without a key the key file says nothing: the default tier.
        self.assertEqual(get(self.gw, h.new_client_address())[0], 200)

    def test_a_tier_from_a_claim_wins_over_the_key_file(self):
        sub = "u-" + os.urandom(4).hex()
        now = int(time.time())
        token = jwt.encode({"sub": sub, "plan": "premium", "exp": now + 600}, SECRET,
                           algorithm="HS256")
        statuses = [get(self.gw, h.new_client_address(),
                        f"Authorization: Bearer {token}\r\nX-Api-Key: k-free-2\r\n")[0]
                    for _ in range(8)]
        # per_user burst 2 x3 = 6 for a premium subject (per_key x3 = 30 holds).
        self.assertEqual(statuses, [200] * 6 + [429] * 2)
        # A plan that names no tier leaves it to the next source (the key file: free).
        token = jwt.encode({"sub": sub + "x", "plan": "gold", "exp": now + 600}, SECRET,
                           algorithm="HS256")
        statuses = [get(self.gw, h.new_client_address(),
                        f"Authorization: Bearer {token}\r\nX-Api-Key: k-free-2\r\n")[0]
                    for _ in range(3)]
        self.assertEqual(statuses, [200, 200, 429])

    def test_a_network_file_sets_the_tier_of_its_addresses(self):
        # ipv4_individual burst 4: half for restricted addresses, all four for others.
        dc = [get(self.gw, "203.0.113.9")[0] for _ in range(4)]
        self.assertEqual(dc, [200, 200, 429, 429])
        one = [get(self.gw, "198.51.100.7")[0] for _ in range(3)]
        self.assertEqual(one, [200, 200, 429])
        other = [get(self.gw, "198.51.100.8")[0] for _ in range(5)]
        self.assertEqual(other, [200] * 4 + [429])
        status, headers, body = get(self.gw, "203.0.113.9")
        self.assertEqual((status, headers["x-ratelimit-limit"]), (429, "2"))
        self.assertEqual(json.loads(body)["consumer_tier"], "restricted")


UPSTREAM_POLICY = """
tiers:
  multipliers: { free: 1, premium: 3 }
  default: free
  from: [ upstream ]
  tier_ttl: 2s
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 2 } }
      ipv4_network: { short: { rate: 1000/s, burst: 1000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
"""


class UpstreamTier(unittest.TestCase):
    def test_the_upstream_sets_the_tier_until_tier_ttl(self):
        with h.gateway_with_echo(h.gateway_yaml(), UPSTREAM_POLICY) as gw:
            client = h.new_client_address()

            def ask(query=""):
                return h.http_request(gw.port, f"GET /x{query} HTTP/1.1\r\nHost: t\r\n"
                                               f"X-Forwarded-For: {client}\r\nConnection: close\r\n\r\n")

            # The upstream names the client premium: the field goes no further than the gateway.
            status, headers, _ = ask("?tier=premium")
            self.assertEqual((status, headers["x-ratelimit-limit"]), (200, "2"))
            self.assertNotIn("x-tollgate-tier", headers)
            # From the next request on, its limits are three times as large (a burst of 6, a
            # request every 20 s), and it keeps its state: the first request's 60 s of the free
            # tier leave room for 3 more of 20 s each (docs/design.md §15: state per limit and
            # key, whatever the tier).
            statuses = [ask()[0] for _ in range(6)]
            self.assertEqual(statuses, [200] * 3 + [429] * 3)
            status, headers, body = ask()
            self.assertEqual((status, headers["x-ratelimit-limit"]), (429, "6"))
            self.assertEqual(json.loads(body)["consumer_tier"], "premium")
            # A name that is not a tier changes nothing.
            ask("?tier=platinum")
            self.assertEqual(ask()[1]["x-ratelimit-limit"], "6")
            # tier_ttl later the client is back to the default tier.
            time.sleep(2.2)
            status, headers, body = ask()
            self.assertEqual((status, headers["x-ratelimit-limit"]), (429, "2"))
            self.assertEqual(json.loads(body)["consumer_tier"], "free")


RELOAD_POLICY = """
tiers:
  multipliers: { free: 1, %s: 2 }
  default: free
  from:
    - key_file: { file: keys.yaml, key: { header: X-Api-Key }, unknown: default }
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/m, burst: 2 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
"""

UNTIERED_POLICY = RELOAD_POLICY[RELOAD_POLICY.index("categories:"):]


class TierLabelReload(unittest.TestCase):
    def test_a_reload_that_renames_tiers_renames_the_label_values(self):
        with h.gateway_with_echo(GATEWAY, RELOAD_POLICY % "premium",
                                 files={"keys.yaml": "k-a: premium\nk-b: free\n"}) as gw:

            def burst(n, key):
                return [get(gw, h.new_client_address(), f"X-Api-Key: {key}\r\n")[0]
                        for _ in range(n)]

            def rejected(tier):
                return h.Metrics(gw.metrics_text()).get(
                    "tollgate_rate_limited_total", category="general", level="per_key",
                    tier="short", mode="enforce", consumer_tier=tier)

            self.assertEqual(burst(6, "k-a").count(429), 2)  # premium: a burst of 4
            self.assertEqual(burst(3, "k-b").count(429), 1)  # free: 2
            self.assertEqual((rejected("premium"), rejected("free"), rejected("gold")),
                             (2, 1, None))
            # premium becomes gold: its series go, gold's appear at 0, free keeps its count.
            with open(os.path.join(gw.dir, "keys.yaml"), "w") as f:
                f.write("k-a: gold\nk-c: gold\nk-b: free\n")
            self.assertIn("in force", gw.reload(GATEWAY, RELOAD_POLICY % "gold"))
            self.assertEqual((rejected("premium"), rejected("free"), rejected("gold")),
                             (None, 1, 0))
            self.assertEqual(burst(5, "k-c").count(429), 1)  # gold: a burst of 4
            self.assertEqual((rejected("free"), rejected("gold")), (1, 1))
            # Without tiers, no series has the label any more.
            self.assertIn("in force", gw.reload(GATEWAY, UNTIERED_POLICY))
            text = gw.metrics_text()
            self.assertNotIn("consumer_tier", text)
            self.assertEqual(h.Metrics(text).get("tollgate_rate_limited_total", category="general",
                                                 level="per_key", tier="short", mode="enforce"), 0)


if __name__ == "__main__":
    h.main()
