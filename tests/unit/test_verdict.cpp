#include <catch2/catch.hpp>

#include "gateway/config/policy.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/policy/verdict.hpp"
#include "keys_support.hpp"

using namespace tollgate;

TEST_CASE("a rejection becomes the header values of design.md section 4", "[verdict]") {
  const auto cfg =
      config::load_policies({std::string(TOLLGATE_SOURCE_DIR) + "/policies/default.yaml"});
  const policy::compiled_policy p(cfg, {});
  const auto& auth = *p.find("auth");
  limit::memory_store store({}, 1);
  const auto client = core::address::parse("192.0.2.10").value();
  const core::nanos now = 1'735'000'000 * core::ns_per_s + 250 * core::ns_per_ms;
  policy::rate_limit_fields f;
  const test::fake_request none;
  std::uint32_t unkeyed = 0;

  auto req = p.request(auth, client, none.keys(), 1, now, unkeyed);
  auto d = store.decide(req);
  policy::describe(req, d, auth, client.family(), f);
  REQUIRE(f.present);
  CHECK(f.limit == "5");
  CHECK(f.remaining == "4");
  CHECK(f.reset == "1735000001");  // tat = now + 500ms, rounded up
  CHECK(f.level == "ipv4_individual");
  CHECK(f.ratelimit == "\"ipv4_individual.short\";r=4;t=1");
  CHECK(f.policy.substr(0, 60) ==
        "\"ipv4_individual.short\";q=5;w=3, \"ipv4_individual.long\";q=30");
  CHECK(f.retry_after.empty());
  CHECK(f.shadow.empty());

  for (int i = 0; i < 4; ++i)
    store.decide(req);
  d = store.decide(req);
  REQUIRE_FALSE(d.admitted);
  policy::describe(req, d, auth, client.family(), f);
  CHECK(f.remaining == "0");
  CHECK(f.retry_after == "1");
  CHECK(f.retry_seconds == 1);
  CHECK(f.reason == "burst_exhausted");
  CHECK(f.tier == "short");

  // An IPv6 client sees only its own family's limits in RateLimit-Policy.
  const auto v6 = core::address::parse("2001:db8::1").value();
  req = p.request(auth, v6, none.keys(), 1, now, unkeyed);
  d = store.decide(req);
  policy::describe(req, d, auth, v6.family(), f);
  CHECK(f.policy.find("ipv4") == std::string_view::npos);
  CHECK(f.level == "ipv6_subnet");
}

TEST_CASE("a request with no limits carries no rate-limit fields", "[verdict]") {
  const auto cfg = config::load_policy_text("categories: { open: {} }", "p.yaml");
  const policy::compiled_policy p(cfg, {});
  limit::memory_store store({}, 1);
  const auto client = core::address::parse("192.0.2.10").value();
  std::uint32_t unkeyed = 0;
  const auto req = p.request(*p.find("open"), client, test::fake_request{}.keys(), 1, 0, unkeyed);
  const auto d = store.decide(req);
  CHECK(d.admitted);
  policy::rate_limit_fields f;
  policy::describe(req, d, *p.find("open"), client.family(), f);
  CHECK_FALSE(f.present);
}

TEST_CASE("a shadowed rejection names its limit for the upstream and nothing for the client",
          "[verdict][shadow]") {
  const auto cfg = config::load_policy_text(R"(
categories:
  api:
    mode: shadow
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
)",
                                            "p.yaml");
  const policy::compiled_policy p(cfg, {});
  const auto& api = *p.find("api");
  CHECK(api.policy_field[0].empty());  // shadowed limits are not announced
  limit::memory_store store({}, 1);
  const auto client = core::address::parse("192.0.2.10").value();
  std::uint32_t unkeyed = 0;
  const auto req = p.request(api, client, test::fake_request{}.keys(), 1, 0, unkeyed);
  CHECK(store.decide(req).admitted);
  const auto d = store.decide(req);
  CHECK(d.admitted);
  CHECK(d.shadow_limited);
  policy::rate_limit_fields f;
  policy::describe(req, d, api, client.family(), f);
  CHECK_FALSE(f.present);
  CHECK(f.shadow == "ipv4_individual.short");
}

TEST_CASE("RateLimit-Policy lists the limits applied: not one whose key the request lacks",
          "[verdict][keys]") {
  const auto cfg = config::load_policy_text(R"(
categories:
  api:
    limits:
      ipv4_individual: { short: { rate: 10/s, burst: 10 } }
      per_api_key: { key: { header: X-Api-Key }, short: { rate: 1/s, burst: 2 } }
)",
                                            "p.yaml");
  const policy::compiled_policy p(cfg, {});
  const auto& api = *p.find("api");
  limit::memory_store store({}, 1);
  const auto client = core::address::parse("192.0.2.10").value();
  std::uint32_t unkeyed = 0;
  policy::rate_limit_fields f;
  test::fake_request keyed;
  keyed.headers.emplace("x-api-key", "k");
  auto req = p.request(api, client, keyed.keys(), 1, 0, unkeyed);
  policy::describe(req, store.decide(req), api, client.family(), f);
  CHECK(f.policy == "\"ipv4_individual.short\";q=10;w=1, \"per_api_key.short\";q=2;w=2");
  req = p.request(api, client, test::fake_request{}.keys(), 1, 0, unkeyed);
  CHECK(unkeyed == 0b10);
  policy::describe(req, store.decide(req), api, client.family(), f);
  CHECK(f.policy == "\"ipv4_individual.short\";q=10;w=1");
}
