#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gateway/config/error.hpp"
#include "gateway/config/policy.hpp"

using namespace tollgate;
using namespace tollgate::config;

namespace {

const std::string default_policy = std::string(TOLLGATE_SOURCE_DIR) + "/policies/default.yaml";

/// The message of the error that loading `yaml` throws ("" when it loads).
std::string error_of(const std::string& yaml) {
  try {
    load_policy_text(yaml, "p.yaml");
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the default policy holds the table of design.md section 3", "[config]") {
  const policy_config p = load_policies({default_policy});
  CHECK(p.prefixes.ipv4_individual == 32);
  CHECK(p.prefixes.ipv4_network == 24);
  CHECK(p.prefixes.ipv6_subnet == 64);
  CHECK(p.prefixes.ipv6_provider == 48);
  REQUIRE(p.categories.size() == 4);

  struct expect {
    const char* category;
    std::size_t level;
    std::int64_t short_rate, short_burst, long_rate, long_burst;
  };
  const expect table[] = {
      {"auth", 0, 2, 5, 30, 30},
      {"auth", 1, 10, 25, 300, 30},
      {"auth", 2, 20, 50, 600, 60},
      {"auth", 3, 50, 125, 3000, 300},
      {"federation", 0, 5, 15, 1000, 100},
      {"federation", 1, 50, 125, 5000, 500},
      {"federation", 2, 10, 25, 5000, 500},
      {"federation", 3, 200, 500, 20000, 2000},
      {"general", 0, 20, 50, 5000, 500},
      {"general", 1, 100, 250, 50000, 5000},
      {"general", 2, 100, 250, 50000, 5000},
      {"general", 3, 500, 1250, 200000, 20000},
      {"websocket", 0, 10, 20, 200, 100},
      {"websocket", 1, 50, 125, 1000, 100},
      {"websocket", 2, 50, 125, 1000, 100},
      {"websocket", 3, 200, 500, 5000, 500},
  };
  for (const expect& e : table) {
    INFO(e.category << " level " << e.level);
    const category_config* c = p.category(e.category);
    REQUIRE(c != nullptr);
    REQUIRE(c->limits.size() > static_cast<std::size_t>(e.level));
    const auto& l = c->limits[e.level];
    CHECK(l.name == core::level_name(static_cast<core::level>(e.level)));
    CHECK(l.tiers[0]->rate == core::rate{e.short_rate, core::ns_per_s});
    CHECK(l.tiers[0]->burst == e.short_burst);
    CHECK(l.tiers[1]->rate == core::rate{e.long_rate, 3600 * core::ns_per_s});
    CHECK(l.tiers[1]->burst == e.long_burst);
    CHECK(c->cost == 1u);
  }
  const auto& auth = *p.category("auth");
  CHECK(auth.pow.enabled);
  CHECK(auth.pow.base_bits == 16u);
  CHECK(auth.pow.on_limit_bits == 20u);
  CHECK(auth.status_violations.at(401) == "failed_auth");
  CHECK_FALSE(p.category("federation")->pow.enabled);
  const auto& ws = p.category("websocket")->websocket.value();
  CHECK(ws.max_message_size == 1u << 20);
  CHECK(ws.messages->burst == 100u);
  CHECK(ws.max_connections_per_address == 10u);
  CHECK(ws.pings.burst == 20u);
  CHECK(ws.pings.rate.count == 10);

  const auto* failed_auth = p.violation("failed_auth");
  REQUIRE(failed_auth != nullptr);
  CHECK(failed_auth->individual);
  CHECK_FALSE(failed_auth->network);
  CHECK(failed_auth->ban->threshold == 20u);
  CHECK(failed_auth->ban->duration == std::chrono::hours(1));
  CHECK(p.violation("signature_failure")->ban->max_duration == std::chrono::hours(24));
  CHECK(p.violation("pow_failed")->network);
  CHECK(p.pow_counters.max_counter == 10u);
  CHECK(p.pow_counters.max_network_entries == 10'000u);
}

TEST_CASE("every policy error names file, line and key", "[config]") {
  struct bad {
    const char* yaml;
    const char* message;
  };
  const bad cases[] = {
      {"levels: { ipv4_individual: 32 }\nlimits: {}\n",
       "p.yaml:2: limits: unknown key (expected levels, categories, violations, pow_counters, "
       "tiers or penalties)"},
      {"levels: { ipv4_individual: 33 }\n",
       "p.yaml:1: levels.ipv4_individual: expected a whole number from 1 to 32, got '33'"},
      {"levels: { ipv6_subnet: 0 }\n",
       "p.yaml:1: levels.ipv6_subnet: expected a whole number from 1 to 64, got '0'"},
      {"levels: { ipv4_individual: 24, ipv4_network: 28 }\n",
       "p.yaml:1: levels: ipv4_network prefix /28 is longer than ipv4_individual /24"},
      {"levels: { ipv6_subnet: 48, ipv6_provider: 56 }\n",
       "p.yaml:1: levels: ipv6_provider prefix /56 is longer than ipv6_subnet /48"},
      {"levels: { ipv5: 1 }\n",
       "p.yaml:1: levels.ipv5: unknown key (expected ipv4_individual, ipv4_network, ipv6_subnet "
       "or ipv6_provider)"},
      {"categories:\n  auth:\n    limits:\n      ipv4_individual: { short: { rate: 2/x, burst: 5 } "
       "}\n",
       "p.yaml:4: categories.auth.limits.ipv4_individual.short.rate: invalid rate '2/x' (expected "
       "N/s, N/m or N/h with N from 1 to 1000000000)"},
      {"categories:\n  auth:\n    limits:\n      ipv4_individual: { short: { rate: 2/s, burst: 0 } "
       "}\n",
       "p.yaml:4: categories.auth.limits.ipv4_individual.short.burst: expected a whole number from "
       "1 to 1000000, got '0'"},
      {"categories:\n  auth:\n    limits:\n      ipv4_individual: { short: { rate: 2/s } }\n",
       "p.yaml:4: categories.auth.limits.ipv4_individual.short.burst: missing required key"},
      {"categories:\n  auth:\n    limits:\n      ipv4_individual: { short: { rate: 2/s, burst: 5, "
       "brust: 5 } }\n",
       "p.yaml:4: categories.auth.limits.ipv4_individual.short.brust: unknown key (expected rate "
       "or "
       "burst)"},
      {"tiers: { multipliers: { free: 1 }, default: gold }\n",
       "p.yaml:1: tiers.default: unknown tier 'gold' (not in tiers.multipliers)"},
      {"tiers: { multipliers: { free: 0 }, default: free }\n",
       "p.yaml:1: tiers.multipliers.free: a multiplier is a number from 0.01 to 1000"},
      {"tiers: { multipliers: { free: 1 }, default: free, from: [ overide ] }\n",
       "p.yaml:1: tiers.from[0]: expected override, jwt_claim, key_file, network or upstream"},
      {"tiers: { multipliers: { free: 1 }, default: free, tier_ttl: 0s }\n",
       "p.yaml:1: tiers.tier_ttl: must be longer than 0 and at most 720h"},
      {"tiers: { multipliers: { free: 1 }, default: free, from: [ { network: { file: nope.txt, "
       "tier: free } } ] }\n",
       "p.yaml:1: tiers.from[0].network.file: cannot read file 'nope.txt'"},
      {"tiers: { multipliers: { free: 1 }, default: free, pow_bits: { free: 40 } }\n",
       "p.yaml:1: tiers.pow_bits.free: expected a whole number from -32 to 32"},
      {"categories:\n  auth:\n    limits:\n      u: { key: { jwt_claim: 'org..plan' }, short: { "
       "rate: 1/s, burst: 1 } }\n",
       "p.yaml:4: categories.auth.limits.u.key.jwt_claim: invalid claim path 'org..plan' (names of "
       "A-Z a-z 0-9 _ : - joined by dots)"},
      {"categories:\n  auth:\n    limits:\n      u: { key: { client_cert: issuer }, short: { "
       "rate: 1/s, burst: 1 } }\n",
       "p.yaml:4: categories.auth.limits.u.key.client_cert: expected subject, san or sha256, not "
       "'issuer'"},
      {"categories:\n  auth:\n    limits:\n      u: { key: { client_cert: sha256, header: X }, "
       "short: { rate: 1/s, burst: 1 } }\n",
       "p.yaml:4: categories.auth.limits.u.key: name exactly one of header, query, cookie, bearer, "
       "jwt_claim, client_cert"},
      {"categories:\n  auth:\n    limits:\n      u: { key: [ individual ], short: { rate: 1/s, "
       "burst: 1 } }\n",
       "p.yaml:4: categories.auth.limits.u.key: a composite key has two to four parts"},
      {"categories:\n  auth:\n    limits:\n      u: { key: [ individual, global ], short: { "
       "rate: 1/s, burst: 1 } }\n",
       "p.yaml:4: categories.auth.limits.u.key[1]: expected individual, network, or a map with "
       "header, query, cookie, bearer, jwt_claim or client_cert"},
      {"categories:\n  auth:\n    limits:\n      u: { key: [ individual, individual ], short: { "
       "rate: 1/s, burst: 1 } }\n",
       "p.yaml:4: categories.auth.limits.u.key[1]: a part named twice"},
      {"categories:\n  auth:\n    limits:\n      u: { key: everyone, short: { rate: 1/s, burst: "
       "1 } }\n",
       "p.yaml:4: categories.auth.limits.u.key: expected global, individual, network, a map with "
       "header, query, cookie, bearer, jwt_claim or client_cert, or a list of these (a composite "
       "key)"},
      {"categories:\n  auth:\n    limits:\n      ipv4_individual: {}\n",
       "p.yaml:4: categories.auth.limits.ipv4_individual: a limit needs a short tier, a long tier "
       "or both (or a quota, or a concurrency)"},
      {"categories:\n  auth:\n    limits:\n      f: { key: individual, concurrency: 0 }\n",
       "p.yaml:4: categories.auth.limits.f.concurrency: expected a whole number from 1 to 1000000, "
       "got '0'"},
      {"categories:\n  auth:\n    limits:\n      f: { key: individual, concurrency: 5, short: { "
       "rate: 1/s, burst: 1 } }\n",
       "p.yaml:4: categories.auth.limits.f.concurrency: a concurrency limit has no rate tiers "
       "(short, long) nor quota: give it a limit of its own"},
      {"categories:\n  auth:\n    limits:\n      f: { key: global, concurrency: 5 }\n",
       "p.yaml:4: categories.auth.limits.f.concurrency: a concurrency limit is keyed, not global"},
      {"categories:\n  auth:\n    limits:\n      ipv4_indiviual: { short: { rate: 1/s, burst: 1 } "
       "}\n",
       "p.yaml:4: categories.auth.limits.ipv4_indiviual: limit 'ipv4_indiviual' needs a key "
       "(header, query, cookie, bearer, jwt_claim, client_cert, individual, network or global, or "
       "a "
       "list of "
       "these), or the name of an address level (ipv4_individual, "
       "ipv4_network, ipv6_subnet, ipv6_provider)"},
      {"categories:\n  auth:\n    limits:\n      identity: { short: { rate: 1/s, burst: 1 } }\n",
       "p.yaml:4: categories.auth.limits.identity.header: missing required key"},
      {"categories:\n  auth:\n    limits:\n      identity: { header: 'X Key', short: { rate: 1/s, "
       "burst: 1 } }\n",
       "p.yaml:4: categories.auth.limits.identity.header: invalid header name 'X Key'"},
      {"categories:\n  auth:\n    cost: 6\n    limits:\n      ipv4_individual: { short: { rate: "
       "2/s, burst: 5 } }\n",
       "p.yaml:3: categories.auth.cost: cost 6 exceeds burst 5 of ipv4_individual.short; such "
       "requests could never pass"},
      {"categories:\n  Auth: {}\n",
       "p.yaml:2: categories.Auth: invalid category name (use a-z, 0-9, _ and -)"},
      {"categories:\n  auth: { colour: red }\n",
       "p.yaml:2: categories.auth.colour: unknown key (expected cost, mode, limits, unlimited, "
       "pow, "
       "status_violations, websocket, cors or attack_mode)"},
      {"categories:\n  auth:\n    pow: { base_bits: 30, max_bits: 28 }\n",
       "p.yaml:3: categories.auth.pow: base_bits 30 exceeds max_bits 28"},
      {"categories:\n  auth:\n    pow: { enabled: yes }\n",
       "p.yaml:3: categories.auth.pow.enabled: expected true or false, got 'yes'"},
      {"categories:\n  auth:\n    pow: { on_limit_bits: 65 }\n",
       "p.yaml:3: categories.auth.pow.on_limit_bits: expected a whole number from 1 to 64, got "
       "'65'"},
      {"categories:\n  auth:\n    status_violations: { 401: nope }\n",
       "p.yaml:3: categories.auth.status_violations.401: unknown violation reason 'nope' (define "
       "it "
       "under violations)"},
      {"categories:\n  auth:\n    status_violations: { 99: failed_auth }\nviolations: { "
       "failed_auth: { levels: [individual] } }\n",
       "p.yaml:3: categories.auth.status_violations.99: expected an HTTP status from 100 to 599"},
      {"categories:\n  ws:\n    websocket: { on_excess: explode }\n",
       "p.yaml:3: categories.ws.websocket.on_excess: expected close or drop, got 'explode'"},
      {"categories:\n  ws:\n    websocket: { messages: { rate: 5/s, burst: 5, cost: per_byte } }\n",
       "p.yaml:3: categories.ws.websocket.messages.cost: expected per_message or per_kib, got "
       "'per_byte'"},
      {"categories:\n  ws:\n    websocket: { pings: { rate: 5/s } }\n",
       "p.yaml:3: categories.ws.websocket.pings.burst: missing required key"},
      {"categories:\n  ws:\n    websocket: { pings: { rate: 5/s, burst: 0 } }\n",
       "p.yaml:3: categories.ws.websocket.pings.burst: expected a whole number from 1 to 1000000, "
       "got '0'"},
      {"categories:\n  ws:\n    websocket: { idle_timeout: 5 }\n",
       "p.yaml:3: categories.ws.websocket.idle_timeout: invalid duration '5' (expected a number "
       "and ms, s, m, h or d, e.g. 30s)"},
      {"categories:\n  ws:\n    websocket: { max_message_size: 1MB2 }\n",
       "p.yaml:3: categories.ws.websocket.max_message_size: invalid size '1MB2' (expected bytes or "
       "a number and KiB, MiB or GiB)"},
      {"violations:\n  x: { levels: [individual, planet] }\n",
       "p.yaml:2: violations.x.levels[1]: expected individual or network, got 'planet'"},
      {"violations:\n  x: { levels: [] }\n",
       "p.yaml:2: violations.x.levels: name at least one of individual, network"},
      {"violations:\n  x: { levels: individual }\n",
       "p.yaml:2: violations.x.levels: expected a list"},
      {"violations:\n  x: { levels: [individual], ban: { threshold: 3, duration: 2h, max_duration: "
       "1h } }\n",
       "p.yaml:2: violations.x.ban.max_duration: must be at least the ban's duration"},
      {"violations:\n  x: { levels: [individual], ban: { threshold: 3, duration: 0s } }\n",
       "p.yaml:2: violations.x.ban.duration: must be longer than 0"},
      {"violations:\n  x: { levels: [individual], ban: { duration: 1h } }\n",
       "p.yaml:2: violations.x.ban.threshold: missing required key"},
      {"pow_counters: { decay_interval: 0s }\n",
       "p.yaml:1: pow_counters.decay_interval: must be longer than 0"},
      {"pow_counters: { max_counter: 0 }\n",
       "p.yaml:1: pow_counters.max_counter: expected a whole number from 1 to 1000, got '0'"},
      {"categories:\n  a: {}\n  a: {}\n", "p.yaml:3: categories.a: duplicate key"},
      {"categories:\n  [a]: {}\n", "p.yaml:2: categories: keys must be plain scalars"},
      {"categories:\n  ws:\n    websocket: { max_message_size: 0 }\n",
       "p.yaml:3: categories.ws.websocket.max_message_size: must be at least 1 byte"},
      {"violations:\n  Bad-Reason: { levels: [network] }\n",
       "p.yaml:2: violations.Bad-Reason: invalid violation reason (use a-z, 0-9, _ and -)"},
      {"categories: [a, b]\n", "p.yaml:1: categories: expected a mapping"},
      {"categories:\n  a: { cost: [1] }\n", "p.yaml:2: categories.a.cost: expected a single value"},
      {"categories:\n  a: { limits: { ipv4_individual: { short: { rate: 1/s, burst: 1 }\n",
       "p.yaml:3: YAML syntax: end of map flow not found"},
      {"categories:\n  a:\n    cors: { allow_origins: [\"https://A.example\"] }\n",
       "p.yaml:3: categories.a.cors.allow_origins[0]: invalid origin 'https://A.example' (expected "
       "\"*\" or scheme://host[:port] in lower case)"},
      {"categories:\n  a:\n    cors: { allow_origins: [\"https://a.example/app\"] }\n",
       "p.yaml:3: categories.a.cors.allow_origins[0]: invalid origin 'https://a.example/app' "
       "(expected \"*\" or scheme://host[:port] in lower case)"},
      {"categories:\n  a:\n    cors: { allow_origins: [] }\n",
       "p.yaml:3: categories.a.cors.allow_origins: at least one origin is needed"},
      {"categories:\n  a:\n    cors: { allow_origins: [\"*\"], allow_credentials: true }\n",
       "p.yaml:3: categories.a.cors.allow_origins: \"*\" cannot be combined with allow_credentials "
       "(browsers refuse it): list the origins"},
      {"categories:\n  a:\n    cors: { allow_origins: [\"*\"], allow_headers: [\"X A\"] }\n",
       "p.yaml:3: categories.a.cors.allow_headers[0]: invalid header name 'X A'"},
      {"categories:\n  a:\n    cors: { allow_origins: [\"*\"], max_age: 2d }\n",
       "p.yaml:3: categories.a.cors.max_age: at most 24h (browsers cap it lower still)"},
      {"categories:\n  a:\n    cors: { origins: [\"*\"] }\n",
       "p.yaml:3: categories.a.cors.origins: unknown key (expected allow_origins, "
       "allow_credentials, allow_methods, allow_headers, expose_headers or max_age)"},
      {"categories:\n  a:\n    cors: { allow_origins: [\"https://a.example:443\"] }\n",
       "p.yaml:3: categories.a.cors.allow_origins[0]: origin 'https://a.example:443' names the "
       "default port, which browsers leave out: write 'https://a.example'"},
      {"categories:\n  a:\n    cors: { allow_origins: [\"http://a.example:80\"] }\n",
       "p.yaml:3: categories.a.cors.allow_origins[0]: origin 'http://a.example:80' names the "
       "default port, which browsers leave out: write 'http://a.example'"},
      {"categories:\n  a:\n    cors: { allow_origins: [\"*\"], expose_headers: [\"E;Tag\"] }\n",
       "p.yaml:3: categories.a.cors.expose_headers[0]: invalid header name 'E;Tag'"},
  };
  for (const bad& b : cases) {
    INFO(b.yaml);
    CHECK(error_of(b.yaml) == b.message);
  }
}

TEST_CASE("policy files merge, and conflicts name both files", "[config]") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string a = dir + "/test-policy-a.yaml";
  const std::string b = dir + "/test-policy-b.yaml";
  std::ofstream(a) << "categories:\n  one: {}\nviolations:\n  v: { levels: [network] }\n";
  std::ofstream(b) << "categories:\n  two: { status_violations: { 403: v } }\n";
  const auto merged = load_policies({a, b});
  CHECK(merged.category("one") != nullptr);
  CHECK(merged.category("two")->status_violations.at(403) == "v");
  CHECK(merged.files.size() == 2);

  std::ofstream(b) << "violations:\n  v: { levels: [individual] }\n";
  try {
    load_policies({a, b});
    FAIL("duplicate violation accepted");
  } catch (const error& e) {
    CHECK(std::string(e.what()) ==
          b + ":2: violations.v: violation reason already defined in " + a);
    CHECK(e.file() == b);
    CHECK(e.line() == 2);
    CHECK(e.key() == "violations.v");
  }
  std::ofstream(b) << "categories:\n  one: { cost: 1 }\n";
  CHECK_THROWS_WITH(load_policies({a, b}),
                    b + ":2: categories.one: category already defined in " + a);
  std::ofstream(a) << "levels: { ipv4_network: 16 }\npow_counters: { max_counter: 5 }\n";
  std::ofstream(b) << "levels: { ipv4_network: 20 }\n";
  CHECK_THROWS_WITH(load_policies({a, b}), b + ":1: levels: levels already set in " + a);
  std::ofstream(b) << "\npow_counters: { max_counter: 3 }\n";
  CHECK_THROWS_WITH(load_policies({a, b}),
                    b + ":2: pow_counters: pow_counters already set in " + a);
  std::remove(a.c_str());
  std::remove(b.c_str());

  try {
    load_policies({dir + "/no-such-policy.yaml"});
    FAIL("missing file accepted");
  } catch (const error& e) {
    CHECK(std::string(e.what()) ==
          dir + "/no-such-policy.yaml: cannot read file: No such file or directory");
  }
}

TEST_CASE("omitted settings take their documented defaults", "[config]") {
  const auto p = load_policy_text("categories:\n  c: {}\n", "p.yaml");
  const auto& c = *p.category("c");
  CHECK(c.cost == 1u);
  CHECK_FALSE(c.pow.enabled);
  CHECK(c.pow.base_bits == 16u);
  CHECK(c.pow.step_bits == 2u);
  CHECK(c.pow.max_bits == 28u);
  CHECK(c.pow.on_limit_bits == 20u);
  CHECK(c.limits.empty());
  CHECK_FALSE(c.shadow);
  CHECK(p.prefixes.ipv4_network == 24);
  // pow_failed exists even when no file defines it, network level only.
  const auto* pf = p.violation("pow_failed");
  REQUIRE(pf != nullptr);
  CHECK(pf->network);
  CHECK_FALSE(pf->individual);
  CHECK(load_policy_text("", "empty.yaml").categories.empty());
}

TEST_CASE("the graduated-response example loads after the default policy", "[config]") {
  const std::string dir = std::string(TOLLGATE_SOURCE_DIR) + "/policies/";
  const auto p = config::load_policies({dir + "default.yaml", dir + "under-attack.yaml"});
  REQUIRE(p.penalties.has_value());
  CHECK(p.penalties->steps.size() == 6);
  CHECK(p.penalties->points.size() == 5);
  CHECK(p.penalties->steps.back().hold == std::chrono::hours(24));
  // default.yaml's commented attack mode, its comment marks taken away, is a valid one.
  std::ifstream in(dir + "default.yaml");
  std::string text, line;
  bool example = false;
  while (std::getline(in, line)) {
    if (line.find("# attack_mode:") != std::string::npos) example = true;
    if (example && line.empty()) example = false;
    if (example && line.rfind("    # ", 0) == 0) line = "    " + line.substr(6);
    text += line + "\n";
  }
  const auto on = config::load_policy_text(text, "default.yaml");
  const auto* general = on.category("general");
  REQUIRE(general != nullptr);
  REQUIRE(general->attack_mode.has_value());
  CHECK(general->attack_mode->levels[2].admit_cleared);
  CHECK(general->attack_mode->floor == 50);
  CHECK_FALSE(config::load_policies({dir + "default.yaml"}).category("general")->attack_mode);
  // Alone it names reasons only default.yaml defines.
  CHECK_THROWS_WITH(config::load_policies({dir + "under-attack.yaml"}),
                    Catch::Contains("unknown violation reason 'failed_auth'"));
}

TEST_CASE("the example policy of docs/consumers.md loads, with its tiers and key file",
          "[config]") {
  const auto p =
      config::load_policies({std::string(TOLLGATE_SOURCE_DIR) + "/policies/api-consumers.yaml"});
  REQUIRE(p.tiers.has_value());
  CHECK(p.tiers->default_tier == "free");
  REQUIRE(p.tiers->from.size() == 4);
  CHECK(p.tiers->from[0].source == config::tier_source_config::kind::overrides);
  const auto& keys = p.tiers->from[2].keys;
  REQUIRE(keys.size() == 3);
  CHECK(keys[2].first.rfind("sha256:", 0) == 0);
  CHECK(keys[2].second == "partner");
  CHECK(p.tiers->from[3].networks.size() == 3);
  CHECK(config::coverage_warnings(p).empty());
}
