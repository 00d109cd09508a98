#include <catch2/catch.hpp>

#include "gateway/config/error.hpp"
#include "gateway/limit/headers.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "keys_support.hpp"
#include "temp_dir.hpp"

using namespace tollgate;
using namespace tollgate::limit;

namespace {
const core::nanos t0 = 1'735'000'000 * core::ns_per_s;
const std::string default_policy = std::string(TOLLGATE_SOURCE_DIR) + "/policies/default.yaml";

limit_request request_of(const policy::compiled_policy& p, const policy::category_limits& c,
                         const char* addr, const test::fake_request& r = {},
                         std::uint32_t* unkeyed = nullptr) {
  std::uint32_t missing = 0;
  auto out = p.request(c, address::parse(addr).value(), r.keys(), c.cost, t0, missing);
  if (unkeyed != nullptr) *unkeyed = missing;
  return out;
}
}  // namespace

TEST_CASE("the default policy compiles into the table of design.md section 3", "[policy]") {
  const auto cfg = config::load_policies({default_policy});
  const policy::compiled_policy p(cfg, {1, 2});
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
  const auto& ind = *general->at_level(level::ipv4_individual);
  CHECK(ind.tiers[0].emission == 50 * core::ns_per_ms);
  CHECK(ind.tiers[0].burst == 50u);
  CHECK(ind.tiers[1].burst == 500u);
  CHECK(ind.state_name == "general/ipv4_individual/32");
  CHECK(p.find("nope") == nullptr);
  CHECK(p.categories().size() == 4);
}

TEST_CASE("a compiled request carries its family's levels only", "[policy]") {
  const auto cfg = config::load_policies({default_policy});
  const policy::compiled_policy p(cfg, {1, 2});
  const auto& auth = *p.find("auth");
  auto r = request_of(p, auth, "192.0.2.1");
  REQUIRE(r.group_count == 2);
  CHECK(r.groups[0].spec->name == "ipv4_individual");
  CHECK(r.groups[1].spec->name == "ipv4_network");
  CHECK(r.groups[1].key == 0xc0000200u);
  r = request_of(p, auth, "2001:db8::1");
  REQUIRE(r.group_count == 2);
  CHECK(r.groups[0].spec->name == "ipv6_subnet");
  CHECK(r.groups[1].spec->name == "ipv6_provider");

  // auth through the store: 5 at once from one address, then 429 at the individual level.
  memory_store store({}, 7);
  for (int i = 0; i < 5; ++i) {
    CHECK(store.decide(request_of(p, auth, "192.0.2.1")).admitted);
  }
  const auto req = request_of(p, auth, "192.0.2.1");
  const auto d = store.decide(req);
  CHECK_FALSE(d.admitted);
  CHECK(binding_of(req, d).name == "ipv4_individual");
}

TEST_CASE("the older global and identity spellings join the set", "[policy]") {
  const auto cfg = config::load_policy_text(R"(
categories:
  api:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
      global: { short: { rate: 1/s, burst: 3 } }
      identity: { header: X-Api-Key, long: { rate: 10/h, burst: 2 } }
)",
                                            "api.yaml");
  const policy::compiled_policy p(cfg, {3, 4});
  const auto& api = *p.find("api");
  CHECK(api.policy_field[0] ==
        "\"ipv4_individual.short\";q=100;w=1, \"global.short\";q=3;w=3, "
        "\"identity.long\";q=2;w=720");
  CHECK(api.policy_field[1] == "\"global.short\";q=3;w=3, \"identity.long\";q=2;w=720");
  CHECK(api.limits[2].state_name == "api/identity/header:x-api-key");

  memory_store store({}, 8);
  auto decide = [&](const char* addr, std::string key) {
    test::fake_request r;
    if (!key.empty()) r.headers["x-api-key"] = key;
    const auto req = request_of(p, api, addr, r);
    const auto d = store.decide(req);
    return std::pair{d.admitted, d.admitted ? std::string() : std::string(binding_of(req, d).name)};
  };
  // Identity "a" may pass twice, from any address.
  CHECK(decide("192.0.2.1", "a").first);
  CHECK(decide("192.0.2.2", "a").first);
  CHECK(decide("192.0.2.3", "a") == std::pair{false, std::string("identity")});
  // Without the header the identity limit is skipped; the global limit (3) still binds.
  CHECK(decide("192.0.2.4", "").first);
  CHECK(decide("192.0.2.5", "") == std::pair{false, std::string("global")});
}

TEST_CASE("keys as data: header, query, cookie and bearer limits, each by its own key",
          "[policy][keys]") {
  const auto cfg = config::load_policy_text(R"(
categories:
  api:
    limits:
      per_api_key: { key: { header: X-Api-Key }, short: { rate: 1/s, burst: 1 } }
      per_tenant:  { key: { query: tenant },     short: { rate: 1/s, burst: 1 } }
      per_session: { key: { cookie: sid },       short: { rate: 1/s, burst: 1 } }
      per_token:   { key: { bearer: true },      short: { rate: 1/s, burst: 1 } }
)",
                                            "keys.yaml");
  const policy::compiled_policy p(cfg, {5, 6});
  const auto& api = *p.find("api");
  REQUIRE(api.keyed.size() == 4);
  test::fake_request r;
  r.headers["x-api-key"] = "k1";
  r.target = "/x?a=1&t%65nant=acme+corp&b";
  r.headers["cookie"] = "theme=dark; sid=\"s-1\"";
  r.headers["authorization"] = "Bearer tok";
  std::uint32_t unkeyed = 99;
  const auto req = request_of(p, api, "192.0.2.1", r, &unkeyed);
  CHECK(unkeyed == 0);
  REQUIRE(req.group_count == 4);
  CHECK(req.groups[0].key == p.key_of("k1"));
  CHECK(req.groups[1].key == p.key_of("acme corp"));
  CHECK(req.groups[2].key == p.key_of("s-1"));
  CHECK(req.groups[3].key == p.key_of("tok"));

  // Each limit applies by its own key: another value of one key is another bucket.
  memory_store store({}, 9);
  CHECK(store.decide(req).admitted);
  test::fake_request other = r;
  other.headers["authorization"] = "Bearer tok2";
  auto d = store.decide(request_of(p, api, "192.0.2.1", other));
  CHECK_FALSE(d.admitted);  // the same api key, tenant and session
  other = {};
  other.headers["authorization"] = "Bearer tok2";
  CHECK(store.decide(request_of(p, api, "192.0.2.1", other, &unkeyed)).admitted);
  // Without a key the limit does not apply, and says so.
  CHECK(unkeyed == 0b0111);
}

TEST_CASE("keys as data: a client certificate's subject, subjectAltName and fingerprint",
          "[policy][keys]") {
  const test::temp_dir dir;
  const core::client_certificate alice{"O=Example,CN=alice", "DNS:alice.test",
                                       std::string(64, 'a')};
  const core::client_certificate bob{"O=Example,CN=bob", "", std::string(64, 'b')};
  dir.write("keys.yaml", "'sha256:" + alice.sha256 + "': gold\n");
  const std::string path = dir.write("p.yaml", R"(
categories:
  api:
    limits:
      per_subject: { key: { client_cert: subject }, short: { rate: 1/s, burst: 1 } }
      per_san:     { key: { client_cert: san },     short: { rate: 1/s, burst: 1 } }
      per_cert:    { key: [ { client_cert: sha256 }, individual ], short: { rate: 1/s, burst: 1 } }
tiers:
  multipliers: { free: 1, gold: 2 }
  default: free
  from: [ { key_file: { file: keys.yaml, key: { client_cert: sha256 } } } ]
)");
  const policy::compiled_policy p(config::load_policies({path}), {5, 6});
  const auto& api = *p.find("api");
  CHECK(api.limits[0].state_name == "api/per_subject/client_cert:subject");
  CHECK(api.limits[2].state_name == "api/per_cert/composite:client_cert:sha256+individual");
  test::fake_request r;
  r.certificate = &alice;
  std::uint32_t unkeyed = 99;
  auto req = request_of(p, api, "192.0.2.1", r, &unkeyed);
  CHECK(unkeyed == 0);
  REQUIRE(req.group_count == 3);
  CHECK(req.groups[0].key == p.key_of(alice.subject));
  CHECK(req.groups[1].key == p.key_of(alice.san));
  const std::uint64_t alice_key = req.groups[2].key;
  // Another certificate, another bucket; a fact it lacks (no subjectAltName), no limit.
  r.certificate = &bob;
  req = request_of(p, api, "192.0.2.1", r, &unkeyed);
  CHECK(unkeyed == 0b010);
  REQUIRE(req.group_count == 2);
  CHECK(req.groups[0].key == p.key_of(bob.subject));
  CHECK(req.groups[1].key != alice_key);
  // No certificate: none of them applies.
  r.certificate = nullptr;
  request_of(p, api, "192.0.2.1", r, &unkeyed);
  CHECK(unkeyed == 0b111);
  // The key file's `sha256:` names a certificate by its fingerprint, not a hash of it.
  bool unknown = false;
  const auto* tiers = p.tiers();
  REQUIRE(tiers != nullptr);
  r.certificate = &alice;
  CHECK(p.tier_of(*core::address::parse("192.0.2.1"), r.keys(), unknown) == tiers->find("gold"));
  r.certificate = &bob;
  CHECK(p.tier_of(*core::address::parse("192.0.2.1"), r.keys(), unknown) == tiers->find("free"));
}

TEST_CASE("limit configuration errors name file, line and key", "[policy][keys]") {
  auto error_of = [](const std::string& text) {
    try {
      config::load_policy_text(text, "p.yaml");
    } catch (const config::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(
      error_of("categories:\n  c:\n    limits:\n      per_x: { short: { rate: 1/s, burst: 1 } }\n")
          .find("p.yaml:4") != std::string::npos);
  CHECK(
      error_of("categories:\n  c:\n    limits:\n      per_x: { short: { rate: 1/s, burst: 1 } }\n")
          .find("needs a key") != std::string::npos);
  CHECK(
      error_of("categories:\n  c:\n    limits:\n      x: { key: { header: A, query: b }, short: { "
               "rate: 1/s, burst: 1 } }\n")
          .find("exactly one") != std::string::npos);
  CHECK(error_of("categories:\n  c:\n    limits:\n      x: { key: { cookie: \"a;b\" }, short: { "
                 "rate: 1/s, burst: 1 } }\n")
            .find("invalid cookie name") != std::string::npos);
  CHECK(error_of("categories:\n  c:\n    mode: dry\n").find("expected enforce or shadow") !=
        std::string::npos);
}

TEST_CASE("state names are stable: rates change, state stays, prefixes change, it does not",
          "[policy]") {
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
  const policy::compiled_policy pa(a, {});
  const policy::compiled_policy pb(b, {});
  const policy::compiled_policy pc(c, {});
  const auto spec = [](const policy::compiled_policy& p) {
    return *p.find("c")->at_level(level::ipv4_network);
  };
  CHECK(spec(pa).scope == spec(pb).scope);  // new rate, same state
  CHECK(spec(pc).scope != spec(pa).scope);  // new prefix: the old keys mean something else
  CHECK(spec(pc).state_name == "c/ipv4_network/16");
  CHECK(spec(pc).scope == scope_of("c/ipv4_network/16"));  // the same in every process
}
