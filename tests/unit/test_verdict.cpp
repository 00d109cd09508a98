#include <catch2/catch.hpp>

#include "gateway/config/policy.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/policy/verdict.hpp"

using namespace tollgate;

TEST_CASE("a rejection becomes the headers and body of DESIGN section 4", "[verdict]") {
  const auto cfg =
      config::load_policies({std::string(TOLLGATE_SOURCE_DIR) + "/policies/default.yaml"});
  limit::scope_registry scopes;
  const policy::compiled_policy p(cfg, scopes, {});
  const auto& auth = *p.find("auth");
  limit::memory_store store({}, 1);
  const auto client = core::address::parse("192.0.2.10").value();
  const core::nanos now = 1'735'000'000 * core::ns_per_s + 250 * core::ns_per_ms;
  policy::rate_limit_fields f;

  auto req = p.request(auth, client, "", now);
  auto d = store.decide_now(req);
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
  CHECK(f.body.empty());

  for (int i = 0; i < 4; ++i)
    store.decide_now(req);
  d = store.decide_now(req);
  REQUIRE_FALSE(d.admitted);
  policy::describe(req, d, auth, client.family(), f);
  CHECK(f.remaining == "0");
  CHECK(f.retry_after == "1");
  CHECK(f.reason == "burst_exhausted");
  CHECK(f.body ==
        R"x({"type":"about:blank","title":"Too Many Requests","status":429,)x"
        R"x("detail":"rate limit exceeded at ipv4_individual (short tier)",)x"
        R"x("code":"rate_limit_exceeded","level":"ipv4_individual","tier":"short","retry_after":1})x");

  // An IPv6 client sees only its own family's limits in RateLimit-Policy.
  const auto v6 = core::address::parse("2001:db8::1").value();
  req = p.request(auth, v6, "", now);
  d = store.decide_now(req);
  policy::describe(req, d, auth, v6.family(), f);
  CHECK(f.policy.find("ipv4") == std::string_view::npos);
  CHECK(f.level == "ipv6_subnet");
}

TEST_CASE("a request with no limits carries no rate-limit fields", "[verdict]") {
  const auto cfg = config::load_policy_text("categories: { open: {} }", "p.yaml");
  limit::scope_registry scopes;
  const policy::compiled_policy p(cfg, scopes, {});
  limit::memory_store store({}, 1);
  const auto client = core::address::parse("192.0.2.10").value();
  const auto req = p.request(*p.find("open"), client, "", 0);
  const auto d = store.decide_now(req);
  CHECK(d.admitted);
  policy::rate_limit_fields f;
  policy::describe(req, d, *p.find("open"), client.family(), f);
  CHECK_FALSE(f.present);
}
