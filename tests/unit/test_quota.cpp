// Calendar quotas (docs/design.md §3, "Quotas"): the UTC windows, the in-process store's counts
// inside a request's all-or-nothing set, the header values and the configuration's errors.

#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "gateway/admission/problem.hpp"
#include "gateway/config/error.hpp"
#include "gateway/config/policy.hpp"
#include "gateway/core/calendar.hpp"
#include "gateway/limit/headers.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/limit/quota.hpp"
#include "gateway/policy/verdict.hpp"
#include "keys_support.hpp"
#include "support.hpp"

using namespace tollgate;
using core::period;
using test::sec;

namespace {

/// Unix nanoseconds of a UTC instant given in whole seconds, plus `ns`.
constexpr core::nanos at(std::int64_t unix_seconds, core::nanos ns = 0) {
  return unix_seconds * sec + ns;
}

// Dates used below, as Unix seconds (checked against Python's datetime).
constexpr std::int64_t feb_01_2023 = 1675209600, mar_01_2023 = 1677628800;
constexpr std::int64_t dec_01_2023 = 1701388800, jan_01_2024 = 1704067200;  // a Monday
constexpr std::int64_t feb_01_2024 = 1706745600, feb_29_2024 = 1709164800;
constexpr std::int64_t mar_01_2024 = 1709251200, mar_02_2024 = 1709337600;
constexpr std::int64_t mon_dec_30_2024 = 1735516800, wed_jan_01_2025 = 1735689600;
constexpr std::int64_t mon_jan_06_2025 = 1736121600;
constexpr std::int64_t day = 86400;

/// The message of the error that loading `yaml` throws ("" when it loads).
std::string error_of(const std::string& yaml) {
  try {
    config::load_policy_text(yaml, "p.yaml");
  } catch (const config::error& e) {
    return e.what();
  }
  return "";
}

/// A category `api` with `limits` (YAML lines at six spaces of indentation).
config::policy_config policy_with(const std::string& limits, std::uint32_t cost = 1) {
  return config::load_policy_text(
      "categories:\n  api:\n    cost: " + std::to_string(cost) + "\n    limits:\n" + limits,
      "p.yaml");
}

/// One client and its key, asking through a compiled policy and a memory store.
struct harness {
  config::policy_config cfg;
  policy::compiled_policy compiled;
  const policy::category_limits& api;
  limit::memory_store store;
  test::fake_request with_key;
  std::uint32_t unkeyed = 0;

  explicit harness(const std::string& limits, std::uint32_t slices = 1)
      : cfg(policy_with(limits)),
        compiled(cfg, {}),
        api(*compiled.find("api")),
        store({}, 7, slices) {
    with_key.headers["x-api-key"] = "k-123";
  }

  limit::limit_request request(core::nanos now, std::uint32_t cost = 1,
                               const char* client = "192.0.2.10") {
    const auto a = core::address::parse(client).value();
    return compiled.request(api, a, with_key.keys(), cost, now, unkeyed);
  }
  limit::decision decide(core::nanos now, std::uint32_t cost = 1,
                         const char* client = "192.0.2.10") {
    return store.decide(request(now, cost, client));
  }
  /// The stored entry of limit `name` for this client's key (quota: count, window end).
  std::optional<limit::state_entry> entry(const std::string& name) {
    for (const auto& s : api.limits) {
      if (s.name != name) continue;
      const auto req = request(0);
      for (std::uint8_t g = 0; g < req.group_count; ++g) {
        if (req.groups[g].spec == &s) return store.lookup(s, req.groups[g].key);
      }
    }
    return std::nullopt;
  }
};

}  // namespace

TEST_CASE("calendar windows follow UTC: days, weeks from Monday, months from the 1st",
          "[quota][calendar]") {
  struct row {
    period p;
    core::nanos now;
    std::int64_t start, end;  // Unix seconds
  };
  const row rows[] = {
      // A day, from midnight to midnight; midnight itself starts the next one.
      {period::day, at(feb_29_2024 + 13 * 3600, 5), feb_29_2024, mar_01_2024},
      {period::day, at(mar_01_2024) - 1, feb_29_2024, mar_01_2024},
      {period::day, at(mar_01_2024), mar_01_2024, mar_02_2024},
      // A week from Monday 00:00: New Year 2025 is a Wednesday of the week of Monday 30 Dec.
      {period::week, at(wed_jan_01_2025 + 12 * 3600), mon_dec_30_2024, mon_jan_06_2025},
      {period::week, at(mon_dec_30_2024), mon_dec_30_2024, mon_jan_06_2025},
      {period::week, at(mon_dec_30_2024) - 1, mon_dec_30_2024 - 7 * day, mon_dec_30_2024},
      {period::week, at(mon_jan_06_2025) - 1, mon_dec_30_2024, mon_jan_06_2025},
      // 1970-01-01 was a Thursday: its week began on Monday 29 December 1969.
      {period::week, 0, -3 * day, 4 * day},
      // Months: February of a leap year has 29 days, of another year 28.
      {period::month, at(feb_29_2024 + 3600), feb_01_2024, mar_01_2024},
      {period::month, at(feb_01_2024), feb_01_2024, mar_01_2024},
      {period::month, at(feb_01_2023 + 27 * day), feb_01_2023, mar_01_2023},
      // December to January crosses the year.
      {period::month, at(jan_01_2024) - 1, dec_01_2023, jan_01_2024},
      {period::month, at(jan_01_2024), jan_01_2024, feb_01_2024},
      {period::month, at(jan_01_2024 + 30 * day), jan_01_2024, feb_01_2024},
  };
  for (const row& r : rows) {
    CAPTURE(core::period_name(r.p), r.now);
    const core::calendar_window w = core::window_of(r.p, r.now);
    CHECK(w.start == at(r.start));
    CHECK(w.end == at(r.end));
  }
  CHECK(core::window_seconds(period::day, at(feb_29_2024)) == 86400);
  CHECK(core::window_seconds(period::week, at(feb_29_2024)) == 604800);
  CHECK(core::window_seconds(period::month, at(feb_29_2024)) == 29 * 86400);
  CHECK(core::window_seconds(period::month, at(feb_01_2023)) == 28 * 86400);
  CHECK(core::window_seconds(period::month, at(dec_01_2023)) == 31 * 86400);
  CHECK(core::window_seconds(period::month, at(mar_01_2024) + 1) == 31 * 86400);
}

TEST_CASE("a quota counts cost in its window and starts again at the next", "[quota]") {
  const limit::quota_params q{5, period::day, false};
  struct step {
    core::nanos now;
    std::uint32_t cost;
    bool allowed;
    std::uint32_t used;  // stored after the step
  };
  const core::nanos eve = at(mar_01_2024) - 2 * sec;
  // (time, cost) -> (allowed, count): costs above 1 spend that much; one that does not fit is
  // refused though a cheaper one still fits; midnight empties the count.
  const step steps[] = {{eve, 2, true, 2},
                        {eve, 2, true, 4},
                        {eve + sec, 2, false, 4},
                        {eve + sec, 1, true, 5},
                        {at(mar_01_2024) - 1, 1, false, 5},
                        {at(mar_01_2024), 1, true, 1},
                        {at(mar_01_2024), 4, true, 5},
                        {at(mar_02_2024) - 1, 1, false, 5}};
  std::uint64_t used = 0;
  core::nanos end = 0;
  for (const step& s : steps) {
    CAPTURE(s.now, s.cost);
    const limit::quota_result r = limit::quota_check(used, end, s.now, s.cost, q);
    CHECK(r.allowed == s.allowed);
    CHECK(r.used == s.used);
    CHECK(r.end == core::window_of(period::day, s.now).end);
    CHECK(r.wait == (s.allowed ? 0 : r.end - s.now));
    used = r.used;
    end = r.end;
  }
  // A window that ends later than now's (another replica's clock ahead) is joined, not undone.
  const limit::quota_result joined =
      limit::quota_check(3, at(mar_02_2024), at(mar_01_2024) - sec, 1, q);
  CHECK(joined.allowed);
  CHECK(joined.used == 4);
  CHECK(joined.end == at(mar_02_2024));
  // A count above a limit a reload lowered is told as the whole limit spent.
  const limit::quota_result over = limit::quota_check(9, at(mar_01_2024), eve, 1, q);
  CHECK_FALSE(over.allowed);
  CHECK(over.used == 5);
}

TEST_CASE("quota and rate limit are all or nothing in the memory store", "[quota][store]") {
  harness h(
      "      ipv4_individual: { short: { rate: 1/s, burst: 3 } }\n"
      "      daily: { key: { header: X-Api-Key }, quota: { limit: 5, period: day } }\n");
  const core::nanos t = at(feb_29_2024 + 3600);

  for (int i = 0; i < 3; ++i)
    REQUIRE(h.decide(t).admitted);
  REQUIRE(h.entry("daily")->tat[0] == 3);

  // The rate limit refuses the fourth: the quota spends nothing.
  const auto refused_by_rate = h.decide(t);
  REQUIRE_FALSE(refused_by_rate.admitted);
  CHECK(h.entry("daily")->tat[0] == 3);
  CHECK(h.entry("daily")->tat[1] == at(mar_01_2024));

  // Later, with the bucket full again, two more spend the quota; the next is the quota's.
  REQUIRE(h.decide(t + 10 * sec).admitted);
  REQUIRE(h.decide(t + 10 * sec).admitted);
  CHECK(h.entry("daily")->tat[0] == 5);
  const core::nanos tat_before = h.entry("ipv4_individual")->tat[0];
  const auto refused_by_quota = h.decide(t + 10 * sec);
  REQUIRE_FALSE(refused_by_quota.admitted);
  // The rate limit, which would have admitted it (burst 3, one spent), is not charged.
  CHECK(h.entry("ipv4_individual")->tat[0] == tat_before);
  CHECK(h.entry("daily")->tat[0] == 5);
  const auto req = h.request(t + 10 * sec);
  const limit::binding_view b = limit::binding_of(req, refused_by_quota);
  CHECK(b.quota);
  CHECK(b.name == "daily");
  CHECK(b.remaining == 0);
  CHECK(b.reset == at(mar_01_2024));
  CHECK(b.wait == at(mar_01_2024) - (t + 10 * sec));
  CHECK(limit::rejection_reason(b) == "quota_exceeded");

  // Midnight: the quota is whole again.
  const auto next_day = h.decide(at(mar_01_2024));
  REQUIRE(next_day.admitted);
  CHECK(h.entry("daily")->tat[0] == 1);
  CHECK(h.entry("daily")->tat[1] == at(mar_02_2024));
}

TEST_CASE("a quota counts a request's cost and refuses one that does not fit", "[quota][store]") {
  harness h("      monthly: { key: global, quota: { limit: 10, period: month } }\n");
  const core::nanos t = at(feb_01_2024 + day);
  CHECK(h.decide(t, 4).admitted);
  CHECK(h.decide(t, 4).admitted);
  const auto d = h.decide(t, 3);
  CHECK_FALSE(d.admitted);
  CHECK(d.limits[0].used == 8);
  CHECK(h.decide(t, 2).admitted);
  CHECK_FALSE(h.decide(t, 1).admitted);
  CHECK(h.entry("monthly")->tat[0] == 10);
  CHECK(h.decide(at(mar_01_2024), 10).admitted);
}

TEST_CASE("a global quota is one count however many workers share it", "[quota][store]") {
  // Four slices (workers): a quota is not split, so every worker sees the same count and
  // together they admit exactly the limit.
  harness h("      everyone: { key: global, quota: { limit: 1000, period: week } }\n", 4);
  const core::nanos t = at(wed_jan_01_2025);
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < 400; ++i) {
        auto req = h.request(t);
        req.home = w;
        if (h.store.decide(req).admitted) ++admitted;
      }
    });
  }
  for (auto& th : threads)
    th.join();
  CHECK(admitted == 1000);
  CHECK(h.entry("everyone")->tat[0] == 1000);
  CHECK(h.entry("everyone")->tat[1] == at(mon_jan_06_2025));
}

TEST_CASE("quotas keyed on the address: each client by its individual or network key",
          "[quota][store]") {
  harness h(
      "      per_address: { key: individual, quota: { limit: 2, period: day } }\n"
      "      per_network: { key: network, quota: { limit: 3, period: day } }\n");
  const core::nanos t = at(feb_29_2024);
  CHECK(h.decide(t, 1, "192.0.2.1").admitted);
  CHECK(h.decide(t, 1, "192.0.2.1").admitted);
  auto d = h.decide(t, 1, "192.0.2.1");  // its own quota is spent
  CHECK_FALSE(d.admitted);
  const auto req = h.request(t, 1, "192.0.2.1");
  CHECK(limit::binding_of(req, d).name == "per_address");
  CHECK(h.decide(t, 1, "192.0.2.2").admitted);  // a neighbour: the network's third
  d = h.decide(t, 1, "192.0.2.3");
  CHECK_FALSE(d.admitted);
  CHECK(limit::binding_of(h.request(t, 1, "192.0.2.3"), d).name == "per_network");
  // IPv6 clients are counted by their /64 and /48.
  CHECK(h.decide(t, 1, "2001:db8:0:1::1").admitted);
  CHECK(h.decide(t, 1, "2001:db8:0:1::2").admitted);
  CHECK_FALSE(h.decide(t, 1, "2001:db8:0:1::3").admitted);
  CHECK(h.decide(t, 1, "2001:db8:0:2::1").admitted);
  CHECK_FALSE(h.decide(t, 1, "2001:db8:0:3::1").admitted);
  // A quota is a consumer's budget: a proof of work never pays past it.
  for (const auto& s : h.api.limits)
    CHECK_FALSE(s.payable());
}

TEST_CASE("a shadowed quota is told to the upstream and spends nothing", "[quota][shadow]") {
  harness h(
      "      ipv4_individual: { short: { rate: 10/s, burst: 10 } }\n"
      "      trial: { key: { header: X-Api-Key }, quota: { limit: 1, period: day }, shadow: true "
      "}\n");
  const core::nanos t = at(feb_29_2024);
  REQUIRE(h.decide(t).admitted);
  const auto req = h.request(t);
  const auto d = h.store.decide(req);
  CHECK(d.admitted);
  CHECK(d.shadow_limited);
  CHECK(h.entry("trial")->tat[0] == 1);
  policy::rate_limit_fields f;
  policy::describe(req, d, h.api, core::family::v4, f);
  CHECK(f.shadow == "trial.quota");
  CHECK(f.level == "ipv4_individual");  // the client sees the enforced limit only
  CHECK(f.policy == "\"ipv4_individual.short\";q=10;w=1");
}

TEST_CASE("a binding quota gives the header values and the 429 of a quota", "[quota][verdict]") {
  harness h(
      "      ipv4_individual: { short: { rate: 10/s, burst: 10 } }\n"
      "      daily: { key: { header: X-Api-Key }, quota: { limit: 3, period: day } }\n");
  const core::nanos t = at(mar_01_2024) - 90 * sec - 250 * test::ms;
  policy::rate_limit_fields f;

  // Admitted: the quota has the fewest remaining, so it binds.
  auto req = h.request(t);
  auto d = h.store.decide(req);
  policy::describe(req, d, h.api, core::family::v4, f);
  REQUIRE(f.present);
  CHECK(f.limit == "3");
  CHECK(f.remaining == "2");
  CHECK(f.reset == std::to_string(mar_01_2024));
  CHECK(f.level == "daily");
  CHECK(f.tier == "quota");
  CHECK(f.ratelimit == "\"daily\";r=2;t=91");
  CHECK(f.policy == "\"ipv4_individual.short\";q=10;w=1, \"daily\";q=3;w=86400");
  CHECK(f.retry_after.empty());

  h.decide(t);
  h.decide(t);
  req = h.request(t);
  d = h.store.decide(req);
  REQUIRE_FALSE(d.admitted);
  policy::describe(req, d, h.api, core::family::v4, f);
  CHECK(f.remaining == "0");
  CHECK(f.retry_after == "91");  // 90.25 s to midnight, rounded up
  CHECK(f.reason == "quota_exceeded");
  CHECK(f.quota);
  CHECK(f.period == "day");
  std::string body;
  admission::write_limited_body(body, f);
  CHECK(body ==
        R"j({"type":"about:blank","title":"Too Many Requests","status":429,)j"
        R"j("detail":"quota exceeded at daily (day)","code":"quota_exceeded","level":"daily",)j"
        R"j("period":"day","retry_after":91})j");

  // A request without the key is left to the other limits.
  test::fake_request none;
  std::uint32_t unkeyed = 0;
  const auto a = core::address::parse("192.0.2.10").value();
  req = h.compiled.request(h.api, a, none.keys(), 1, t, unkeyed);
  CHECK(req.group_count == 1);
  CHECK(unkeyed == 2);
}

TEST_CASE("RateLimit-Policy gives a week 604800 s and a month the length of this month",
          "[quota][verdict]") {
  harness h(
      "      weekly: { key: { header: X-Api-Key }, quota: { limit: 700, period: week } }\n"
      "      monthly: { key: global, quota: { limit: 3000, period: month, tiered: true } }\n");
  CHECK(h.api.policy_varies);
  policy::rate_limit_fields f;
  for (const auto& [now, month] : {std::pair{at(feb_01_2024), 29 * day},
                                   {at(feb_01_2023), 28 * day},
                                   {at(jan_01_2024), 31 * day}}) {
    const auto req = h.request(now);
    policy::describe(req, h.store.decide(req), h.api, core::family::v4, f);
    CHECK(f.policy == "\"weekly\";q=700;w=604800, \"monthly\";q=3000;w=" + std::to_string(month));
  }
  // tiered is kept for the consumers' tiers.
  CHECK(h.api.limits[1].quota.tiered);
  CHECK_FALSE(h.api.limits[0].quota.tiered);
  CHECK(h.cfg.categories[0].limits[1].quota->tiered);
}

TEST_CASE("a quota's state name carries its period, and the quota's key", "[quota][policy]") {
  harness h(
      "      daily: { key: { header: X-Api-Key }, quota: { limit: 5, period: day } }\n"
      "      per_address: { key: individual, quota: { limit: 5, period: month } }\n"
      "      per_network: { key: network, short: { rate: 5/s, burst: 5 } }\n");
  CHECK(h.api.limits[0].state_name == "api/daily/header:x-api-key/quota:day");
  CHECK(h.api.limits[1].state_name == "api/per_address/individual:32,64/quota:month");
  CHECK(h.api.limits[2].state_name == "api/per_network/network:24,48");
  CHECK(h.api.limits[0].quota == limit::quota_params{5, period::day, false});
  CHECK_FALSE(h.api.limits[2].is_quota());
}

TEST_CASE("quota configuration errors name file, line and key", "[quota][config]") {
  const std::string head = "categories:\n  api:\n    limits:\n";
  struct bad {
    std::string yaml;
    const char* message;
  };
  const bad cases[] = {
      {head + "      daily: { key: global, quota: { limit: 0, period: day } }\n",
       "p.yaml:4: categories.api.limits.daily.quota.limit: expected a whole number from 1 to "
       "4294967295, got '0'"},
      {head + "      daily: { key: global, quota: { limit: 4294967296, period: day } }\n",
       "p.yaml:4: categories.api.limits.daily.quota.limit: expected a whole number from 1 to "
       "4294967295, got '4294967296'"},
      {head + "      daily: { key: global, quota: { limit: 10, period: year } }\n",
       "p.yaml:4: categories.api.limits.daily.quota.period: expected day, week or month, got "
       "'year'"},
      {head + "      daily: { key: global, quota: { limit: 10 } }\n",
       "p.yaml:4: categories.api.limits.daily.quota.period: missing required key"},
      {head + "      daily: { key: global, quota: { limit: 10, period: day, every: 2 } }\n",
       "p.yaml:4: categories.api.limits.daily.quota.every: unknown key (expected limit, period or "
       "tiered)"},
      {head + "      daily: { key: global, quota: { limit: 10, period: day, tiered: maybe } }\n",
       "p.yaml:4: categories.api.limits.daily.quota.tiered: expected true or false, got 'maybe'"},
      {head + "      daily: { key: global, short: { rate: 1/s, burst: 1 }, quota: { limit: 10, "
              "period: day } }\n",
       "p.yaml:4: categories.api.limits.daily.quota: a limit is either a quota or rate tiers "
       "(short, long), not both: give the quota a limit of its own"},
      {head + "      daily:\n        key: global\n        quota: { limit: 10, period: day }\n"
              "        long: { rate: 1/h, burst: 5 }\n",
       "p.yaml:6: categories.api.limits.daily.quota: a limit is either a quota or rate tiers "
       "(short, long), not both: give the quota a limit of its own"},
      {"categories:\n  api:\n    cost: 11\n    limits:\n"
       "      daily: { key: global, quota: { limit: 10, period: day } }\n",
       "p.yaml:3: categories.api.cost: cost 11 exceeds limit 10 of quota daily; such requests "
       "could never pass"},
      {head + "      ipv4_individual: { quota: { limit: 10, period: day } }\n",
       "p.yaml:4: categories.api.limits.ipv4_individual.quota: unknown key (expected short, long, "
       "shadow or on_excess)"},
      {head + "      daily: { key: everyone, quota: { limit: 10, period: day } }\n",
       "p.yaml:4: categories.api.limits.daily.key: expected global, individual, network, a map "
       "with header, query, cookie, bearer, jwt_claim or client_cert, or a list of these (a "
       "composite key)"},
  };
  for (const bad& b : cases) {
    INFO(b.yaml);
    CHECK(error_of(b.yaml) == b.message);
  }
  // The largest limit loads.
  CHECK(error_of(head + "      daily: { key: global, quota: { limit: 4294967295, period: day } }\n")
            .empty());
  // A route's cost is checked against quotas as against bursts.
  const auto cfg = policy_with("      daily: { key: global, quota: { limit: 10, period: day } }\n");
  CHECK(config::cost_fault(cfg.categories[0], 10).empty());
  CHECK(config::cost_fault(cfg.categories[0], 12) ==
        "cost 12 exceeds limit 10 of quota daily; such requests could never pass");
}
