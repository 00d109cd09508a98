// Attack mode's monitor (docs/design.md §16) fed ticks with an explicit clock, as the gateway
// and the simulator feed it: the baseline learnt from normal traffic only and never below its
// floor, a level entered after `sustain` above its multiple, stepping down after `cool_down`,
// the limits restored in steps, levels forced and released; and the configuration's errors.

#include <catch2/catch.hpp>

#include "gateway/config/error.hpp"
#include "gateway/config/policy.hpp"
#include "gateway/policy/attack.hpp"
#include "gateway/policy/compiled_policy.hpp"

using namespace tollgate;

namespace {

constexpr core::nanos s = core::ns_per_s;
const core::nanos t0 = 1'735'000'000 * s;

const char* const policy_text = R"(
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 20 } }
    pow: { enabled: true }
    attack_mode:
      baseline: { window: 60s, floor: 10/s }
      sustain: 3s
      levels:
        elevated: { above: 2x, limits: 0.75 }
        high:     { above: 5x, limits: 0.5, pow: uncleared }
        severe:   { above: 10x, admit: [allowed, cleared] }
      cool_down: 8s
      restore: 25%
)";

/// A monitor fed `rate` requests a second, one tick a second.
struct feed {
  config::policy_config cfg = config::load_policy_text(policy_text, "p.yaml");
  policy::compiled_policy compiled{cfg, {1, 2}};
  const policy::attack_rules& rules = *compiled.find("general")->attack;
  policy::attack_monitor m;
  core::nanos now = t0;
  std::uint64_t total = 0;
  std::vector<policy::attack_monitor::transition> seen;

  feed() { m.tick(now, total, rules); }
  /// `seconds` ticks at `rate`; the transitions they made.
  void run(int seconds, std::uint64_t rate) {
    for (int i = 0; i < seconds; ++i) {
      now += s;
      total += rate;
      if (auto t = m.tick(now, total, rules)) seen.push_back(*t);
    }
  }
  float factor() const { return m.status(now, rules).factor; }
};

std::string load_error(const std::string& text) {
  try {
    config::load_policy_text(text, "p.yaml");
  } catch (const config::error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("attack mode: the levels compile, a level without limits keeps the tightest below") {
  feed f;
  const auto& r = f.rules;
  CHECK(r.sustain == 3 * s);
  CHECK(r.floor == 10);
  CHECK(r.restore_step() == 2 * s);
  CHECK(r.levels[1].limits == 0.75);
  CHECK(r.levels[2].pow);
  CHECK(r.levels[3].limits == 0.5);
  CHECK(r.levels[3].admit_only);
  CHECK(r.levels[3].admit_cleared);
}

TEST_CASE("attack mode: the baseline learns normal traffic and never goes below the floor") {
  feed silent;
  silent.run(30, 0);  // a gateway up before its traffic: silence is not learnt
  silent.run(1, 40);
  CHECK(silent.m.baseline(silent.rules) == 40);  // the first traffic is the first baseline
  CHECK(silent.m.level() == 0);
  feed f;
  f.run(5, 4);
  CHECK(f.m.baseline(f.rules) == 10);  // 4/s learnt, the floor holds
  f.run(300, 15);
  CHECK(f.m.baseline(f.rules) == Approx(15).epsilon(0.02));
  CHECK(f.m.level() == 0);
  CHECK(f.seen.empty());
  // A rise above a level's multiple is not learnt (it may be an attack starting)...
  f.run(2, 45);
  CHECK(f.m.baseline(f.rules) == Approx(15).epsilon(0.02));
  // ...unless an operator holds normal: then it is normal traffic.
  f.m.force(0, f.now, 0, f.rules);
  f.run(300, 45);
  CHECK(f.m.baseline(f.rules) == Approx(45).epsilon(0.02));
  CHECK(f.m.level() == 0);
}

TEST_CASE("attack mode: entered after sustain, stepped down after cool_down, limits restored") {
  feed f;
  f.run(120, 20);
  const double base = f.m.baseline(f.rules);
  // 5.5x: above elevated and high. Not yet after 2 s; high at the 3rd second of it.
  f.run(3, 110);
  CHECK(f.m.level() == 0);
  f.run(1, 110);
  REQUIRE(f.seen.size() == 1);
  CHECK(f.seen[0].from == 0);
  CHECK(f.seen[0].to == 2);
  CHECK(f.seen[0].why.find("the baseline") != std::string::npos);
  CHECK(f.factor() == 0.5f);
  // The attack is not learnt.
  f.run(30, 110);
  CHECK(f.m.baseline(f.rules) == Approx(base));
  CHECK(f.m.level() == 2);
  // Back to normal: 8 s of calm step down to elevated, the limits coming back 25% of the way
  // at once and 25% more every 2 s.
  f.run(8, 20);
  CHECK(f.m.level() == 2);
  f.run(1, 20);
  REQUIRE(f.seen.size() == 2);
  CHECK(f.seen[1].to == 1);
  CHECK(f.factor() == Approx(0.5625));
  f.run(2, 20);
  CHECK(f.factor() == Approx(0.625));
  f.run(4, 20);
  CHECK(f.factor() == Approx(0.75));
  // And to normal after another cool_down (counted from the step down), then to 1 in steps.
  f.run(2, 20);
  REQUIRE(f.seen.size() == 3);
  CHECK(f.seen[2].to == 0);
  CHECK(f.factor() == Approx(0.8125));
  f.run(6, 20);
  CHECK(f.factor() == 1.0f);
}

TEST_CASE("attack mode: a burst shorter than sustain, or below every level, changes nothing") {
  feed f;
  f.run(60, 20);
  f.run(2, 1000);  // 50x, for 2 s only
  f.run(10, 20);
  f.run(60, 39);  // just under 2x
  CHECK(f.seen.empty());
  CHECK(f.m.level() == 0);
  // Straight to severe when the rate is far above: the highest level sustained.
  f.run(4, 1000);
  REQUIRE(f.seen.size() == 1);
  CHECK(f.seen[0].to == 3);
}

TEST_CASE("attack mode: forced until released or until its time") {
  feed f;
  f.run(60, 20);
  auto t = f.m.force(3, f.now, 0, f.rules);
  REQUIRE(t);
  CHECK(t->to == 3);
  CHECK(t->why == "forced by an operator");
  f.run(60, 20);  // normal traffic: a forced level stays
  CHECK(f.m.level() == 3);
  CHECK(f.m.status(f.now, f.rules).forced);
  t = f.m.release(f.now, f.rules);
  REQUIRE(t);
  CHECK(t->to == 0);
  CHECK_FALSE(f.m.forced());
  // With a time: over at the first tick past it.
  f.m.force(1, f.now, f.now + 5 * s, f.rules);
  f.run(4, 20);
  CHECK(f.m.level() == 1);
  f.run(1, 20);
  CHECK(f.m.level() == 0);
  // Forcing normal holds it through an attack (and learns from it, a little).
  f.m.force(0, f.now, 0, f.rules);
  f.run(4, 1000);
  CHECK(f.m.level() == 0);
  // Released during it: the level the rate has kept up for sustain.
  t = f.m.release(f.now, f.rules);
  REQUIRE(t);
  CHECK(t->to == 3);
}

TEST_CASE("attack mode: the board packs a status in one word") {
  policy::attack_board b(3);
  CHECK(b.get(1).level == 0);
  CHECK(b.get(1).factor == 1.0f);
  b.set(1, {2, true, 0.625f});
  CHECK(b.get(1).level == 2);
  CHECK(b.get(1).forced);
  CHECK(b.get(1).factor == 0.625f);
  CHECK(b.get(0).level == 0);
  CHECK(b.get(7).level == 0);  // past the end: normal
}

TEST_CASE("attack mode: a bad attack_mode names its file, line and key") {
  const std::string head =
      "categories:\n  general:\n    pow: { enabled: true }\n    attack_mode:\n";
  struct row {
    const char* text;
    const char* error;
  };
  const row rows[] = {
      {"      levels: {}\n", "name at least one of elevated, high, severe"},
      {"      levels: { elevated: { above: 2 } }\n", "a multiple of the baseline such as 2x"},
      {"      levels: { elevated: { above: 1x } }\n", "from 1.1x"},
      {"      levels: { elevated: { above: 5x }, high: { above: 3x } }\n",
       "higher than the level's below it"},
      {"      levels: { elevated: { above: 2x, limits: 1.5 } }\n", "from 0.01 to 1"},
      {"      levels: { high: { above: 2x, pow: always } }\n", "expected uncleared"},
      {"      levels: { severe: { above: 2x, admit: [everyone] } }\n",
       "expected allowed or cleared"},
      {"      levels: { calm: { above: 2x } }\n", "unknown key"},
      {"      restore: 25\n      levels: { high: { above: 2x } }\n", "such as 25%"},
      {"      restore: 0%\n      levels: { high: { above: 2x } }\n", "such as 25%"},
      {"      sustain: 0s\n      levels: { high: { above: 2x } }\n", "from 1s to 1h"},
      {"      cool_down: 1s\n      levels: { high: { above: 2x } }\n", "from 4s to 24h"},
      {"      baseline: { window: 1s }\n      levels: { high: { above: 2x } }\n", "from 10s"},
      {"      baseline: { floor: 5 }\n      levels: { high: { above: 2x } }\n", "invalid rate"},
  };
  for (const auto& x : rows) {
    INFO(x.text);
    const std::string e = load_error(head + x.text);
    INFO(e);
    CHECK(e.find("p.yaml:") != std::string::npos);
    CHECK(e.find("attack_mode") != std::string::npos);
    CHECK(e.find(x.error) != std::string::npos);
  }
  // Proofs of uncleared clients need a category that asks proofs.
  const std::string e = load_error(
      "categories:\n  general:\n    attack_mode:\n      levels: { high: { above: 2x, pow: "
      "uncleared } }\n");
  CHECK(e.find("set pow.enabled") != std::string::npos);
}
