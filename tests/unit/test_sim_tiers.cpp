// Consumer tiers in the simulator (docs/design.md §13 and §15): the tier sources a log cannot
// feed give way to the logged tier, in the policy's order; a replay scales each request's limits
// by its tier exactly as the gateway did.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/sim/log_set.hpp"
#include "gateway/sim/logged_tiers.hpp"
#include "gateway/sim/replay.hpp"
#include "gateway/sim/report.hpp"
#include "temp_dir.hpp"

using namespace tollgate;
using namespace tollgate::sim;

namespace {

using kind = config::tier_source_config::kind;

constexpr core::nanos ms = core::ns_per_ms;
/// 2026-11-23T09:24:23Z.
constexpr core::nanos t0 = 1'795'425'863 * core::ns_per_s;

/// A source of `k`; a key file keyed on `key` (a header, or "?name" for a query parameter).
config::tier_source_config source(kind k, const std::string& key = "X-Api-Key") {
  config::tier_source_config s;
  s.source = k;
  if (k == kind::jwt_claim) s.claim = "plan";
  if (k == kind::key_file) {
    s.key = key.starts_with("?") ? config::key_part_config{core::key_source::query, key.substr(1)}
                                 : config::key_part_config{core::key_source::header, key};
    s.keys = {{"k-1", "premium"}};
  }
  if (k == kind::network) s.tier = "restricted";
  return s;
}

/// `from` as with_logged_tiers leaves it: "logged", "network", "query:<name>" or the kind.
std::string rewritten(const std::vector<config::tier_source_config>& from) {
  config::policy_config p;
  p.tiers.emplace();
  p.tiers->multipliers = {{"restricted", 0.5}, {"free", 1}, {"premium", 3}};
  p.tiers->from = from;
  const config::policy_config out = with_logged_tiers(p);
  std::string text;
  for (const auto& s : out.tiers->from) {
    if (!text.empty()) text += ", ";
    if (s.source == kind::network) {
      text += "network";
    } else if (s.source == kind::key_file && s.key.source == core::key_source::query) {
      text += "query:" + s.key.name;
    } else if (s.source == kind::key_file && s.key.name == logged_tier_field) {
      // Each tier's name names itself; nothing else does, and nothing is refused.
      CHECK(s.keys == decltype(s.keys){
                          {"restricted", "restricted"}, {"free", "free"}, {"premium", "premium"}});
      CHECK_FALSE(s.reject_unknown);
      text += "logged";
    } else {
      text += "unchanged";
    }
  }
  return text;
}

using test::temp_dir;

const char* const tiers_gateway = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 8080 }]
upstreams: { app: { endpoints: ["127.0.0.1:9000"] } }
default_route: { category: general, upstream: app }
policies: [policy.yaml]
)";

/// A burst of 2 a minute, x0.5 / x1 / x3; `from` is the tiers' source list.
std::string tiers_policy(const std::string& from) {
  return "tiers:\n"
         "  multipliers: { restricted: 0.5, free: 1, premium: 3 }\n"
         "  default: free\n"
         "  from:\n" +
         from +
         "categories:\n"
         "  general:\n"
         "    limits:\n"
         "      ipv4_individual: { short: { rate: 1/m, burst: 2 } }\n";
}

/// The usual order: a claim, a key file on a header, the data centres' network file.
const std::string claim_key_network =
    "    - jwt_claim: plan\n"
    "    - key_file: { file: keys.yaml, key: { header: X-Api-Key }, unknown: reject }\n"
    "    - network: { file: datacenters.txt, tier: restricted }\n";

/// `n` text access lines of `client` asking `target`, one a millisecond from t0, the gateway
/// having named `tier` ("" for none).
std::string lines(int n, const std::string& client, const std::string& tier,
                  const std::string& target = "/g") {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += format_time(t0 + i * ms + ms) + " access " + client + " \"GET " + target +
           " HTTP/1.1\" 200 category=general decision=allowed limit=- " +
           (tier.empty() ? "" : "consumer_tier=" + tier + " ") +
           "upstream=app upstream_time=0.000100 bytes=1 0.001000s\n";
  }
  return out;
}

/// The replay of `log` under the policy whose tiers come `from`, summarised.
run_summary replayed(const std::string& from, const std::string& log) {
  temp_dir dir;
  dir.write("policy.yaml", tiers_policy(from));
  dir.write("keys.yaml", "k-1: premium\nk-2: free\n");
  dir.write("datacenters.txt", "203.0.113.0/24\n");
  simulator sim(config::load_gateway(dir.write("gateway.yaml", tiers_gateway)));
  log_set logs({dir.write("access.log", log)});
  logs.index({});
  const replay_result r = replay(logs, sim, nullptr, {});
  REQUIRE(logs.counts().bad == 0);
  return summarise(r.runs[0], sim, 20);
}

using counted = std::vector<std::pair<std::string, std::uint64_t>>;

/// How many requests of `address` were limited in `s`.
std::uint64_t limited(const run_summary& s, const std::string& address) {
  for (const auto& [a, n] : s.categories.at(0).top_addresses) {
    if (a == address) return n;
  }
  return 0;
}

}  // namespace

TEST_CASE("sim tiers: the sources a log cannot feed give way to the logged tier, in place",
          "[sim]") {
  // (from, as the replay reads it)
  const std::vector<std::pair<std::vector<config::tier_source_config>, std::string>> table = {
      {{source(kind::jwt_claim), source(kind::key_file), source(kind::network)}, "logged, network"},
      {{source(kind::network), source(kind::jwt_claim)}, "network, logged"},
      {{source(kind::upstream)}, "logged"},
      {{source(kind::key_file, "?api_key"), source(kind::upstream), source(kind::network)},
       "query:api_key, logged, network"},
      {{source(kind::jwt_claim), source(kind::network), source(kind::key_file)}, "logged, network"},
      {{source(kind::network)}, "network"},
      {{}, ""},
  };
  for (const auto& [from, want] : table) {
    INFO(want);
    CHECK(rewritten(from) == want);
  }
  // A policy without tiers stays as it is.
  CHECK_FALSE(with_logged_tiers(config::policy_config{}).tiers);
}

TEST_CASE("sim tiers: each request replays at its logged tier, scaled by its multiplier", "[sim]") {
  // Ten requests at once from each address, a burst of 2 x the tier's multiplier.
  std::string log;
  log += lines(10, "10.0.0.1", "free");        // 2 pass, 8 limited
  log += lines(10, "10.0.0.2", "premium");     // 6 pass, 4 limited
  log += lines(10, "10.0.0.3", "restricted");  // 1 passes, 9 limited
  log += lines(10, "10.0.0.4", "gold");        // not a tier here: the default, free
  log += lines(10, "10.0.0.5", "");            // none logged: the default, free
  log += lines(10, "203.0.113.9", "");         // none logged, a data centre: restricted
  // A data centre's premium key (the key file comes before the network file): premium.
  log += lines(10, "203.0.113.10", "premium");
  const run_summary s = replayed(claim_key_network, log);
  const auto& g = s.categories.at(0);
  CHECK(limited(s, "10.0.0.1") == 8);
  CHECK(limited(s, "10.0.0.2") == 4);
  CHECK(limited(s, "10.0.0.3") == 9);
  CHECK(limited(s, "10.0.0.4") == 8);
  CHECK(limited(s, "10.0.0.5") == 8);
  CHECK(limited(s, "203.0.113.9") == 9);
  CHECK(limited(s, "203.0.113.10") == 4);
  CHECK(g.tier_requests == counted{{"restricted", 20}, {"free", 30}, {"premium", 20}});
  CHECK(g.tier_limited == counted{{"restricted", 18}, {"free", 24}, {"premium", 8}});
}

TEST_CASE("sim tiers: the policy's order holds where the log can feed a source", "[sim]") {
  SECTION("a network file before the identities wins over the logged tier") {
    const run_summary s = replayed(
        "    - network: { file: datacenters.txt, tier: restricted }\n"
        "    - key_file: { file: keys.yaml, key: { header: X-Api-Key }, unknown: default }\n",
        lines(4, "203.0.113.9", "premium") + lines(4, "10.0.0.1", "premium"));
    CHECK(limited(s, "203.0.113.9") == 3);
    CHECK(limited(s, "10.0.0.1") == 0);
  }
  SECTION("a key file keyed on a query parameter reads the logged target") {
    const run_summary s = replayed(
        "    - key_file: { file: keys.yaml, key: { query: key }, unknown: reject }\n"
        "    - upstream\n",
        lines(8, "10.0.0.1", "free", "/g?key=k-1") + lines(3, "10.0.0.2", "premium", "/g?key=k-2") +
            lines(8, "10.0.0.3", "premium") + lines(2, "10.0.0.4", "", "/g?key=k-9"));
    // k-1 is premium whatever the line says; k-2 free; no key: the logged tier (the upstream's).
    CHECK(limited(s, "10.0.0.1") == 2);
    CHECK(limited(s, "10.0.0.2") == 1);
    CHECK(limited(s, "10.0.0.3") == 2);
    // A key the file does not hold is refused, as the gateway refused it.
    CHECK(s.categories.at(0).outcomes[static_cast<int>(core::outcome::unauthorized)] == 2);
  }
  SECTION("a policy that cannot name the logged tier does not give it") {
    const run_summary s =
        replayed("    - network: { file: datacenters.txt, tier: restricted }\n",
                 lines(4, "10.0.0.1", "premium") + lines(4, "203.0.113.9", "premium"));
    CHECK(limited(s, "10.0.0.1") == 2);
    CHECK(limited(s, "203.0.113.9") == 3);
  }
}
