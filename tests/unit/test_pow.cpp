#include <catch2/catch.hpp>

#include <string>

#include "gateway/pow/challenge.hpp"
#include "gateway/pow/crypto.hpp"
#include "gateway/pow/replay_cache.hpp"
#include "gateway/pow/violations.hpp"

using namespace tollgate::pow;

namespace {

std::string hex(const digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const auto b : d) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

constexpr std::int64_t s = 1'000'000'000;    // one second in nanoseconds
constexpr std::int64_t now = 1'800'000'000;  // Unix seconds
constexpr std::uint64_t client = 0xc0000201;
const std::uint32_t cat = category_tag("auth");

/// A nonce for which SHA-256(challenge ":" nonce) has fewer than `bits` leading zero bits.
std::string failing_nonce(const std::string& challenge, unsigned bits) {
  for (int i = 0;; ++i) {
    const std::string nonce = "n" + std::to_string(i);
    if (leading_zero_bits(sha256(challenge + ":" + nonce)) < bits) return nonce;
  }
}

}  // namespace

TEST_CASE("SHA-256 and HMAC-SHA-256 match the published vectors", "[pow]") {
  CHECK(hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex(sha256("ab", "c")) == hex(sha256("abc")));
  // RFC 4231 test cases 2 and 6 (a key longer than the block).
  CHECK(hex(hmac_key("Jefe").mac("what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hex(hmac_key(std::string(131, '\xaa'))
                .mac("Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("leading zero bits count from the most significant bit of the first byte", "[pow]") {
  digest d{};
  CHECK(leading_zero_bits(d) == 256);
  d[0] = 0x80;
  CHECK(leading_zero_bits(d) == 0);
  d[0] = 0x01;
  CHECK(leading_zero_bits(d) == 7);
  d[0] = 0;
  d[1] = 0x10;
  CHECK(leading_zero_bits(d) == 11);
}

TEST_CASE("URL-safe base64 without padding, canonical only", "[pow]") {
  for (const std::string& bytes : {std::string(""), std::string("f"), std::string("fo"),
                                   std::string("foo"), std::string("\xfb\xff\xfe", 3)}) {
    const std::string text = base64url_encode(bytes);
    CHECK(text.find_first_of("+/=") == std::string::npos);
    CHECK(base64url_decode(text) == bytes);
  }
  CHECK(base64url_encode("\xfb\xff\xfe") == "-__-");
  CHECK(base64url_encode("fo") == "Zm8");
  CHECK_FALSE(base64url_decode("Zm8="));  // padding
  CHECK_FALSE(base64url_decode("+/8"));   // the other alphabet
  CHECK_FALSE(base64url_decode("Zm9"));   // leftover bits not zero: not canonical
  CHECK_FALSE(base64url_decode("Z"));     // no byte count gives one character
}

TEST_CASE("difficulty grows with the violation counter up to the cap", "[pow]") {
  const std::pair<unsigned, unsigned> table[] = {{0, 0},  {1, 16}, {2, 18},   {3, 20},
                                                 {7, 28}, {8, 28}, {1000, 28}};
  for (const auto& [n, bits] : table) {
    INFO(n);
    CHECK(required_bits(n, 16, 2, 28) == bits);
  }
  CHECK(required_bits(1, 20, 0, 28) == 20);
}

TEST_CASE("nonces are 1-64 characters of the URL-safe alphabet", "[pow]") {
  CHECK(valid_nonce("a"));
  CHECK(valid_nonce("Az09-_"));
  CHECK(valid_nonce(std::string(64, 'x')));
  CHECK_FALSE(valid_nonce(""));
  CHECK_FALSE(valid_nonce(std::string(65, 'x')));
  CHECK_FALSE(valid_nonce("a:b"));
  CHECK_FALSE(valid_nonce("a b"));
  CHECK_FALSE(valid_nonce("a.b"));
}

TEST_CASE("a challenge solved is accepted, every way of getting it wrong has its reason", "[pow]") {
  const challenger gate("secret one");
  const std::string ch = gate.issue({now + 60, 8, cat, client});
  REQUIRE(ch.size() == challenge_length);
  CHECK(ch.find(':') == std::string::npos);
  CHECK(ch != gate.issue({now + 60, 8, cat, client}));  // fresh random bytes each time

  const std::string good = ch + ":" + solve(ch, 8, 2);
  challenge_claims claims;
  std::string_view spent;
  auto check = [&](const std::string& solution, std::int64_t at = now, std::uint64_t who = client,
                   std::uint32_t category = cat, unsigned required = 8) {
    return gate.check(solution, at, who, category, required, claims, spent);
  };
  REQUIRE(check(good) == proof_failure::none);
  CHECK(spent == ch);
  CHECK(claims.bits == 8);
  CHECK(claims.expires == now + 60);
  CHECK(check(good, now + 60) == proof_failure::none);  // the last second still counts

  CHECK(check(good, now + 61) == proof_failure::expired);
  CHECK(check(good, now, client + 1) == proof_failure::wrong_client);
  CHECK(check(good, now, client, category_tag("general")) == proof_failure::wrong_client);
  CHECK(check(good, now, client, cat, 9) == proof_failure::insufficient_work);  // needs more now
  CHECK(check(ch + ":" + failing_nonce(ch, 8)) == proof_failure::insufficient_work);
  CHECK(challenger("another secret").check(good, now, client, cat, 8, claims, spent) ==
        proof_failure::bad_signature);
  std::string tampered = good;
  tampered[30] = tampered[30] == 'A' ? 'B' : 'A';
  CHECK(check(tampered) == proof_failure::bad_signature);

  for (const std::string& bad :
       {std::string(""), ch, ch + ":", ch + ":a b", ch + ":" + std::string(65, 'a'),
        ch.substr(1) + ":1", "x" + ch + ":1", std::string(94, '+') + ":1",
        std::string(94, 'A') + ":1"}) {
    INFO(bad);
    CHECK(check(bad) == proof_failure::malformed);
  }
  CHECK(failure_name(proof_failure::insufficient_work) == "insufficient_work");
}

TEST_CASE("the replay cache refuses a second spend and stays bounded", "[pow]") {
  replay_cache cache(16 * 4);  // 4 per shard
  CHECK(cache.spend("one", 100, 50));
  CHECK_FALSE(cache.spend("one", 100, 50));
  CHECK_FALSE(cache.spend("one", 100, 99));
  for (int i = 0; i < 1000; ++i)
    cache.spend("c" + std::to_string(i), 100, 50);
  CHECK(cache.size() <= 64);
  // Expired entries are dropped as new ones come.
  replay_cache small(16);
  CHECK(small.spend("a", 10, 5));
  CHECK(small.spend("b", 30, 20));
  CHECK(small.size() <= 2);
}

TEST_CASE("violation counters rise, saturate and decay one per interval", "[pow]") {
  counter_settings cs;
  cs.max_counter = 3;
  cs.decay_interval = 10 * s;
  cs.network_min_sources = 1;  // here each violation raises its network's counter
  violation_tables t(cs, 2);
  const subject ind{0xc0000201, 0}, net{0xc00002, 1}, other{0xc0000202, 0};
  const reason_rule both{true, true};
  const reason_rule network_only{false, true};

  CHECK(t.requirement(ind, net, 0) == 0);
  t.record(ind, net, 0, both, 100 * s);
  CHECK(t.requirement(ind, net, 100 * s) == 1);
  for (int i = 0; i < 5; ++i)
    t.record(ind, net, 0, both, 100 * s);
  CHECK(t.requirement(ind, net, 100 * s) == 3);  // saturated
  CHECK(t.describe(ind, net, 100 * s).reasons == std::vector<unsigned>{3, 0});
  // One down per full interval without a new violation.
  const std::pair<std::int64_t, unsigned> decay[] = {{109 * s, 3}, {110 * s, 2}, {119 * s, 2},
                                                     {120 * s, 1}, {130 * s, 0}, {500 * s, 0}};
  for (const auto& [at, n] : decay) {
    INFO(at / s);
    CHECK(t.requirement(ind, net, at) == n);
  }
  // A network-only reason raises the network counter, which binds every address in it.
  t.record(other, net, 1, network_only, 200 * s);
  CHECK(t.requirement(other, net, 200 * s) == 1);
  CHECK(t.describe(other, net, 200 * s).individual == 0);
  CHECK(t.requirement(ind, subject{0xc00003, 1}, 200 * s) == 0);
}

TEST_CASE("a network counter rises only from network_min_sources distinct addresses", "[pow]") {
  counter_settings cs;
  cs.max_counter = 10;
  cs.decay_interval = 100 * s;
  cs.network_min_sources = 3;
  violation_tables t(cs, 1);
  const subject net{0xc00002, 1}, neighbour{0xc0000299, 0};
  const subject a{0xc0000201, 0}, b{0xc0000202, 0}, c{0xc0000203, 0};
  const reason_rule network_only{false, true};
  // One address, however many violations: its neighbours need nothing.
  for (int i = 0; i < 50; ++i)
    t.record(a, net, 0, network_only, 1000 * s + i);
  CHECK(t.requirement(neighbour, net, 1000 * s + 50) == 0);
  CHECK(t.requirement(a, net, 1000 * s + 50) == 0);
  // A second one: still nothing. The third raises the counter by one, and from then on each
  // violation of any of the three raises it.
  t.record(b, net, 0, network_only, 1001 * s);
  CHECK(t.requirement(neighbour, net, 1001 * s) == 0);
  t.record(c, net, 0, network_only, 1002 * s);
  CHECK(t.requirement(neighbour, net, 1002 * s) == 1);
  t.record(a, net, 0, network_only, 1003 * s);
  CHECK(t.requirement(neighbour, net, 1003 * s) == 2);
  // A source counts for one decay interval after its last violation: at 1101 s, a (1003 s)
  // and c (1002 s) still count, b (1001 s) does not, so a's violation does not raise it.
  t.record(a, net, 0, network_only, 1101 * s);
  CHECK(t.requirement(neighbour, net, 1101 * s) == 2);
  // Another distinct address within the interval makes three again.
  t.record(b, net, 0, network_only, 1101 * s + 1);
  CHECK(t.requirement(neighbour, net, 1101 * s + 1) == 3);
  // Long after, one address starts from nothing again.
  for (int i = 0; i < 20; ++i)
    t.record(c, net, 0, network_only, 5000 * s + i);
  CHECK(t.requirement(neighbour, net, 5000 * s + 20) == 0);
}

TEST_CASE("bans after a threshold, doubling to a cap, and lifted", "[pow]") {
  counter_settings cs;
  cs.decay_interval = 3600 * s;
  violation_tables t(cs, 1);
  const subject ind{7, 0}, net{0, 1};
  reason_rule rule{true, false, 3, 60 * s, 200 * s};

  CHECK_FALSE(t.record(ind, net, 0, rule, 0));
  CHECK_FALSE(t.record(ind, net, 0, rule, 0));
  const auto first = t.record(ind, net, 0, rule, 0);
  REQUIRE(first);
  CHECK(*first == 60 * s);
  CHECK(t.banned_until(ind, 59 * s) == 60 * s);
  // Violations still arriving during the ban (requests admitted before it) do not ban again.
  for (int i = 0; i < 6; ++i)
    CHECK_FALSE(t.record(ind, net, 0, rule, 30 * s));
  CHECK(t.banned_until(ind, 59 * s) == 60 * s);
  CHECK(t.describe(ind, net, 30 * s).bans == 1);
  CHECK_FALSE(t.banned_until(ind, 60 * s));
  CHECK_FALSE(t.banned_until(subject{8, 0}, 0));

  std::optional<std::int64_t> second;
  for (int i = 0; i < 3; ++i)
    second = t.record(ind, net, 0, rule, 1000 * s);
  REQUIRE(second);
  CHECK(*second == 1000 * s + 120 * s);  // twice the first
  std::optional<std::int64_t> third;
  for (int i = 0; i < 3; ++i)
    third = t.record(ind, net, 0, rule, 5000 * s);
  CHECK(*third == 5000 * s + 200 * s);  // 240 s capped at 200 s

  const auto listed = t.bans(5000 * s);
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].who == ind);
  CHECK(listed[0].bans == 3);
  CHECK(t.lift(ind, 5000 * s));
  CHECK_FALSE(t.banned_until(ind, 5000 * s));
  CHECK(t.bans(5000 * s).empty());
  CHECK_FALSE(t.lift(ind, 5000 * s));
  CHECK(t.describe(ind, net, 5000 * s).bans == 3);
}

TEST_CASE("violation tables are bounded", "[pow]") {
  counter_settings cs;
  cs.max_individual = 160;
  cs.max_network = 32;
  violation_tables t(cs, 1);
  const reason_rule both{true, true};
  for (std::uint64_t i = 0; i < 100'000; ++i)
    t.record(subject{i, 0}, subject{i >> 2, 1}, 0, both, 0);
  CHECK(t.individual_entries() <= 160);
  CHECK(t.network_entries() <= 32);
  // The most recent ones are still known.
  CHECK(t.requirement(subject{99'999, 0}, subject{0xffffffff, 1}, 0) == 1);
}

TEST_CASE("an IPv6 subscriber's /64s count as one source of its /48", "[pow]") {
  counter_settings cs;
  cs.decay_interval = 100 * s;
  cs.network_min_sources = 3;
  violation_tables t(cs, 1);
  const reason_rule network_only{false, true};
  // 2001:db8:1::/48; the subscriber holds 2001:db8:1:100::/56, whose /64s are 2001:db8:1:1xx::.
  const subject net{0x20010db800010000, 3};
  const std::uint8_t subnet = 2;
  for (std::uint64_t i = 0; i < 200; ++i)
    t.record(subject{0x20010db800010100 + i, subnet}, net, 0, network_only, 1000 * s + i);
  CHECK(t.requirement(subject{0x20010db800019900, subnet}, net, 1000 * s + 200) == 0);
  // Two more subscribers' /56s of the same /48: three sources.
  t.record(subject{0x20010db800010200, subnet}, net, 0, network_only, 1001 * s);
  CHECK(t.requirement(subject{0x20010db800019900, subnet}, net, 1001 * s) == 0);
  t.record(subject{0x20010db8000103ff, subnet}, net, 0, network_only, 1002 * s);
  CHECK(t.requirement(subject{0x20010db800019900, subnet}, net, 1002 * s) == 1);
}
