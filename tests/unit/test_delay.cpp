// Delay instead of reject (docs/design.md §16): the GCRA with a delay, the in-process store's
// decisions with holds, the per-worker bound max_delayed, the script call's delays and the
// configuration key on_excess.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gateway/config/error.hpp"
#include "gateway/config/policy.hpp"
#include "gateway/limit/gcra.hpp"
#include "gateway/limit/held.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/store/over_limit_cache.hpp"
#include "gateway/store/redis_wire.hpp"
#include "support.hpp"

using namespace tollgate;
using namespace tollgate::limit;
using namespace tollgate::test;

namespace {

const nanos t0 = 1'700'000'000 * sec;

/// An individual-address limit of 10/s burst 5 (T = 100ms, tau = 400ms) whose on_excess holds
/// requests up to `delay`.
limit_spec delayed_limit(nanos delay, std::uint32_t max_delayed = 1000, std::uint32_t scope = 1) {
  limit_spec s = group(params(10, sec, 5), {}, scope);
  s.delay = delay;
  s.max_delayed = max_delayed;
  return s;
}

}  // namespace

TEST_CASE("gcra_check with a delay admits a wait within it and tells the wait", "[gcra][delay]") {
  const gcra_params p = params(10, sec, 5);  // T = 100ms, tau = 400ms
  const nanos delay = 250 * ms;
  struct row {
    nanos tat;  // stored, relative to now
    bool allowed;
    nanos wait;
    nanos new_tat;  // relative to now
  };
  // A tat of now + 500ms is five requests' debt: the next one passes at now + 100ms.
  const std::vector<row> rows = {
      {0, true, 0, 100 * ms},                  // fresh
      {400 * ms, true, 0, 500 * ms},           // the fifth of a burst
      {500 * ms, true, 100 * ms, 600 * ms},    // sixth: held T
      {600 * ms, true, 200 * ms, 700 * ms},    // seventh: held 2T
      {650 * ms, true, 250 * ms, 750 * ms},    // exactly the delay
      {651 * ms, false, 251 * ms, 651 * ms},   // a millisecond past it
      {700 * ms, false, 300 * ms, 700 * ms},   // the eighth of ten at once
      {750 * ms, false, 350 * ms, 750 * ms},   // the clamp's edge: tau + T + delay
      {5000 * ms, false, 350 * ms, 750 * ms},  // clamped (a reload lowered the limit)
      {-3000 * ms, true, 0, 100 * ms},         // idle
  };
  for (const row& r : rows) {
    CAPTURE(r.tat / ms);
    const gcra_result g = gcra_check(t0 + r.tat, t0, 1, p, delay);
    CHECK(g.allowed == r.allowed);
    CHECK(g.wait == r.wait);
    CHECK(g.tat - t0 == r.new_tat);
  }
  // Without a delay the same states refuse as before, and the clamp is tau + T.
  CHECK_FALSE(gcra_check(t0 + 500 * ms, t0, 1, p).allowed);
  CHECK(gcra_check(t0 + 5000 * ms, t0, 1, p).wait == 100 * ms);
  // A cost of 2 waits for its last cell: tat + T - tau.
  const gcra_result two = gcra_check(t0 + 500 * ms, t0, 2, p, delay);
  CHECK(two.allowed);
  CHECK(two.wait == 200 * ms);
  CHECK(two.tat == t0 + 700 * ms);
}

TEST_CASE("held requests' debt is kept: the clamp widens by the delay", "[gcra][delay]") {
  // With the clamp at tau + T, the debt of seven requests at once (tat = now + 700ms) would be
  // cut to now + 500ms and the eighth admitted after 100ms: more than the limit allows.
  const gcra_params p = params(10, sec, 5);
  nanos tat = t0;
  int admitted = 0;
  for (int i = 0; i < 10; ++i) {
    const gcra_result r = gcra_check(tat, t0, 1, p, 250 * ms);
    if (!r.allowed) continue;
    ++admitted;
    tat = r.tat;
  }
  CHECK(admitted == 7);
  CHECK(tat == t0 + 700 * ms);
  // The eighth passes at t0 + 300ms (burst + 3 cells): asked 49ms in, it would wait 251ms,
  // past the delay; asked 50ms in, it is held the 250ms left.
  const gcra_result early = gcra_check(tat, t0 + 49 * ms, 1, p, 250 * ms);
  CHECK_FALSE(early.allowed);
  CHECK(early.wait == 251 * ms);
  const gcra_result later = gcra_check(tat, t0 + 50 * ms, 1, p, 250 * ms);
  CHECK(later.allowed);
  CHECK(later.wait == 250 * ms);
  CHECK(later.tat == t0 + 800 * ms);
}

TEST_CASE("the store holds the sixth and seventh of a burst of 5 by T and 2T, refuses the eighth",
          "[store][delay]") {
  memory_store store({}, 1);
  const limit_spec fine = delayed_limit(250 * ms);
  const auto keys = keys_of(address::parse("198.51.100.9").value(), {});
  std::vector<nanos> holds;
  int refused = 0;
  for (int i = 0; i < 10; ++i) {
    const decision d = store.decide(ipv4_request("198.51.100.9", &fine, nullptr, t0));
    if (!d.admitted) {
      ++refused;
      CHECK(d.hold == 0);
      CHECK(d.held == 0);
      REQUIRE(d.binding != no_binding);
      CHECK(d.limits[d.binding].wait == 300 * ms);  // when it would pass without a hold
      continue;
    }
    holds.push_back(d.hold);
    CHECK(d.held == (d.hold > 0 ? 1 : 0));
    CHECK(d.limits[0].wait == 0);  // an admitting tier has no wait, held or not
  }
  CHECK(holds == std::vector<nanos>{0, 0, 0, 0, 0, 100 * ms, 200 * ms});
  CHECK(refused == 3);
  // Committed at once, as at the instant each passes.
  CHECK(store.lookup(fine, keys.fine_key)->tat[0] == t0 + 700 * ms);
  // 100ms later one more cell has passed: a request is held 200ms again, then none.
  CHECK(store.decide(ipv4_request("198.51.100.9", &fine, nullptr, t0 + 100 * ms)).hold == 200 * ms);
  CHECK_FALSE(store.decide(ipv4_request("198.51.100.9", &fine, nullptr, t0 + 100 * ms)).admitted);
}

TEST_CASE("a hold is all-or-nothing over the request's limits", "[store][delay]") {
  memory_store store({}, 1);
  // Individual: burst 5 with a delay; network: 10/s burst 6, no on_excess.
  const limit_spec fine = delayed_limit(250 * ms);
  const limit_spec coarse = group(params(10, sec, 6), {}, 2, level::ipv4_network);
  const auto keys = keys_of(address::parse("198.51.100.9").value(), {});
  for (int i = 0; i < 5; ++i) {
    CHECK(store.decide(ipv4_request("198.51.100.9", &fine, &coarse, t0)).hold == 0);
  }
  // The sixth: held by the individual level, which the network level admits at once.
  const decision sixth = store.decide(ipv4_request("198.51.100.9", &fine, &coarse, t0));
  CHECK(sixth.admitted);
  CHECK(sixth.hold == 100 * ms);
  CHECK(sixth.held == 1);  // group 0 only
  // The seventh: the individual level would hold it 200ms, the network level refuses it (its
  // burst is spent and it has no delay). Nothing is committed, nothing held.
  const decision seventh = store.decide(ipv4_request("198.51.100.9", &fine, &coarse, t0));
  CHECK_FALSE(seventh.admitted);
  CHECK(seventh.hold == 0);
  CHECK(seventh.held == 0);
  CHECK(seventh.limits[seventh.binding].group == 1);
  CHECK(store.lookup(fine, keys.fine_key)->tat[0] == t0 + 600 * ms);
  CHECK(store.lookup(coarse, keys.coarse_key)->tat[0] == t0 + 600 * ms);

  // Both with delays: the request waits for the slower one.
  memory_store both({}, 1);
  limit_spec slow = group(params(5, sec, 1), {}, 3, level::ipv4_network);  // T = 200ms
  slow.delay = 500 * ms;
  slow.max_delayed = 10;
  CHECK(both.decide(ipv4_request("198.51.100.9", &fine, &slow, t0)).hold == 0);
  const decision d = both.decide(ipv4_request("198.51.100.9", &fine, &slow, t0));
  CHECK(d.admitted);
  CHECK(d.hold == 200 * ms);
  CHECK(d.held == 2);  // only the network level holds it
}

TEST_CASE("a shadowed limit never holds a request", "[store][delay]") {
  memory_store store({}, 1);
  limit_spec s = delayed_limit(250 * ms);
  s.shadow = true;
  for (int i = 0; i < 6; ++i) {
    const decision d = store.decide(ipv4_request("198.51.100.9", &s, nullptr, t0));
    CHECK(d.admitted);
    CHECK(d.hold == 0);
    CHECK_FALSE(d.shadow_limited);  // within its delay: it would have admitted it
  }
}

TEST_CASE("a worker at max_delayed under a limit asks without its delay", "[store][delay]") {
  memory_store store({}, 1);
  const limit_spec fine = delayed_limit(500 * ms, 2);
  hold_counts counts;
  for (int i = 0; i < 5; ++i) {
    held_places p;
    auto req = ipv4_request("198.51.100.9", &fine, nullptr, t0);
    p.take(counts, req);
    CHECK(req.no_delay == 0);
    CHECK(counts.taken(fine.scope) == 1);  // taken while the store decides
    const decision d = store.decide(req);
    p.keep(d.held);
    CHECK(d.hold == 0);
    CHECK(counts.taken(fine.scope) == 0);  // not held: given back at once
  }
  // Two requests are held (the worker's max_delayed under this limit)...
  held_places first, second;
  for (held_places* p : {&first, &second}) {
    auto req = ipv4_request("198.51.100.9", &fine, nullptr, t0);
    p->take(counts, req);
    const decision d = store.decide(req);
    REQUIRE(d.hold > 0);
    p->keep(d.held);
  }
  CHECK(counts.taken(fine.scope) == 2);
  // ... so the third is asked strictly, and refused although its wait (300ms) is within 500ms.
  // It is told the wait of the limit without a delay, whose clamp (tau + T) cuts the held
  // requests' debt from what it sees: 100ms. Nothing is committed, so nothing is forgiven.
  {
    held_places third;
    auto req = ipv4_request("198.51.100.9", &fine, nullptr, t0);
    third.take(counts, req);
    CHECK(req.no_delay == 1);
    CHECK(third.empty());
    const decision d = store.decide(req);
    CHECK_FALSE(d.admitted);
    CHECK(d.limits[0].wait == 100 * ms);
  }
  CHECK(store.lookup(fine, keys_of(address::parse("198.51.100.9").value(), {}).fine_key)->tat[0] ==
        t0 + 700 * ms);
  // Once one is let go, the next may be held again.
  first.release();
  CHECK(counts.taken(fine.scope) == 1);
  auto req = ipv4_request("198.51.100.9", &fine, nullptr, t0);
  held_places fourth;
  fourth.take(counts, req);
  CHECK(req.no_delay == 0);
  CHECK(store.decide(req).hold == 300 * ms);
}

TEST_CASE("the script call names a limit once per delay its requests ask for", "[redis][delay]") {
  namespace redis = tollgate::store::redis;
  limit_spec fine = delayed_limit(250 * ms);
  fine.state_name = "a/ipv4_individual/32";
  const auto relaxed = ipv4_request("198.51.100.7", &fine, nullptr, t0);
  auto strict = relaxed;
  strict.no_delay = 1;
  const redis::batch_entry batch[] = {{&relaxed}, {&strict}, {&relaxed}};
  redis::command_args a;
  redis::build_call(a, "EVALSHA", redis::gcra_sha(), "t:", batch);
  std::vector<std::string> args;
  for (int i = 0; i < a.count; ++i)
    args.emplace_back(a.argv[i], a.lengths[i]);
  // EVALSHA sha 1 key now; 2 limits of kind, T, burst, T, burst, delay; 3 requests.
  const std::vector<std::string> expected = {
      "EVALSHA", redis::gcra_sha(),
      "1",       "{t:198.51.100.0/24}a/ipv4_individual/32:198.51.100.7",
      "",        "2",
      "0",       "100000000",
      "5",       "0",
      "0",       "250000000",
      "0",       "100000000",
      "5",       "0",
      "0",       "0",
      "3",       "1",
      "1",       "1",
      "1",       "1",
      "1",       "1",
      "2",       "1",
      "1",       "1",
      "1"};
  CHECK(args == expected);
}

TEST_CASE("the over-limit cache leaves a wait within the delay to Redis", "[redis][delay]") {
  const limit_spec fine = delayed_limit(250 * ms);
  store::over_limit_cache cache;
  auto req = ipv4_request("198.51.100.7", &fine, nullptr, t0);
  // Redis refused at t0 with a stored tat of t0 + 700ms (seven at once): wait 300ms.
  decision redis_said;
  redis_said.count = 1;
  redis_said.limits[0] = {t0 + 700 * ms, 300 * ms, 0, tier::short_term, 0};
  choose_binding(req, redis_said);
  cache.remember(req, redis_said);
  decision d;
  CHECK(cache.reject(req, d));  // 300ms > 250ms
  req.now = t0 + 50 * ms;       // 250ms: Redis would hold it
  CHECK_FALSE(cache.reject(req, d));
  req.no_delay = 1;  // asked without the delay, the cache refuses it again
  CHECK(cache.reject(req, d));
}

TEST_CASE("on_excess loads with its default and fails naming file, line and key",
          "[config][delay]") {
  const std::string head = "categories:\n  api:\n    limits:\n";
  const auto p = config::load_policy_text(
      head +
          "      ipv4_individual: { short: { rate: 10/s, burst: 5 }, on_excess: { delay: 250ms } "
          "}\n",
      "p.yaml");
  const config::limit_config& l = p.categories.at(0).limits.at(0);
  REQUIRE(l.on_excess);
  CHECK(l.on_excess->delay == std::chrono::milliseconds(250));
  CHECK(l.on_excess->max_delayed == 1000);

  auto error_of = [](const std::string& yaml) -> std::string {
    try {
      config::load_policy_text(yaml, "p.yaml");
    } catch (const config::error& e) {
      return e.what();
    }
    return "";
  };
  const std::string tiers = "short: { rate: 10/s, burst: 5 }";
  struct bad {
    std::string yaml, message;
  };
  const bad cases[] = {
      {head + "      ipv4_individual: { " + tiers + ", on_excess: { delay: 0ms } }\n",
       "p.yaml:4: categories.api.limits.ipv4_individual.on_excess.delay: expected 1ms to 1m"},
      {head + "      ipv4_individual: { " + tiers + ", on_excess: { delay: 2m } }\n",
       "p.yaml:4: categories.api.limits.ipv4_individual.on_excess.delay: expected 1ms to 1m"},
      {head + "      ipv4_individual: { " + tiers + ", on_excess: { max_delayed: 5 } }\n",
       "p.yaml:4: categories.api.limits.ipv4_individual.on_excess.delay: missing required key"},
      {head + "      ipv4_individual: { " + tiers +
           ", on_excess: { delay: 1s, max_delayed: 0 } }\n",
       "p.yaml:4: categories.api.limits.ipv4_individual.on_excess.max_delayed: expected a whole "
       "number from 1 to 1000000, got '0'"},
      {head + "      ipv4_individual: { " + tiers + ", on_excess: { delay: 1s, queue: 5 } }\n",
       "p.yaml:4: categories.api.limits.ipv4_individual.on_excess.queue: unknown key (expected "
       "delay or max_delayed)"},
      {head + "      daily: { key: global, quota: { limit: 10, period: day }, on_excess: { delay: "
              "1s } }\n",
       "p.yaml:4: categories.api.limits.daily.on_excess: on_excess holds requests of rate tiers "
       "(short, long), not of a quota or a concurrency"},
  };
  for (const bad& b : cases) {
    INFO(b.yaml);
    CHECK(error_of(b.yaml) == b.message);
  }
}
