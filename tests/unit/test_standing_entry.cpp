// The entries replicas share a client's standing through (gateway/policy/standing_entry.*):
// each kind written and read back, and what a foreign or damaged entry gets.

#include <catch2/catch.hpp>

#include <string>

#include "gateway/policy/standing_entry.hpp"

using namespace tollgate;
namespace entry = policy::standing_entry;

namespace {

constexpr core::nanos at = 1'764'300'000'000'000'000;

std::optional<entry::entry> read(const std::string& text) {
  std::string error;
  auto e = entry::parse(text, error);
  if (!e) CHECK(!error.empty());
  return e;
}

}  // namespace

TEST_CASE("a violation entry carries its client, rule and reason", "[standing]") {
  policy::client_subjects who;
  who.individual = {0x7f000307, static_cast<std::uint8_t>(core::level::ipv4_individual)};
  who.network = {0x7f000300, static_cast<std::uint8_t>(core::level::ipv4_network)};
  const pow::reason_rule rule{true, false, 4, 60'000'000'000, 3'600'000'000'000};
  const std::string text = entry::violation("host-a/17", who, "failed_auth", rule, at);
  CHECK(text ==
        "1 v host-a/17 1764300000000000000 0 2130707207 1 2130707200 1 0 4 60000000000 "
        "3600000000000 failed_auth");
  const auto e = read(text);
  REQUIRE(e);
  CHECK(e->kind == 'v');
  CHECK(e->origin == "host-a/17");
  CHECK(e->at == at);
  CHECK(e->who.individual.key == 0x7f000307);
  CHECK(e->who.network.level == static_cast<std::uint8_t>(core::level::ipv4_network));
  CHECK(e->rule.individual);
  CHECK(!e->rule.network);
  CHECK(e->rule.ban_threshold == 4);
  CHECK(e->rule.ban_duration == 60'000'000'000);
  CHECK(e->rule.ban_max_duration == 3'600'000'000'000);
  CHECK(e->reason == "failed_auth");
}

TEST_CASE("ban, lift and reset entries carry their block", "[standing]") {
  const core::key_block v4{core::family::v4, 0x7f000400, 24};
  const bans::manual_ban b{v4, at, at + 3'600'000'000'000, "load test, by hand"};
  auto e = read(entry::ban("h/1", b));
  REQUIRE(e);
  CHECK(e->kind == 'b');
  CHECK(e->until == b.until);
  CHECK(e->block.net == v4.net);
  CHECK(e->block.prefix == 24);
  CHECK(e->reason == "load test, by hand");

  const core::key_block v6{core::family::v6, 0x20010db800010000, 48};
  e = read(entry::lift("h/1", v6, at));
  REQUIRE(e);
  CHECK(e->kind == 'u');
  CHECK(e->block.family == core::family::v6);
  CHECK(e->block.net == v6.net);
  e = read(entry::reset("h/2", v4, at));
  REQUIRE(e);
  CHECK(e->kind == 'r');
  CHECK(e->origin == "h/2");
}

TEST_CASE("a points entry carries a line per client, a clear entry one client", "[standing]") {
  const pow::subject address{0x7f000307, 0};
  const pow::subject identity{0x1234567890abcdefULL, 0xfe};
  const std::string text =
      entry::points("h/1", at, {{address, 3, "address 127.0.3.7"}, {identity, 7, "identity a\nb"}});
  CHECK(text ==
        "1 p h/1 1764300000000000000\n0 2130707207 3 address 127.0.3.7\n254 "
        "1311768467294899695 7 identity a?b");
  auto e = read(text);
  REQUIRE(e);
  CHECK(e->kind == 'p');
  REQUIRE(e->points.size() == 2);
  CHECK(e->points[0].who == address);
  CHECK(e->points[0].points == 3);
  CHECK(e->points[0].name == "address 127.0.3.7");
  CHECK(e->points[1].who == identity);
  CHECK(e->points[1].name == "identity a?b");  // a newline in an identity cannot split it
  e = read(entry::clear_client("h/1", identity, at));
  REQUIRE(e);
  CHECK(e->kind == 'k');
  CHECK(e->who.individual == identity);

  std::string many = "1 p h/1 1";
  for (std::size_t i = 0; i <= entry::max_point_records; ++i)
    many += "\n0 " + std::to_string(i) + " 1 x";
  CHECK(!read(many));                         // past max_point_records
  CHECK(!read("1 p h/1 1"));                  // no client
  CHECK(!read("1 p h/1 1\n"));                // an empty line
  CHECK(!read("1 p h/1 1\n9 1 1 x"));         // a level that is not a ladder's
  CHECK(!read("1 p h/1 1\n0 1 1000001 x"));   // more points than one entry carries
  CHECK(!read("1 r h/1 1 4/32/1\n0 1 1 x"));  // lines on another kind
}

TEST_CASE("an attack entry forces or releases a category's level", "[standing]") {
  auto e = read(entry::attack("h/1", "api.example/general", 2, at + 60, at));
  REQUIRE(e);
  CHECK(e->kind == 'a');
  CHECK(e->level == 2);
  CHECK(e->until == at + 60);
  CHECK(e->reason == "api.example/general");
  e = read(entry::attack("h/1", "general", entry::released, 0, at));
  REQUIRE(e);
  CHECK(e->level == entry::released);
  CHECK(!read("1 a h/1 1 4 0 general"));    // no level 4
  CHECK(!read("1 a h/1 1 2 0 "));           // no category
  CHECK(!read("1 a h/1 1 2 0 two words"));  // a category with a space
}

TEST_CASE("foreign, damaged and hostile entries are refused with a reason", "[standing]") {
  for (const std::string text : {
           "",                                                  // nothing
           "2 r h/1 1 4/32/1",                                  // another version
           "1 x h/1 1 4/32/1",                                  // an unknown kind
           "1 r  1 4/32/1",                                     // no origin
           "1 r h/1 -5 4/32/1",                                 // a negative time
           "1 r h/1 1 4/24/2130707459",                         // host bits set
           "1 r h/1 1 4/33/0",                                  // a prefix past 32
           "1 r h/1 1 5/24/0",                                  // no such family
           "1 r h/1 1 4/32/1 more",                             // trailing fields
           "1 r h/1 1 4/32/4294967296",                         // past 32 bits
           "1 v h/1 1 7 1 1 1 1 0 4 1 1 abuse",                 // a level out of range
           "1 v h/1 1 0 1 1 1 2 0 4 1 1 abuse",                 // a flag that is not 0 or 1
           "1 v h/1 1 0 1 1 1 1 0 4 1 1 ",                      // no reason
           "1 v h/1 1 0 1 1 1 1 0 4 1 1 two words",             // a reason with a space
           "1 v h/1 1 0 1 1 1 1 0 4 1 1 bad\x01reason",         // a control character
           "1 b h/1 1 2 4/32/1 note\nsecond line",              // a note across lines
           "1 v h/1 1 0 18446744073709551616 1 1 1 0 4 1 1 a",  // past 64 bits
       }) {
    INFO(text);
    CHECK(!read(text));
  }
}
