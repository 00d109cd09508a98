// What the Redis store says to Redis and reads back, without a server: key names and slots,
// the script call, the decoding of replies fed through hiredis's own reader, redirections,
// and the over-limit cache.

#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "gateway/limit/headers.hpp"
#include "gateway/store/over_limit_cache.hpp"
#include "gateway/store/redis_wire.hpp"
#include "support.hpp"

using namespace tollgate;
using namespace tollgate::limit;
using namespace tollgate::test;
namespace redis = tollgate::store::redis;

namespace {

const nanos t0 = 1'700'000'000 * sec;

struct reply_free {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_free>;

/// The reply that `resp` (RESP bytes) reads as, through hiredis's reader.
reply_ptr read_reply(const std::string& resp) {
  redisReader* reader = redisReaderCreate();
  REQUIRE(redisReaderFeed(reader, resp.data(), resp.size()) == REDIS_OK);
  void* r = nullptr;
  REQUIRE(redisReaderGetReply(reader, &r) == REDIS_OK);
  redisReaderFree(reader);
  REQUIRE(r != nullptr);
  return reply_ptr(static_cast<redisReply*>(r));
}

/// A RESP array of integers.
std::string integers(const std::vector<long long>& v) {
  std::string out = "*" + std::to_string(v.size()) + "\r\n";
  for (const long long x : v)
    out += ":" + std::to_string(x) + "\r\n";
  return out;
}

limit_spec named(limit_spec s, std::string state) {
  s.state_name = std::move(state);
  return s;
}

}  // namespace

TEST_CASE("slots are CRC16/XMODEM of the hash tag, as Redis Cluster computes them", "[redis]") {
  CHECK(redis::crc16("123456789") == 0x31C3);  // the Cluster specification's check value
  // Both checked against CLUSTER KEYSLOT on Redis 7.0.
  CHECK(redis::key_slot("{tg:198.51.100.0/24}auth/ipv4_individual/32:198.51.100.7") == 13714);
  CHECK(redis::key_slot("tg:198.51.100.0/24") == 13714);
  CHECK(redis::key_slot("t644") == 7);
  // An empty tag is no tag: the whole key is hashed.
  CHECK(redis::key_slot("a{}b") == (redis::crc16("a{}b") & 16383));
  // Only the first tag counts.
  CHECK(redis::key_slot("{x}{y}") == redis::key_slot("x"));
}

TEST_CASE("a request's address keys share the tag of its coarse network", "[redis]") {
  const limit_spec fine = named(group(params(1, sec, 5), {}, 1), "auth/ipv4_individual/32");
  const limit_spec coarse =
      named(group(params(1, sec, 5), {}, 2, level::ipv4_network), "auth/ipv4_network/24");
  const auto req = ipv4_request("198.51.100.7", &fine, &coarse, t0);
  std::string a, b;
  redis::append_key(a, "tg:", req, 0);
  redis::append_key(b, "tg:", req, 1);
  CHECK(a == "{tg:198.51.100.0/24}auth/ipv4_individual/32:198.51.100.7");
  CHECK(b == "{tg:198.51.100.0/24}auth/ipv4_network/24:198.51.100.0");
  CHECK(redis::key_slot(a) == redis::key_slot(b));

  // IPv6: the /48 is the tag, the /64 the key.
  limit_spec v6fine =
      named(group(params(1, sec, 5), {}, 3, level::ipv6_subnet), "api/ipv6_subnet/64");
  limit_request r6;
  const auto a6 = address::parse("2001:db8:1:2::9").value();
  const auto k6 = keys_of(a6, {});
  r6.groups[r6.group_count++] = {&v6fine, k6.fine_key};
  r6.network = k6.coarse_key;
  r6.network_bits = 48;
  r6.v6 = true;
  std::string c;
  redis::append_key(c, "tg:", r6, 0);
  CHECK(c == "{tg:2001:db8:1::/48}api/ipv6_subnet/64:2001:db8:1:2::");
}

TEST_CASE("keys other than the address carry their own tag", "[redis]") {
  const limit_spec api = named(keyed("per_api_key", key_source::header, params(1, sec, 3), 5),
                               "auth/per_api_key/header:x-api-key");
  const limit_spec all =
      named(keyed("everyone", key_source::global, params(1, sec, 3), 6), "auth/everyone/global");
  limit_request r = ipv4_request("192.0.2.1", nullptr, nullptr, t0);
  r.groups[r.group_count++] = {&api, 0x9f86d081884c7d65ULL};
  r.groups[r.group_count++] = {&all, 0};
  std::string k, g;
  redis::append_key(k, "tg:", r, 0);
  redis::append_key(g, "tg:", r, 1);
  CHECK(k == "{tg:auth/per_api_key/header:x-api-key:9f86d081884c7d65}");
  CHECK(g == "{tg:auth/everyone/global}");
}

TEST_CASE("the script call carries the keys, the cost and each group's constants", "[redis]") {
  const limit_spec fine =
      named(group(params(10, sec, 5), params(100, 3600 * sec, 50), 1), "auth/ipv4_individual/32");
  limit_spec coarse =
      named(group(params(1, sec, 7), {}, 2, level::ipv4_network), "auth/ipv4_network/24");
  coarse.shadow = true;
  const auto req = ipv4_request("198.51.100.7", &fine, &coarse, t0, 2);
  redis::command_args a;
  redis::build_call(a, "EVALSHA", redis::gcra_sha(), "tg:", req);
  std::vector<std::string> args;
  for (int i = 0; i < a.count; ++i)
    args.emplace_back(a.argv[i], a.lengths[i]);
  // KEYS, then: now (empty: Redis's), the limits (shadow, each tier's T and burst, the delay), one
  // request: its cost, its groups, and per group its key's and its limit's index.
  const std::vector<std::string> expected = {
      "EVALSHA",
      redis::gcra_sha(),
      "2",
      "{tg:198.51.100.0/24}auth/ipv4_individual/32:198.51.100.7",
      "{tg:198.51.100.0/24}auth/ipv4_network/24:198.51.100.0",
      "",
      "2",
      "0",
      "100000000",
      "5",
      "36000000000",
      "50",
      "0",
      "1",
      "1000000000",
      "7",
      "0",
      "0",
      "0",
      "1",
      "2",
      "2",
      "1",
      "1",
      "2",
      "2"};
  CHECK(args == expected);
  CHECK(redis::gcra_sha().size() == 40);

  std::string resp;
  REQUIRE(redis::append_command(resp, a));
  CHECK(resp.starts_with("*26\r\n$7\r\nEVALSHA\r\n$40\r\n"));
  // The empty "now" argument travels as an empty bulk string.
  CHECK(resp.find("\r\n$0\r\n\r\n$1\r\n2\r\n") != std::string::npos);

  // A batch names each key once: a second request from the same address and one from its
  // network's neighbour share keys with the first.
  const auto same = ipv4_request("198.51.100.7", &fine, &coarse, t0, 1);
  const auto neighbour = ipv4_request("198.51.100.8", &fine, &coarse, t0, 1);
  const redis::batch_entry batch[] = {{&req}, {&same}, {&neighbour}};
  redis::build_call(a, "EVALSHA", redis::gcra_sha(), "tg:", batch);
  args.clear();
  for (int i = 0; i < a.count; ++i)
    args.emplace_back(a.argv[i], a.lengths[i]);
  // 3 keys, 2 limits (listed once), 3 requests of 2 groups.
  REQUIRE(args.size() == 2 + 1 + 3 + 1 + 1 + 2 * 6 + 1 + 3 * (2 + 2 * 2));
  CHECK(args[2] == "3");
  CHECK(args[5] == "{tg:198.51.100.0/24}auth/ipv4_individual/32:198.51.100.8");
  CHECK(args[7] == "2");   // limits
  CHECK(args[20] == "3");  // requests
  // Each request: cost, groups, then (key, limit) per group. The second names keys 1 and 2,
  // the third keys 3 and 2; all three limits 1 and 2.
  CHECK(std::vector<std::string>(args.begin() + 21, args.end()) ==
        std::vector<std::string>{"2", "2", "1", "1", "2", "2", "1", "2", "1", "1", "2", "2", "1",
                                 "2", "3", "1", "2", "2"});
}

TEST_CASE("commands are written byte for byte as hiredis formats them", "[redis]") {
  const std::vector<std::vector<std::string>> cases = {
      {"PING"},
      {"SET", "k", ""},
      {"EVALSHA", redis::gcra_sha(), "0", "", "1"},
      {"SET", std::string("a\0b\r\n", 5), std::string(70000, 'x')}};
  for (const auto& c : cases) {
    redis::command_args a;
    for (const auto& v : c) {
      a.argv.push_back(v.data());
      a.lengths.push_back(v.size());
    }
    a.count = static_cast<int>(c.size());
    std::string ours;
    REQUIRE(redis::append_command(ours, a));
    char* theirs = nullptr;
    const int n = redisFormatCommandArgv(&theirs, a.count, const_cast<const char**>(a.argv.data()),
                                         a.lengths.data());
    REQUIRE(n > 0);
    CHECK(ours == std::string(theirs, static_cast<std::size_t>(n)));
    redisFreeCommand(theirs);
  }
}

TEST_CASE("a script reply becomes the decision, tats placed on the gateway's clock", "[redis]") {
  // Short 10/s burst 5 (T = 100 ms); long 100/h burst 50 (T = 36 s).
  const limit_spec fine =
      named(group(params(10, sec, 5), params(100, 3600 * sec, 50), 1), "auth/ipv4_individual/32");
  const auto req = ipv4_request("198.51.100.7", &fine, nullptr, t0);

  SECTION("admitted") {
    // Redis's now (5 s), the verdict, then per tier tat - now: short 0.1 s, long 36 s.
    // Redis's own clock is far from the gateway's.
    const auto r = read_reply(integers({5, 0, 1, 100'000'000, 36'000'000'000}));
    decision d;
    nanos redis_now = 0;
    REQUIRE(redis::decode_decision(*r, req, d, &redis_now));
    CHECK(redis_now == 5 * sec);
    CHECK(d.admitted);
    CHECK_FALSE(d.shadow_limited);
    REQUIRE(d.count == 2);
    CHECK(d.limits[0].tat == t0 + 100 * ms);
    CHECK(d.limits[0].wait == 0);
    CHECK(d.limits[1].tat == t0 + 36 * sec);
    // The same decision the in-process store makes from a fresh state.
    const binding_view b = binding_of(req, d);
    CHECK(b.remaining == 4);
  }
  SECTION("rejected: the wait is the stored tat less the tolerance") {
    // Short tier full: stored tat = now + 0.5 s (burst 5 × 100 ms), told as -d - 1.
    const auto r = read_reply(integers({5, 0, 0, -500'000'001, 36'000'000'000}));
    decision d;
    REQUIRE(redis::decode_decision(*r, req, d));
    CHECK_FALSE(d.admitted);
    CHECK(d.limits[0].tat == t0 + 500 * ms);
    CHECK(d.limits[0].wait == 100 * ms);
    CHECK(binding_of(req, d).which == tier::short_term);
  }
  SECTION("admitted past a shadowed limit; times past 2^53 ns as text") {
    // 1/h burst 1 000 000: a tat up to a million hours ahead, beyond a double's integers.
    const limit_spec wide =
        named(group(params(1, 3600 * sec, 1'000'000), {}, 2), "w/ipv4_individual/32");
    const auto req2 = ipv4_request("198.51.100.7", &wide, nullptr, t0);
    const auto r = read_reply("*4\r\n:5\r\n:0\r\n:2\r\n$21\r\n1:3000000000:12345678\r\n");
    decision d;
    REQUIRE(redis::decode_decision(*r, req2, d));
    CHECK(d.admitted);
    CHECK(d.shadow_limited);
    CHECK(d.limits[0].tat == t0 + 3'000'000'000 * sec + 12'345'678);
  }
  SECTION("replies of another shape are refused") {
    decision d;
    CHECK_FALSE(redis::decode_decision(*read_reply(integers({5, 0, 1, 100'000'000})), req, d));
    CHECK_FALSE(redis::decode_decision(*read_reply("$2\r\nok\r\n"), req, d));
    CHECK_FALSE(redis::decode_decision(*read_reply("-ERR x\r\n"), req, d));
    // A verdict out of range; a string where an integer belongs; malformed long times.
    CHECK_FALSE(redis::decode_decision(*read_reply(integers({5, 0, 3, 1, 1})), req, d));
    CHECK_FALSE(
        redis::decode_decision(*read_reply("*5\r\n:5\r\n:0\r\n$1\r\n1\r\n:1\r\n:1\r\n"), req, d));
    for (const char* text : {"1:1", "2:1:1", "1:-1:0", "1:1:1000000000", "1:1:1x", "x"}) {
      CAPTURE(text);
      const std::string t(text);
      const std::string resp = "*5\r\n:5\r\n:0\r\n:1\r\n$" + std::to_string(t.size()) + "\r\n" + t +
                               "\r\n:36000000000\r\n";
      CHECK_FALSE(redis::decode_decision(*read_reply(resp), req, d));
    }
    // Past burst·T; a rejection without a wait; Redis's nanoseconds out of range.
    CHECK_FALSE(redis::decode_decision(*read_reply(integers({5, 0, 1, 500'000'001, 1})), req, d));
    CHECK_FALSE(redis::decode_decision(*read_reply(integers({5, 0, 0, -2, 1})), req, d));
    CHECK_FALSE(redis::decode_decision(*read_reply(integers({5, 1'000'000'000, 1, 1, 1})), req, d));
    // A tier the limit does not have is not in the reply.
    const limit_spec short_only = named(group(params(10, sec, 5), {}, 1), "a/ipv4_individual/32");
    const auto req1 = ipv4_request("198.51.100.7", &short_only, nullptr, t0);
    CHECK(redis::decode_decision(*read_reply(integers({5, 0, 1, 1})), req1, d));
    CHECK_FALSE(redis::decode_decision(*read_reply(integers({5, 0, 1, 1, 1})), req1, d));
  }
}

TEST_CASE("MOVED and ASK name the node, anything else is not a redirection", "[redis]") {
  const auto m = redis::parse_redirect("MOVED 3999 127.0.0.1:6381");
  REQUIRE(m);
  CHECK_FALSE(m->ask);
  CHECK(m->slot == 3999);
  CHECK(m->host == "127.0.0.1");
  CHECK(m->port == 6381);
  const auto a = redis::parse_redirect("ASK 16383 [::1]:7000");
  REQUIRE(a);
  CHECK(a->ask);
  CHECK(a->host == "::1");
  CHECK(a->port == 7000);
  for (const char* bad : {"MOVED", "MOVED 16384 h:1", "MOVED x h:1", "MOVED 1 h", "MOVED 1 h:0",
                          "MOVED 1 :5", "ASK 1 h:99999", "ERR MOVED 1 h:1", "MOVED 1 h:1x",
                          "ASK 12 []:7000", "MOVED 1 a b:7000", "MOVED 1 a\x01:7000"}) {
    CAPTURE(bad);
    CHECK_FALSE(redis::parse_redirect(bad));
  }
  CHECK(redis::error_kind("NOSCRIPT No matching script") == "noscript");
  CHECK(redis::error_kind("OOM command not allowed") == "oom");
  CHECK(redis::error_kind("ERR Error running script") == "script");
}

TEST_CASE("the over-limit cache answers a key Redis found over its limit until its wait ends",
          "[redis][cache]") {
  const limit_spec fine = named(group(params(10, sec, 5), {}, 1), "a/ipv4_individual/32");
  const limit_spec coarse =
      named(group(params(100, sec, 50), {}, 2, level::ipv4_network), "a/ipv4_network/24");
  store::over_limit_cache cache;
  auto req = ipv4_request("198.51.100.7", &fine, &coarse, t0);
  decision d;
  CHECK_FALSE(cache.reject(req, d));

  // Redis said: /32 full (stored tat = now + 0.5 s, wait 100 ms), /24 would allow.
  decision redis_said;
  redis_said.admitted = false;
  redis_said.count = 2;
  redis_said.limits[0] = {t0 + 500 * ms, 100 * ms, 0, tier::short_term, 0};
  redis_said.limits[1] = {t0 + 20 * ms, 0, 1, tier::short_term, 0};
  choose_binding(req, redis_said);
  cache.remember(req, redis_said);

  req.now = t0 + 50 * ms;
  REQUIRE(cache.reject(req, d));
  CHECK_FALSE(d.admitted);
  const binding_view b = binding_of(req, d);
  CHECK(b.name == "ipv4_individual");
  CHECK(b.wait == 50 * ms);
  // The /24's tier is told as unknown, i.e. as a fresh state would allow (tat = now + T), not
  // as the tat of a commit that never was.
  CHECK(d.limits[1].tat == req.now + 10 * ms);
  CHECK(d.limits[1].wait == 0);

  // Its wait over, the request goes to Redis again.
  req.now = t0 + 100 * ms;
  CHECK_FALSE(cache.reject(req, d));
  // Another address of the same /24 is not the cached key.
  auto other = ipv4_request("198.51.100.8", &fine, &coarse, t0 + 50 * ms);
  CHECK_FALSE(cache.reject(other, d));

  // A reload that changed the limit's constants: the old tat is not applied to the new limit.
  limit_spec raised = fine;
  raised.tiers[0] = params(10, sec, 50);
  auto req2 = ipv4_request("198.51.100.7", &raised, &coarse, t0 + 50 * ms);
  CHECK_FALSE(cache.reject(req2, d));

  // A shadowed limit's rejection is never cached (it admits).
  limit_spec shadowed = fine;
  shadowed.shadow = true;
  store::over_limit_cache c2;
  auto req3 = ipv4_request("198.51.100.7", &shadowed, &coarse, t0);
  decision rej = redis_said;
  c2.remember(req3, rej);
  CHECK_FALSE(c2.reject(req3, d));
}

TEST_CASE("the scripts are their .lua files byte for byte, under the SHA-1s replicas share",
          "[redis]") {
  const auto file = [](const char* name) {
    std::ifstream f(std::string(TOLLGATE_SOURCE_DIR) + "/gateway/store/" + name, std::ios::binary);
    REQUIRE(f);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  };
  CHECK(redis::gcra_script() == file("gcra.lua"));
  CHECK(redis::refund_script() == file("refund.lua"));
  // A new script is a new SHA-1: replicas of two versions would then run different scripts
  // on the same keys. Change these only with the script's version line.
  CHECK(redis::gcra_sha() == "49abeb43e6903be94e379410aa57e63faeb8002a");
  CHECK(redis::refund_sha() == "b4e5fd5833097963d8e82f3b4d772cf0be0a37d4");
}
