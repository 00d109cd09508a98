// The state file's bytes (gateway/app/state_file.*): every part written and read back into fresh
// tables as a restart reads it, what expired meanwhile dropped, reason counts following their
// names into other slots, and what a damaged file gets.

#include <catch2/catch.hpp>

#include <string>

#include "gateway/app/override_json.hpp"
#include "gateway/app/state_file.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/limit/memory_store.hpp"

using namespace tollgate;

namespace {

constexpr core::nanos second = 1'000'000'000;
constexpr core::nanos now = 1'764'300'000 * second;

struct tables {
  config::pow_settings settings;
  config::pow_counters_config counters;
  policy::pow_state pow{"secret", settings, counters};
  policy::tier_memory tiers;
  policy::override_book overrides;
  app::state_parts parts() { return {pow, tiers, overrides}; }
};

const pow::subject client{0x7f000001, static_cast<std::uint8_t>(core::level::ipv4_individual)};
const pow::subject network{0x7f000000, static_cast<std::uint8_t>(core::level::ipv4_network)};

}  // namespace

TEST_CASE("every part of a client's standing is read back as it was written", "[state]") {
  tables a;
  // Reason slots in one order here...
  const std::size_t abuse = a.pow.slot("abuse");
  a.pow.slot("other");
  const pow::reason_rule rule{true, false, 2, 60 * second, 3600 * second};
  CHECK(!a.pow.violations().record(client, network, abuse, rule, now - 10 * second));
  CHECK(a.pow.violations().record(client, network, abuse, rule, now - 5 * second));
  a.pow.manual_bans().place({{core::family::v4, 0x7f000000, 24}, now, now + 3600 * second, "hand"},
                            now);
  pow::penalty_rules ladder;
  ladder.decay_points = 1;
  ladder.decay_interval = 60 * second;
  ladder.steps.push_back({10, pow::penalty_action::throttle, 0.5, 0});
  a.pow.penalties().add(client, 12, now, ladder);
  CHECK(a.pow.replays().spend("challenge-spent", now / second + 60, now / second));
  CHECK(a.pow.replays().spend("challenge-old", now / second + 1, now / second));
  a.tiers.set(client, "gold", now + 60 * second);
  a.tiers.set(network, "ended", now + second);
  std::string error;
  const auto o =
      app::override_from_json(R"({"limit":"per_key","key":"k1","tier":"gold"})", now, false, error);
  INFO(error);
  REQUIRE(o);
  REQUIRE(a.overrides.put(*o) == policy::override_book::placed::added);

  auto written = a.parts();
  const std::string bytes = app::encode_state(written, now);
  tables b;
  b.pow.slot("other");  // ... in another order after the restart
  auto parts = b.parts();
  const core::nanos later = now + 2 * second;  // "challenge-old" and "ended" are over
  const app::state_read r = app::decode_state(bytes, parts, later);
  INFO(r.error);
  REQUIRE(r.error.empty());
  CHECK(r.sections == 9);
  CHECK(r.written == now);
  CHECK(b.pow.violations().banned_until(client, later) == now - 5 * second + 60 * second);
  CHECK(b.pow.violations().requirement(client, network, later) == 2);
  const auto view = b.pow.violations().describe(client, network, later);
  CHECK(view.bans == 1);
  // One more violation of "abuse" bans again, for twice as long: the history came along, and
  // the count sits in the slot "abuse" has now.
  const std::size_t abuse_now = b.pow.slot("abuse");
  CHECK(abuse_now != abuse);
  b.pow.violations().lift(client, later);
  CHECK(!b.pow.violations().record(client, network, abuse_now, rule, later));
  CHECK(b.pow.violations().record(client, network, abuse_now, rule, later) == later + 120 * second);
  CHECK(b.pow.manual_bans().banned_until(client, later) == now + 3600 * second);
  CHECK(b.pow.penalties().at(client, later, ladder).step == 0);
  CHECK(b.pow.replays().spent("challenge-spent"));
  CHECK(!b.pow.replays().spent("challenge-old"));
  std::string tier;
  CHECK(b.tiers.find(client, later, tier) == "gold");
  CHECK(b.tiers.size() == 1);
  const auto kept = b.overrides.get(o->id);
  REQUIRE(kept);
  CHECK(kept->tier == "gold");
  CHECK(kept->created == now);
}

TEST_CASE("a damaged state file applies nothing and says why", "[state]") {
  tables a;
  a.pow.manual_bans().place({{core::family::v4, 0x7f000100, 24}, now, now + 3600 * second, ""},
                            now);
  auto parts = a.parts();
  const std::string good = app::encode_state(parts, now);
  for (std::size_t cut : {std::size_t{0}, std::size_t{10}, good.size() - 1}) {
    tables b;
    auto p = b.parts();
    const auto r = app::decode_state(good.substr(0, cut), p, now);
    INFO(cut << ": " << r.error);
    CHECK(!r.error.empty());
    CHECK(b.pow.manual_bans().list(now).empty());
  }
  for (std::size_t at = 16; at < good.size(); at += 7) {
    std::string bad = good;
    bad[at] ^= 0x40;
    tables b;
    auto p = b.parts();
    const auto r = app::decode_state(bad, p, now);
    INFO(at << ": " << r.error);
    CHECK(!r.error.empty());
    CHECK(b.pow.manual_bans().list(now).empty());
  }
}

TEST_CASE("quota counts, the identity key and forced attack levels come back", "[state]") {
  tables a;
  limit::memory_store limits_a({1000, 1000, 1000, 1000, 1000}, 1);
  const std::uint32_t daily = limit::scope_of("api/daily/header:x-api-key");
  const std::uint32_t gone = limit::scope_of("api/gone/header:x-api-key");
  const std::uint32_t burst = limit::scope_of("api/burst/header:x-api-key");
  const core::nanos day_end = now + 3600 * second;
  const core::nanos live[2] = {41, day_end};
  const core::nanos ended[2] = {7, now - second};
  limits_a.table(limit::keyed_table).restore(0xabc, daily, live, now);
  limits_a.table(limit::keyed_table).restore(0xdef, daily, ended, now);
  limits_a.table(limit::keyed_table).restore(0xabc, gone, live, now);
  limits_a.table(limit::keyed_table).restore(0xabc, burst, live, now);  // a GCRA limit's tats
  auto written = a.parts();
  written.identity_key = {0x1111, 0x2222};
  written.limits = &limits_a;
  written.quotas = {{limit::keyed_table, daily}, {limit::keyed_table, gone}};
  written.forced = {{"auth", 2, 0}, {"api", 3, now + 60 * second}, {"old", 1, now + second}};
  const std::string bytes = app::encode_state(written, now);

  const auto key = app::state_identity_key(bytes);
  REQUIRE(key);
  CHECK(key->k0 == 0x1111);
  CHECK(key->k1 == 0x2222);
  std::string damaged = bytes;
  damaged[damaged.size() / 2] ^= 1;
  CHECK(!app::state_identity_key(damaged));

  tables b;
  limit::memory_store limits_b({1000, 1000, 1000, 1000, 1000}, 2);  // another table seed
  auto parts = b.parts();
  parts.limits = &limits_b;
  parts.quotas = {{limit::keyed_table, daily}};  // "gone" was removed from the configuration
  const core::nanos later = now + 2 * second;
  const app::state_read r = app::decode_state(bytes, parts, later);
  INFO(r.error);
  REQUIRE(r.error.empty());
  auto& t = limits_b.table(limit::keyed_table);
  const auto count = t.lookup(0xabc, daily);
  REQUIRE(count);
  CHECK(count->tat[0] == 41);
  CHECK(count->tat[1] == day_end);
  CHECK(!t.lookup(0xdef, daily));  // its window had ended
  CHECK(!t.lookup(0xabc, gone));   // no longer a quota here
  CHECK(!t.lookup(0xabc, burst));  // never a quota
  CHECK(t.size() == 1);
  REQUIRE(parts.forced.size() == 2);  // "old" ran its course
  CHECK(parts.forced[0].category == "auth");
  CHECK(parts.forced[0].level == 2);
  CHECK(parts.forced[0].until == 0);
  CHECK(parts.forced[1].category == "api");
  CHECK(parts.forced[1].until == now + 60 * second);
}
