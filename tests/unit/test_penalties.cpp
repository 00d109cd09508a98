// The penalty ladder's table (docs/design.md §16) with an injected clock: points, their lazy
// decay, the step a score reaches, a timed step that outlasts its points, the census the
// metrics read, and the ladder as a policy file writes it.

#include <catch2/catch.hpp>

#include "gateway/config/error.hpp"
#include "gateway/config/policy.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/pow/penalties.hpp"

using namespace tollgate;
using pow::penalty_action;

namespace {

const core::nanos t0 = 1'735'000'000 * core::ns_per_s;
constexpr core::nanos minute = 60 * core::ns_per_s;

/// The ladder of docs/design.md §16, compiled from its policy text.
const char* const ladder_text = R"(
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 20 } }
violations:
  failed_auth: { levels: [individual] }
penalties:
  points: { rate_limited: 1, pow_failed: 2, failed_auth: 3, token_invalid: 3 }
  decay: 1/10m
  steps:
    - { at: 5,  action: warn }
    - { at: 10, action: throttle, factor: 0.5,  for: 5m }
    - { at: 20, action: throttle, factor: 0.25, for: 30m }
    - { at: 30, action: read_only, for: 2h }
    - { at: 40, action: pow }
    - { at: 60, action: ban, for: 24h }
)";

struct ladder {
  config::policy_config cfg = config::load_policy_text(ladder_text, "ladder.yaml");
  policy::compiled_policy compiled{cfg, {1, 2}};
  const pow::penalty_rules& rules = *compiled.penalties();
};

const pow::subject alice{0x0a000001, 0}, bob{0x0a000002, 0};

std::string load_error(const std::string& text) {
  try {
    config::load_policy_text(text, "p.yaml");
  } catch (const config::error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("penalties: the policy's ladder compiles to points by reason, steps and factors") {
  ladder l;
  const auto& r = l.rules;
  const auto& v = l.compiled.violations();
  CHECK(r.rate_limited == 1);
  CHECK(r.points[*v.find("pow_failed")] == 2);
  CHECK(r.points[*v.find("failed_auth")] == 3);
  CHECK(r.points[*v.find("token_invalid")] == 3);
  CHECK(r.decay_interval == 10 * minute);
  CHECK(r.decay_points == 1);
  REQUIRE(r.steps.size() == 6);
  CHECK(r.steps[1].action == penalty_action::throttle);
  CHECK(r.steps[1].hold == 5 * minute);
  CHECK(r.steps[2].variant == 1);
  CHECK(r.factors == std::vector<double>{0.5, 0.25});
  CHECK(r.steps[4].hold == 0);  // pow: while the score holds
  // The throttled limits are compiled per factor: burst 20 x 0.5 and x 0.25, rate alike.
  const auto& c = *l.compiled.find("general");
  REQUIRE(c.throttled.size() == 2);
  CHECK(c.throttled_of(0, policy::no_tier)[0].tiers[0].burst == 10);
  CHECK(c.throttled_of(1, policy::no_tier)[0].tiers[0].burst == 5);
  CHECK(c.throttled_of(1, policy::no_tier)[0].tiers[0].emission ==
        4 * c.limits[0].tiers[0].emission);
  CHECK(c.throttled_of(1, policy::no_tier)[0].state_name == c.limits[0].state_name);
}

TEST_CASE("penalties: a client climbs by points and stands at the highest step reached") {
  ladder l;
  pow::penalty_table t(1000);
  CHECK(t.at(alice, t0, l.rules).step == -1);
  auto c = t.add(alice, 4, t0, l.rules);
  CHECK(c.after.score == 4);
  CHECK_FALSE(c.entered());
  c = t.add(alice, 1, t0, l.rules);
  CHECK(c.entered());
  CHECK(c.after.action(l.rules) == penalty_action::warn);
  CHECK(c.after.until == 0);  // warn holds while the score does
  // From warn straight past the first throttle to the second: the highest is entered.
  c = t.add(alice, 16, t0, l.rules);
  CHECK(c.after.step == 2);
  CHECK(c.after.until == t0 + 30 * minute);
  CHECK(t.at(bob, t0, l.rules).step == -1);  // one client's points are its own
  c = t.add(alice, 40, t0, l.rules);
  CHECK(c.after.action(l.rules) == penalty_action::ban);
  CHECK(c.after.until == t0 + 24 * 60 * minute);
}

TEST_CASE("penalties: points decay lazily, one per interval without new ones") {
  ladder l;
  pow::penalty_table t(1000);
  t.add(alice, 7, t0, l.rules);
  CHECK(t.at(alice, t0 + 10 * minute - 1, l.rules).score == 7);
  CHECK(t.at(alice, t0 + 10 * minute, l.rules).score == 6);
  CHECK(t.at(alice, t0 + 20 * minute, l.rules).score == 5);
  CHECK(t.at(alice, t0 + 20 * minute, l.rules).action(l.rules) == penalty_action::warn);
  CHECK(t.at(alice, t0 + 30 * minute, l.rules).step == -1);
  CHECK(t.at(alice, t0 + 200 * minute, l.rules).score == 0);
  // New points start the interval again from what is left.
  t.add(alice, 1, t0 + 25 * minute, l.rules);  // 7 - 2 + 1
  CHECK(t.at(alice, t0 + 34 * minute, l.rules).score == 6);
  CHECK(t.at(alice, t0 + 35 * minute, l.rules).score == 5);
}

TEST_CASE("penalties: a timed step lasts its `for` after entry even as points decay") {
  ladder l;
  pow::penalty_table t(1000);
  t.add(alice, 30, t0, l.rules);  // read_only for 2h
  // After 2 h the score is 30 - 12 = 18: by points a throttle; read_only held until then.
  CHECK(t.at(alice, t0 + 119 * minute, l.rules).action(l.rules) == penalty_action::read_only);
  CHECK(t.at(alice, t0 + 119 * minute, l.rules).until == t0 + 120 * minute);
  const auto after = t.at(alice, t0 + 120 * minute, l.rules);
  CHECK(after.action(l.rules) == penalty_action::throttle);
  CHECK(after.score == 18);
  CHECK(after.step == 1);
  // Held steps do not restart from points below them: 18 + 2 reaches step 2 anew.
  const auto c = t.add(alice, 2, t0 + 120 * minute, l.rules);
  CHECK(c.entered());
  CHECK(c.after.until == t0 + 150 * minute);
  // A held step is re-entered only from below: more points within it keep its end.
  const auto again = t.add(alice, 1, t0 + 121 * minute, l.rules);
  CHECK_FALSE(again.entered());
  CHECK(again.after.until == t0 + 150 * minute);
}

TEST_CASE("penalties: reset forgets a client, the census counts clients per step") {
  ladder l;
  pow::penalty_table t(1000);
  t.add(alice, 12, t0, l.rules);
  t.add(bob, 5, t0, l.rules);
  t.add(pow::subject{3, 0}, 1, t0, l.rules);
  auto n = t.census(t0, l.rules);
  CHECK(n[static_cast<std::size_t>(penalty_action::none)] == 1);
  CHECK(n[static_cast<std::size_t>(penalty_action::warn)] == 1);
  CHECK(n[static_cast<std::size_t>(penalty_action::throttle)] == 1);
  CHECK(t.reset(alice));
  CHECK_FALSE(t.reset(alice));
  CHECK(t.at(alice, t0, l.rules).score == 0);
  n = t.census(t0, l.rules);
  CHECK(n[static_cast<std::size_t>(penalty_action::throttle)] == 0);
  // Bounded: a flood of clients keeps at most the capacity.
  pow::penalty_table small(16);
  for (std::uint64_t k = 0; k < 1000; ++k)
    small.add(pow::subject{k, 0}, 1, t0, l.rules);
  CHECK(small.size() <= 16);
  // Scores saturate rather than wrap.
  small.add(alice, 4'000'000'000u, t0, l.rules);
  small.add(alice, 4'000'000'000u, t0, l.rules);
  CHECK(small.at(alice, t0, l.rules).action(l.rules) == penalty_action::ban);
}

TEST_CASE("penalties: a bad ladder names its file, line and key") {
  const std::string base = "categories: {}\npenalties:\n";
  const std::string points = "  points: { rate_limited: 1 }\n";
  struct row {
    const char* text;
    const char* error;
  };
  const row rows[] = {
      {"  points: { nonsense: 1 }\n  steps: [{ at: 1, action: warn }]\n",
       "unknown violation reason 'nonsense'"},
      {"  steps: [{ at: 5, action: warn }, { at: 5, action: pow }]\n",
       "each `at` above the one before"},
      {"  steps: [{ at: 5, action: warn, factor: 0.5 }]\n", "only a throttle step has a factor"},
      {"  steps: [{ at: 5, action: throttle }]\n", "factor"},
      {"  steps: [{ at: 5, action: throttle, factor: 1.5 }]\n", "from 0.01 to 0.99"},
      {"  steps: [{ at: 5, action: pow, for: 1m }]\n", "leave out `for`"},
      {"  steps: [{ at: 5, action: jail }]\n", "expected warn, throttle, read_only, pow or ban"},
      {"  steps: []\n", "name at least one step"},
      {"  decay: 1/never\n  steps: [{ at: 1, action: warn }]\n", "points per duration"},
      {"  decay: x/10m\n  steps: [{ at: 1, action: warn }]\n", "points per duration"},
      {"  steps: [{ at: 0, action: warn }]\n", "penalties.steps"},
      {"  limit: 3\n  steps: [{ at: 1, action: warn }]\n", "limit"},
      {"  steps: [{ at: 1, action: warn }]\n  points: { rate_limited: -1 }\n",
       "points.rate_limited"},
  };
  for (const auto& x : rows) {
    INFO(x.text);
    const std::string text = x.text;
    const std::string e =
        load_error(base + (text.find("points") == std::string::npos ? points : "") + text);
    INFO(e);
    CHECK(e.find("p.yaml:") != std::string::npos);
    CHECK(e.find(x.error) != std::string::npos);
  }
  // rate_limited, pow_failed and token_invalid need no definition.
  CHECK(load_error(base + "  points: { rate_limited: 1, pow_failed: 1, token_invalid: 1 }\n"
                          "  steps: [{ at: 1, action: warn }]\n") == "");
  CHECK(load_error(base + points + "  steps: [{ at: 1, action: warn }]\n") == "");
}
