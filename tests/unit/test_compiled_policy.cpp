#include <catch2/catch.hpp>

#include "gateway/limit/headers.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/policy/compiled_policy.hpp"

using namespace tollgate;
using namespace tollgate::limit;

namespace {
const core::nanos t0 = 1'735'000'000 * core::ns_per_s;
const std::string default_policy = std::string(TOLLGATE_SOURCE_DIR) + "/policies/default.yaml";
}  // namespace

TEST_CASE("the default policy compiles into the table of DESIGN section 3", "[policy]") {
  const auto cfg = config::load_policies({default_policy});
  scope_registry scopes;
  const policy::compiled_policy p(cfg, scopes, {1, 2});
  const auto* auth = p.find("auth");
  REQUIRE(auth != nullptr);
  CHECK(auth->policy_field[0] ==
        "\"ipv4_individual.short\";q=5;w=3, \"ipv4_individual.long\";q=30;w=3600, "
        "\"ipv4_network.short\";q=25;w=3, \"ipv4_network.long\";q=30;w=360");
  CHECK(auth->policy_field[1] ==
        "\"ipv6_subnet.short\";q=50;w=3, \"ipv6_subnet.long\";q=60;w=360, "
        "\"ipv6_provider.short\";q=125;w=3, \"ipv6_provider.long\";q=300;w=360");
  const auto* general = p.find("general");
  REQUIRE(general != nullptr);
  const auto& ind = general->groups[0].value();
  CHECK(ind.tiers[0].emission == 50 * core::ns_per_ms);
  CHECK(ind.tiers[0].burst == 50u);
  CHECK(ind.tiers[1].burst == 500u);
  CHECK(p.find("nope") == nullptr);
  CHECK(p.categories().size() == 4);
}

TEST_CASE("a compiled request carries its family's levels only", "[policy]") {
  const auto cfg = config::load_policies({default_policy});
  scope_registry scopes;
  const policy::compiled_policy p(cfg, scopes, {1, 2});
  const auto& auth = *p.find("auth");
  auto r = p.request(auth, address::parse("192.0.2.1").value(), "", t0);
  REQUIRE(r.group_count == 2);
  CHECK(r.groups[0].lvl == level::ipv4_individual);
  CHECK(r.groups[1].lvl == level::ipv4_network);
  CHECK(r.groups[1].key == 0xc0000200u);
  r = p.request(auth, address::parse("2001:db8::1").value(), "", t0);
  REQUIRE(r.group_count == 2);
  CHECK(r.groups[0].lvl == level::ipv6_subnet);
  CHECK(r.groups[1].lvl == level::ipv6_provider);

  // auth through the store: 5 at once from one address, then 429 at the individual level.
  memory_store store({}, 7);
  for (int i = 0; i < 5; ++i) {
    CHECK(store.decide_now(p.request(auth, address::parse("192.0.2.1").value(), "", t0)).admitted);
  }
  const auto req = p.request(auth, address::parse("192.0.2.1").value(), "", t0);
  const auto d = store.decide_now(req);
  CHECK_FALSE(d.admitted);
  CHECK(binding_of(req, d).lvl == level::ipv4_individual);
}

TEST_CASE("global and identity limits join the set", "[policy]") {
  const auto cfg = config::load_policy_text(R"(
categories:
  api:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
      global: { short: { rate: 1/s, burst: 3 } }
      identity: { header: X-Api-Key, long: { rate: 10/h, burst: 2 } }
)",
                                            "api.yaml");
  scope_registry scopes;
  const policy::compiled_policy p(cfg, scopes, {3, 4});
  const auto& api = *p.find("api");
  CHECK(api.identity_header == "X-Api-Key");
  CHECK(api.policy_field[0] ==
        "\"ipv4_individual.short\";q=100;w=1, \"global.short\";q=3;w=3, "
        "\"identity.long\";q=2;w=720");
  CHECK(api.policy_field[1] == "\"global.short\";q=3;w=3, \"identity.long\";q=2;w=720");

  memory_store store({}, 8);
  auto decide = [&](const char* addr, std::string_view key) {
    const auto req = p.request(api, address::parse(addr).value(), key, t0);
    const auto d = store.decide_now(req);
    return std::pair{d.admitted, d.admitted ? level::global : binding_of(req, d).lvl};
  };
  // Identity "a" may pass twice, from any address.
  CHECK(decide("192.0.2.1", "a").first);
  CHECK(decide("192.0.2.2", "a").first);
  CHECK(decide("192.0.2.3", "a") == std::pair{false, level::identity});
  // Without the header the identity limit is skipped; the global limit (3) still binds.
  CHECK(decide("192.0.2.4", "").first);
  CHECK(decide("192.0.2.5", "").first == false);
  CHECK(decide("192.0.2.5", "").second == level::global);
}

TEST_CASE("scope ids survive a recompile when a limit keeps its name", "[policy]") {
  scope_registry scopes;
  const auto a = config::load_policy_text(
      "categories: { c: { limits: { ipv4_network: { short: { rate: 1/s, burst: 1 } } } } }",
      "a.yaml");
  const auto b = config::load_policy_text(
      "categories: { c: { limits: { ipv4_network: { short: { rate: 5/s, burst: 9 } } } } }",
      "b.yaml");
  const auto c = config::load_policy_text(
      "levels: { ipv4_network: 16 }\n"
      "categories: { c: { limits: { ipv4_network: { short: { rate: 5/s, burst: 9 } } } } }",
      "c.yaml");
  const policy::compiled_policy pa(a, scopes, {});
  const policy::compiled_policy pb(b, scopes, {});
  const policy::compiled_policy pc(c, scopes, {});
  const auto scope = [](const policy::compiled_policy& p) {
    return p.find("c")->groups[static_cast<std::size_t>(level::ipv4_network)]->scope;
  };
  CHECK(scope(pa) == scope(pb));  // new rate, same state
  CHECK(scope(pc) != scope(pa));  // new prefix: the old keys mean something else
  CHECK(scopes.name(scope(pc)) == "c/ipv4_network/16");
}
