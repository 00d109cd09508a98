"""Overrides through the admin API (docs/design.md §15, issue 23), through real gateways: a key
raised to a tier (exactly 30 of a burst of 10 x3 where others get 10), keys by prefix given
explicit numbers (shown in the headers), a network given a tier, the longest match winning,
expiry, deletion, SIGHUP keeping them, every refusal with its reason and the audit lines; and
with `store: redis` an override set through one replica applying on a second (Debian's
redis-server on a loopback port).

Run: /usr/bin/python3 tests/identity/test_overrides.py BUILD_DIR [unittest args]
"""

import json
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "websocket"))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["TOLLGATE_BUILD_DIR"] = sys.argv.pop(1)

import harness as h  # noqa: E402

POLICY = """
tiers:
  multipliers: { restricted: 0.5, free: 1, premium: 3 }
  default: free
  from:
    - override
    - network: { file: datacenters.txt, tier: restricted }
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 4 } }
      ipv4_network: { short: { rate: 1000/s, burst: 1000 } }
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/m, burst: 10 } }
      per_key_address: { key: [ { header: X-Key-2 }, individual ], short: { rate: 1/m, burst: 2 } }
      in_flight: { key: { header: X-Api-Key }, concurrency: 50 }
      everyone: { key: global, short: { rate: 1000/s, burst: 5000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
"""
DATACENTERS = "203.0.113.0/24\n"


def get(port, xff, headers=""):
    return h.http_request(port, f"GET /api HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: {xff}\r\n"
                                f"{headers}Connection: close\r\n\r\n")


def admin(gw, method, path, body=None):
    """An admin request: (status, parsed JSON body)."""
    payload = "" if body is None else (body if isinstance(body, str) else json.dumps(body))
    status, _, text = h.http_request(
        gw.admin_port, f"{method} {path} HTTP/1.1\r\nHost: admin\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(payload.encode())}\r\nConnection: close\r\n\r\n{payload}")
    return status, (json.loads(text) if text else None)


def burst(gw, n, key, xff=None):
    """n requests with X-Api-Key `key`, each from a new address unless `xff`: the answers."""
    return [get(gw.port, xff or h.new_client_address(), f"X-Api-Key: {key}\r\n") for _ in range(n)]


def passed(answers):
    return [s for s, _, _ in answers].count(200)


def fresh(prefix="k-"):
    return prefix + os.urandom(4).hex()


class Overrides(h.GatewayCase):
    GATEWAY = h.gateway_yaml()
    POLICY = POLICY
    FILES = {"datacenters.txt": DATACENTERS}

    def put(self, body):
        return admin(self.gw, "PUT", "/admin/overrides", body)

    def test_a_key_raised_to_a_tier_gets_30_of_a_burst_of_10_and_falls_back_when_deleted(self):
        partner, other = fresh(), fresh()
        status, o = self.put({"limit": "per_key", "key": partner, "tier": "premium"})
        self.assertEqual(status, 200, o)
        self.assertEqual((o["limit"], o["key"], o["tier"]), ("per_key", partner, "premium"))
        self.assertRegex(o["id"], r"^[0-9a-f]{16}$")
        answers = burst(self.gw, 40, partner)
        self.assertEqual(passed(answers), 30)
        self.assertEqual(passed(burst(self.gw, 40, other)), 10)
        status, headers, body = answers[-1]
        self.assertEqual((status, headers["x-ratelimit-limit"]), (429, "30"))
        self.assertEqual(json.loads(body)["consumer_tier"], "premium")
        # Listed, then deleted: the key is back to the default tier (its state stays: a new
        # burst of 10 is spent at once, the bucket being empty).
        status, listed = admin(self.gw, "GET", "/admin/overrides")
        self.assertEqual(status, 200)
        self.assertIn(o["id"], [x["id"] for x in listed["overrides"]])
        status, gone = admin(self.gw, "DELETE", f"/admin/overrides/{o['id']}")
        self.assertEqual((status, gone["deleted"]), (200, True))
        status, headers, _ = get(self.gw.port, h.new_client_address(), f"X-Api-Key: {partner}\r\n")
        self.assertEqual((status, headers["x-ratelimit-limit"]), (429, "10"))
        self.assertEqual(admin(self.gw, "DELETE", f"/admin/overrides/{o['id']}")[0], 404)
        # Every change left an audit line.
        line = self.gw.process.wait_for_line(f"action=override_delete target={o['id']}")
        self.assertIn("result=200", line)
        self.assertIn('covers="limit per_key key ' + partner, line)

    def test_keys_by_prefix_get_explicit_numbers_shown_in_the_headers(self):
        prefix = fresh("partner_") + "_"
        status, o = self.put({"limit": "per_key", "key_prefix": prefix,
                              "short": {"rate": "1/m", "burst": 25}})
        self.assertEqual(status, 200, o)
        self.assertEqual(o["short"], {"rate": "1/m", "burst": 25})
        answers = burst(self.gw, 30, prefix + "a")
        self.assertEqual(passed(answers), 25)
        self.assertIn('"per_key.short";q=25;w=1500', answers[0][1]["ratelimit-policy"])
        status, headers, _ = answers[-1]
        self.assertEqual((status, headers["x-ratelimit-limit"]), (429, "25"))
        # Numbers are not a tier: the consumer's tier stays the default.
        self.assertEqual(json.loads(answers[-1][2])["consumer_tier"], "free")
        # A key that only starts like it does not match; an exact override beats the prefix.
        self.assertEqual(passed(burst(self.gw, 12, prefix[:-1] + "-b")), 10)
        exact = prefix + "exact"
        self.assertEqual(self.put({"limit": "per_key", "key": exact, "tier": "premium"})[0], 200)
        self.assertEqual(passed(burst(self.gw, 35, exact)), 30)

    def test_a_network_gets_a_tier_and_the_longest_block_wins(self):
        # 198.18.0.0/15 restricted, one /24 inside it premium.
        self.assertEqual(self.put({"address": "198.18.0.0/15", "tier": "restricted"})[0], 200)
        self.assertEqual(self.put({"address": "198.19.7.0/24", "tier": "premium"})[0], 200)
        key = fresh()
        # Each from one address of its block: ipv4_individual 4 x0.5 = 2, x3 = 12.
        self.assertEqual(passed(burst(self.gw, 6, key + "r", "198.18.3.3")), 2)
        self.assertEqual(passed(burst(self.gw, 15, key + "p", "198.19.7.9")), 12)
        # An override comes before the network file: 203.0.113.0/24 is restricted by the file.
        self.assertEqual(passed(burst(self.gw, 6, key + "d", "203.0.113.5")), 2)
        self.assertEqual(self.put({"address": "203.0.113.6", "tier": "premium"})[0], 200)
        self.assertEqual(passed(burst(self.gw, 15, key + "e", "203.0.113.6")), 12)

    def test_numbers_for_every_limit_of_an_address(self):
        self.assertEqual(self.put({"address": "198.51.100.77",
                                   "short": {"rate": "1/m", "burst": 7}})[0], 200)
        answers = burst(self.gw, 9, fresh(), "198.51.100.77")
        self.assertEqual(passed(answers), 7)
        self.assertEqual(answers[-1][1]["x-ratelimit-limit"], "7")

    def test_a_composite_key_is_matched_on_its_value_part(self):
        key = fresh()
        self.assertEqual(self.put({"limit": "per_key_address", "key": key, "tier": "premium"})[0], 200)
        xff = h.new_client_address()
        statuses = [get(self.gw.port, xff, f"X-Key-2: {key}\r\n")[0] for _ in range(8)]
        # per_key_address 2 x3 = 6 (ipv4_individual 4 x3 = 12 holds).
        self.assertEqual(statuses, [200] * 6 + [429] * 2)

    def test_an_override_ends_when_it_expires(self):
        key = fresh()
        ends = int(time.time()) + 3
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ends))
        status, o = self.put({"limit": "per_key", "key": key, "tier": "premium", "expires": expires})
        self.assertEqual((status, o["expires"]), (200, expires))
        answers = burst(self.gw, 12, key)
        self.assertEqual(passed(answers), 12)
        self.assertIn('"per_key.short";q=30;', answers[-1][1]["ratelimit-policy"])
        time.sleep(max(0.0, ends + 0.3 - time.time()))
        listed = admin(self.gw, "GET", "/admin/overrides")[1]["overrides"]
        self.assertNotIn(o["id"], [x["id"] for x in listed])
        # The same key is of the default tier again (its state kept).
        _, headers, _ = get(self.gw.port, h.new_client_address(), f"X-Api-Key: {key}\r\n")
        self.assertIn('"per_key.short";q=10;', headers["ratelimit-policy"])

    def test_a_put_of_the_same_target_replaces_it(self):
        key = fresh()
        first = self.put({"limit": "per_key", "key": key, "tier": "premium"})[1]
        second = self.put({"limit": "per_key", "key": key, "tier": "restricted"})[1]
        self.assertEqual(first["id"], second["id"])
        listed = [x for x in admin(self.gw, "GET", "/admin/overrides")[1]["overrides"]
                  if x["id"] == first["id"]]
        self.assertEqual([x["tier"] for x in listed], ["restricted"])
        self.assertEqual(passed(burst(self.gw, 8, key)), 5)
        self.gw.process.wait_for_line(f"target={first['id']} covers=")

    def test_refusals_name_what_is_wrong(self):
        cases = [
            ("{not json", "JSON object"),
            ({"limit": "per_key", "key": "k", "address": "10.0.0.1", "tier": "premium"}, "exactly one"),
            ({"limit": "nope", "key": "k", "tier": "premium"}, "no category has a limit named 'nope'"),
            ({"limit": "per_key", "key": "k", "tier": "gold"}, "no tier 'gold'"),
            ({"limit": "ipv4_individual", "key": "k", "tier": "premium"}, "keyed on the address"),
            ({"limit": "everyone", "key": "k", "tier": "premium"}, "global"),
            ({"limit": "in_flight", "key": "k", "short": {"rate": "1/s", "burst": 2}}, "concurrency"),
            ({"limit": "per_key", "key": "k"}, "either \"tier\" or numbers"),
            ({"limit": "per_key", "key": "k", "tier": "premium", "short": {"rate": "1/s", "burst": 2}},
             "either"),
            ({"limit": "per_key", "key": "k", "short": {"rate": "fast", "burst": 2}}, "short.rate"),
            ({"limit": "per_key", "key": "k", "short": {"rate": "1/s", "burst": 0}}, "short.burst"),
            ({"limit": "per_key", "key": "k", "long": {"rate": "1/h", "burst": 2}}, "no long tier"),
            ({"limit": "per_key", "key": "k", "tier": "premium", "expires": "2001-01-01T00:00:00Z"},
             "in the past"),
            ({"limit": "per_key", "key": "k", "tier": "premium", "expires": "tomorrow"}, "RFC 3339"),
            ({"address": "10.0.0.0/33", "tier": "premium"}, "CIDR"),
            ({"address": "10.0.0.0/8", "limit": "per_key", "tier": "premium"}, "leave out \"limit\""),
            ({"key": "k", "tier": "premium"}, "names its \"limit\""),
            ({"limit": "per_key", "key": "a\u0001b", "tier": "premium"}, "control characters"),
            ({"limit": "per_key", "key": "k", "tier": "premium", "colour": "red"}, "unknown member"),
            ({"limit": "per_key", "key": "k", "tier": "premium", "id": "0000000000000000"},
             "unknown member"),
        ]
        for body, reason in cases:
            with self.subTest(body=body):
                status, problem = self.put(body)
                self.assertEqual(status, 400, problem)
                self.assertIn(reason, problem["detail"])
        self.assertEqual(admin(self.gw, "POST", "/admin/overrides", {})[0], 405)
        self.assertEqual(admin(self.gw, "GET", "/admin/overrides/abc")[0], 405)
        self.gw.process.wait_for_line("action=override target=- error=")
        # The gateway still serves.
        self.assertEqual(get(self.gw.port, h.new_client_address())[0], 200)


class Reload(unittest.TestCase):
    def test_overrides_survive_sighup_and_follow_the_new_configuration(self):
        with h.gateway_with_echo(h.gateway_yaml(), POLICY, {"datacenters.txt": DATACENTERS}) as gw:
            key = fresh()
            status, o = admin(gw, "PUT", "/admin/overrides",
                              {"limit": "per_key", "key": key, "tier": "premium"})
            self.assertEqual(status, 200, o)
            # The new configuration makes premium x5: the override follows it.
            self.assertIn("in force", gw.reload(h.gateway_yaml(),
                                                POLICY.replace("premium: 3", "premium: 5")))
            self.assertEqual(passed(burst(gw, 55, key)), 50)
            self.assertIn(o["id"], [x["id"] for x in admin(gw, "GET", "/admin/overrides")[1]["overrides"]])


class Redis:
    """Debian's redis-server on a free loopback port, persisting nothing."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tollgate-overrides-redis-")
        self.port = h.free_port()
        self.process = h.Process(["/usr/bin/redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--daemonize", "no",
                                  "--dir", self.dir])
        self.process.wait_for_line("Ready to accept connections")

    def stop(self):
        self.process.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Replicas(unittest.TestCase):
    """Two gateways sharing one Redis: an override set through one applies on the other."""

    def test_an_override_set_through_one_replica_applies_on_the_second(self):
        redis = Redis()
        try:
            os.environ["TOLLGATE_POW_SECRET"] = "replicas-share-this-secret-0123456789"
            gateway = h.gateway_yaml().replace(
                "default_route:",
                f'store: {{ type: redis, address: "127.0.0.1:{redis.port}", timeout: 1s }}\n'
                "default_route:")
            with h.gateway_with_echo(gateway, POLICY, {"datacenters.txt": DATACENTERS}) as a, \
                    h.gateway_with_echo(gateway, POLICY, {"datacenters.txt": DATACENTERS}) as b:
                for gw in (a, b):
                    h.eventually(lambda: gw.metrics().get("tollgate_store_degraded") == 0, 10)
                key = fresh()
                status, o = admin(a, "PUT", "/admin/overrides",
                                  {"limit": "per_key", "key": key, "tier": "premium"})
                self.assertEqual(status, 200, o)
                self.assertTrue(admin(a, "GET", "/admin/overrides")[1]["shared"])
                # B follows Redis (every 100 ms).
                h.eventually(lambda: o["id"] in [x["id"] for x in
                                                 admin(b, "GET", "/admin/overrides")[1]["overrides"]], 3)
                # The key's state is shared too: 30 in all, through both replicas.
                through_b = burst(b, 20, key)
                through_a = burst(a, 20, key)
                self.assertEqual(passed(through_b), 20)
                self.assertEqual(passed(through_a), 10)
                self.assertEqual(through_a[-1][1]["x-ratelimit-limit"], "30")
                # Deleted through B: A goes back to 10 for a new key of the same kind.
                self.assertEqual(admin(b, "DELETE", f"/admin/overrides/{o['id']}")[0], 200)
                h.eventually(lambda: admin(a, "GET", "/admin/overrides")[1]["overrides"] == [], 3)
                status, headers, _ = get(a.port, h.new_client_address(), f"X-Api-Key: {key}\r\n")
                self.assertEqual((status, headers["x-ratelimit-limit"]), (429, "10"))
                # A replica started later reads what Redis holds.
                status, o2 = admin(a, "PUT", "/admin/overrides",
                                   {"address": "198.18.0.0/15", "tier": "restricted"})
                self.assertEqual(status, 200)
                with h.gateway_with_echo(gateway, POLICY, {"datacenters.txt": DATACENTERS}) as c:
                    h.eventually(lambda: [x["id"] for x in admin(c, "GET", "/admin/overrides")[1]["overrides"]]
                                 == [o2["id"]], 5)
        finally:
            redis.stop()

    def test_a_put_fails_clearly_when_redis_is_down_and_nothing_changes(self):
        redis = Redis()
        os.environ["TOLLGATE_POW_SECRET"] = "replicas-share-this-secret-0123456789"
        gateway = h.gateway_yaml().replace(
            "default_route:",
            f'store: {{ type: redis, address: "127.0.0.1:{redis.port}", timeout: 1s }}\n'
            "default_route:")
        try:
            with h.gateway_with_echo(gateway, POLICY, {"datacenters.txt": DATACENTERS}) as gw:
                h.eventually(lambda: gw.metrics().get("tollgate_store_degraded") == 0, 10)
                redis.stop()
                status, problem = admin(gw, "PUT", "/admin/overrides",
                                        {"limit": "per_key", "key": fresh(), "tier": "premium"})
                self.assertEqual(status, 503, problem)
                self.assertIn("not stored", problem["detail"])
                self.assertEqual(admin(gw, "GET", "/admin/overrides")[1]["overrides"], [])
                self.assertEqual(get(gw.port, h.new_client_address())[0], 200)
        finally:
            redis.stop()


if __name__ == "__main__":
    h.main()
