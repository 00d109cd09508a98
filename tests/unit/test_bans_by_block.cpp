// What an operator names in the admin API (an address or a CIDR block), bans placed by hand
// on such blocks, and forgetting a block's violation counters and automatic bans.

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "gateway/bans/manual_bans.hpp"
#include "gateway/core/key_block.hpp"
#include "gateway/limit/address.hpp"
#include "gateway/pow/violations.hpp"

using namespace tollgate;
using core::key_block;
using pow::subject;

namespace {

constexpr std::int64_t s = 1'000'000'000;

key_block block(std::string_view text, const core::level_prefixes& p = {}) {
  std::string error;
  const auto b = key_block::parse(text, p, error);
  INFO(error);
  REQUIRE(b);
  return *b;
}

std::string parse_error(std::string_view text, const core::level_prefixes& p = {}) {
  std::string error;
  CHECK_FALSE(key_block::parse(text, p, error));
  return error;
}

/// The individual subject of an address, as the request path has it.
subject individual(std::string_view a, const core::level_prefixes& p = {}) {
  const auto k = limit::keys_of(core::address::parse(a).value(), p);
  return {k.fine_key, static_cast<std::uint8_t>(k.fine)};
}

subject network(std::string_view a, const core::level_prefixes& p = {}) {
  const auto k = limit::keys_of(core::address::parse(a).value(), p);
  return {k.coarse_key, static_cast<std::uint8_t>(k.coarse)};
}

}  // namespace

TEST_CASE("an operator's target is an address or a block no narrower than a client", "[bans]") {
  CHECK(block("198.51.100.7").to_string() == "198.51.100.7/32");
  CHECK(block("198.51.100.0/24").to_string() == "198.51.100.0/24");
  CHECK(block("0.0.0.0/0").to_string() == "0.0.0.0/0");
  CHECK(block("::ffff:10.0.0.0/104").to_string() == "10.0.0.0/8");
  // An IPv6 address is its /64: the gateway counts a /64 as one client.
  CHECK(block("2001:db8::1").to_string() == "2001:db8::/64");
  CHECK(block("2001:db8::/48").to_string() == "2001:db8::/48");
  CHECK(block("2001:db8::1", {32, 24, 56, 48}).to_string() == "2001:db8::/56");

  CHECK(parse_error("198.51.100.7/24") ==
        "host bits are set below the prefix in \"198.51.100.7/24\"; the block is 198.51.100.0/24");
  CHECK(parse_error("2001:db8::1/64").find("host bits are set") == 0);
  CHECK(parse_error("2001:db8::/96") ==
        "/96 is narrower than the ipv6_subnet level (/64), which the gateway counts as one "
        "client: name the address, or a block of /64 or wider");
  CHECK(parse_error("198.51.100.0/33") == "bad prefix length in \"198.51.100.0/33\"");
  CHECK(parse_error("198.51.100.0/") == "bad prefix length in \"198.51.100.0/\"");
  CHECK(parse_error("198.51.100.0/2x") == "bad prefix length in \"198.51.100.0/2x\"");
  CHECK(parse_error("example.com") == "not an IP address or CIDR block: \"example.com\"");
  CHECK(parse_error("") == "not an IP address or CIDR block: \"\"");
}

TEST_CASE("a block overlaps the keys inside it and the keys that hold it", "[bans]") {
  const key_block b = block("198.51.100.0/28");
  CHECK(b.overlaps(core::level::ipv4_individual, individual("198.51.100.15").key, 32));
  CHECK_FALSE(b.overlaps(core::level::ipv4_individual, individual("198.51.100.16").key, 32));
  CHECK(b.overlaps(core::level::ipv4_network, network("198.51.100.200").key, 24));
  CHECK_FALSE(b.overlaps(core::level::ipv4_network, network("198.51.101.1").key, 24));
  // The same bits in the other family are another client.
  CHECK_FALSE(b.overlaps(core::level::ipv6_subnet, individual("198.51.100.15").key, 64));
}

TEST_CASE("manual bans cover the addresses inside their blocks until they end", "[bans]") {
  bans::manual_bans bans;
  CHECK_FALSE(bans.banned_until(individual("198.51.100.7"), 0));
  CHECK(bans.place({block("198.51.100.0/24"), 0, 100 * s, "scraper"}, 0) ==
        bans::manual_bans::placed::added);
  CHECK(bans.place({block("203.0.113.9"), 0, 50 * s, ""}, 0) == bans::manual_bans::placed::added);
  CHECK(bans.place({block("2001:db8:1::/48"), 0, 70 * s, ""}, 0) ==
        bans::manual_bans::placed::added);

  CHECK(bans.banned_until(individual("198.51.100.7"), 10 * s) == 100 * s);
  CHECK(bans.banned_until(individual("198.51.100.255"), 10 * s) == 100 * s);
  CHECK_FALSE(bans.banned_until(individual("198.51.101.0"), 10 * s));
  CHECK_FALSE(bans.banned_until(individual("198.51.99.255"), 10 * s));
  CHECK(bans.banned_until(individual("203.0.113.9"), 10 * s) == 50 * s);
  CHECK_FALSE(bans.banned_until(individual("203.0.113.8"), 10 * s));
  CHECK(bans.banned_until(individual("2001:db8:1:ffff::5"), 10 * s) == 70 * s);
  CHECK_FALSE(bans.banned_until(individual("2001:db8:2::5"), 10 * s));

  // A narrower ban inside a wider one: the later end answers.
  CHECK(bans.place({block("198.51.100.7"), 0, 300 * s, ""}, 0) == bans::manual_bans::placed::added);
  CHECK(bans.banned_until(individual("198.51.100.7"), 10 * s) == 300 * s);
  CHECK(bans.banned_until(individual("198.51.100.8"), 10 * s) == 100 * s);

  // Placing again replaces; ends expire; lifting is by exact block.
  CHECK(bans.place({block("198.51.100.0/24"), 20 * s, 40 * s, ""}, 20 * s) ==
        bans::manual_bans::placed::replaced);
  CHECK(bans.banned_until(individual("198.51.100.8"), 39 * s) == 40 * s);
  CHECK_FALSE(bans.banned_until(individual("198.51.100.8"), 40 * s));
  CHECK(bans.list(45 * s).size() == 3);  // 203.0.113.9/32 until 50 s, the /48, the /32
  CHECK_FALSE(bans.lift(block("198.51.100.0/24"), 45 * s));  // expired already
  CHECK_FALSE(bans.lift(block("2001:db8::/32"), 45 * s));    // not that block
  CHECK(bans.lift(block("2001:db8:1::/48"), 45 * s));
  CHECK_FALSE(bans.banned_until(individual("2001:db8:1::5"), 45 * s));
  CHECK(bans.banned_until(individual("198.51.100.7"), 45 * s) == 300 * s);
}

TEST_CASE("a lifted ban ends, whichever slot it had", "[bans]") {
  // The ban sorting last in its group was still found after its lift: the search ended on the
  // slot past the group, which kept the lifted key.
  bans::manual_bans bans;
  CHECK(bans.place({block("10.0.0.1"), 0, 100 * s, ""}, 0) == bans::manual_bans::placed::added);
  CHECK(bans.place({block("10.0.0.9"), 0, 100 * s, ""}, 0) == bans::manual_bans::placed::added);
  CHECK(bans.lift(block("10.0.0.9"), 1 * s));
  CHECK_FALSE(bans.banned_until(individual("10.0.0.9"), 1 * s));
  CHECK(bans.banned_until(individual("10.0.0.1"), 1 * s) == 100 * s);
  // A lift in the middle of the slots: the /24 group moves down into the lifted /32's slot,
  // and each group still finds its own bans only.
  CHECK(bans.place({block("10.0.1.0/24"), 0, 100 * s, ""}, 0) == bans::manual_bans::placed::added);
  CHECK(bans.place({block("10.0.0.200"), 0, 100 * s, ""}, 0) == bans::manual_bans::placed::added);
  CHECK(bans.lift(block("10.0.0.200"), 1 * s));
  CHECK_FALSE(bans.banned_until(individual("10.0.0.200"), 1 * s));
  CHECK(bans.banned_until(individual("10.0.1.200"), 1 * s) == 100 * s);
  CHECK(bans.lift(block("10.0.0.1"), 1 * s));
  CHECK(bans.lift(block("10.0.1.0/24"), 1 * s));
  CHECK_FALSE(bans.banned_until(individual("10.0.1.200"), 1 * s));
}

TEST_CASE("manual bans are bounded", "[bans]") {
  bans::manual_bans bans;
  for (std::uint32_t i = 0; i < bans::manual_bans::capacity; ++i) {
    const std::string a = core::address::from_v4(0x0a000000u + (i << 8)).to_string() + "/24";
    REQUIRE(bans.place({block(a), 0, 100 * s, ""}, 0) == bans::manual_bans::placed::added);
  }
  CHECK(bans.place({block("192.0.2.0/24"), 0, 100 * s, ""}, 0) == bans::manual_bans::placed::full);
  CHECK(bans.banned_until(individual("10.3.255.9"), 0) == 100 * s);  // the 1024th /24
  // Expired bans make room.
  CHECK(bans.place({block("192.0.2.0/24"), 100 * s, 200 * s, ""}, 100 * s) ==
        bans::manual_bans::placed::added);
  CHECK(bans.list(100 * s).size() == 1);
}

TEST_CASE("readers see a ban either whole or not at all while it changes", "[bans]") {
  // The request path reads without a lock while the admin thread places and lifts: a reader
  // must never see a ban on an address no ban covers, nor miss one that stays.
  bans::manual_bans bans;
  REQUIRE(bans.place({block("198.51.100.0/24"), 0, 1000 * s, ""}, 0) ==
          bans::manual_bans::placed::added);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::thread reader([&] {
    while (!stop.load()) {
      if (bans.banned_until(individual("198.51.100.1"), 1 * s) != 1000 * s) ++wrong;
      if (bans.banned_until(individual("192.0.2.1"), 1 * s)) ++wrong;
    }
  });
  for (int i = 0; i < 20'000; ++i) {
    const std::string a = core::address::from_v4(0x0b000000u + (i % 500) * 256).to_string();
    bans.place({block(a + "/24"), 0, 1000 * s, ""}, 0);
    if (i % 3 == 0) bans.lift(block(a + "/24"), 0);
  }
  stop = true;
  reader.join();
  CHECK(wrong == 0);
}

TEST_CASE("forgetting a block drops its counters and automatic bans, and no others", "[bans]") {
  pow::counter_settings cs;
  pow::violation_tables t(cs, 1);
  const pow::reason_rule rule{true, true, 2, 60 * s, 600 * s};
  for (const char* a : {"198.51.100.1", "198.51.100.2", "198.51.101.1"}) {
    t.record(individual(a), network(a), 0, rule, 0);
    t.record(individual(a), network(a), 0, rule, 0);  // the second bans
    REQUIRE(t.banned_until(individual(a), 1 * s));
  }
  const auto f = t.forget(block("198.51.100.0/24"), {}, 1 * s);
  CHECK(f.individual == 2);
  CHECK(f.network == 1);
  CHECK(f.bans == 2);
  CHECK_FALSE(t.banned_until(individual("198.51.100.1"), 1 * s));
  CHECK(t.requirement(individual("198.51.100.2"), network("198.51.100.2"), 1 * s) == 0);
  CHECK(t.describe(individual("198.51.100.1"), network("198.51.100.1"), 1 * s).bans == 0);
  CHECK(t.banned_until(individual("198.51.101.1"), 1 * s));
  CHECK(t.requirement(individual("198.51.101.1"), network("198.51.101.1"), 1 * s) == 2);

  // A block narrower than a network also clears the network that holds it.
  const auto g = t.forget(block("198.51.101.0/28"), {}, 1 * s);
  CHECK(g.individual == 1);
  CHECK(g.network == 1);
  CHECK(g.bans == 1);
  CHECK(t.bans(1 * s).empty());
}
