// The simulator (docs/design.md §13): a replay whose outcome is computed by hand from the policy's
// GCRA parameters, and --compare listing exactly the requests decided otherwise.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/sim/log_set.hpp"
#include "gateway/sim/replay.hpp"
#include "gateway/sim/report.hpp"
#include "temp_dir.hpp"

using namespace tollgate;
using namespace tollgate::sim;

namespace {

constexpr core::nanos ms = core::ns_per_ms;
constexpr core::nanos sec = core::ns_per_s;
/// 2026-11-23T09:24:23Z.
constexpr core::nanos t0 = 1'795'425'863 * sec;

/// `line` with the first `from` replaced by `to`.
std::string with(std::string line, const std::string& from, const std::string& to) {
  const auto at = line.find(from);
  REQUIRE(at != std::string::npos);
  return line.replace(at, from.size(), to);
}

}  // namespace

namespace {

using test::temp_dir;

const char* const replay_gateway = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 8080 }]
upstreams: { app: { endpoints: ["127.0.0.1:9000"] } }
routes:
  - { match: { path_prefix: /t/ }, category: tenant, upstream: app }
  - { match: { path_prefix: /p/ }, category: paid, upstream: app }
  - { match: { path_prefix: /d/ }, category: dry, upstream: app }
  - { match: { path_prefix: /ws/, header: { Upgrade: websocket } }, category: sockets, upstream: app }
default_route: { category: general, upstream: app }
policies: [policy.yaml]
access: { allow: [10.9.0.0/16], deny: [192.0.2.0/24] }
)";

/// T = 1 s everywhere; bursts 2 (general), 1 (the others).
const char* const replay_policy = R"(
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 2 } }
  tenant:
    limits:
      per_tenant: { key: { query: tenant }, short: { rate: 1/s, burst: 1 } }
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/s, burst: 1 } }
  paid:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
    pow: { on_limit: true, on_limit_bits: 4 }
  dry:
    mode: shadow
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
  sockets:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
)";

/// A text access line decided at t0 + `at`, logged `took` later.
std::string line(core::nanos at, const std::string& client, const std::string& target,
                 const std::string& decision, const std::string& limit = "-", unsigned status = 200,
                 core::nanos took = 2 * ms) {
  const core::nanos logged = t0 + at + took;
  std::string time = format_time(logged);  // microseconds
  char duration[32];
  std::snprintf(duration, sizeof duration, "%.6f", static_cast<double>(took) / sec);
  // The category the gateway logged: the route's (an upgrade's when under /ws/).
  const std::string category = target.starts_with("/t/")    ? "tenant"
                               : target.starts_with("/p/")  ? "paid"
                               : target.starts_with("/d/")  ? "dry"
                               : target.starts_with("/ws/") ? "sockets"
                                                            : "general";
  return time + " access " + client + " \"GET " + target + " HTTP/1.1\" " + std::to_string(status) +
         " category=" + category + " decision=" + decision + " limit=" + limit +
         " upstream=- upstream_time=- bytes=1 " + duration + "s\n";
}

const category_summary& category(const run_summary& r, const std::string& name) {
  for (const auto& c : r.categories) {
    if (c.name == name) return c;
  }
  FAIL("no category " << name);
  throw 0;
}

std::uint64_t count_of(const std::vector<std::pair<std::string, std::uint64_t>>& v,
                       const std::string& k) {
  for (const auto& [name, n] : v) {
    if (name == k) return n;
  }
  return 0;
}

}  // namespace

TEST_CASE("sim replay: a table of requests, counted by hand", "[sim]") {
  temp_dir dir;
  dir.write("policy.yaml", replay_policy);
  simulator sim(config::load_gateway(dir.write("gateway.yaml", replay_gateway)));
  const std::string S = "ipv4_individual.short";
  // Written out of time order (each line at its decision time + 2 ms, one at + 900 ms), so the
  // replay must sort them back. Hand count, T = 1 s, tau = T * (burst - 1):
  std::string log;
  // general, 10.0.0.1, burst 2: 0 and 0.1 pass (tat 2 s), 0.2 and 0.3 need now >= tat - tau =
  // 1 s: limited; 1.5 passes.
  log += line(1500 * ms, "10.0.0.1", "/g", "allowed");
  log += line(0, "10.0.0.1", "/g", "allowed", "-", 200, 900 * ms);
  log += line(100 * ms, "10.0.0.1", "/g", "allowed");
  log += line(200 * ms, "10.0.0.1", "/g", "limited", S, 429);
  log += line(300 * ms, "10.0.0.1", "/g", "limited", S, 429);
  // Another address has its own bucket; the allow list and the deny list come first.
  log += line(0, "10.0.0.2", "/g", "allowed");
  log += line(50 * ms, "10.0.0.2", "/g", "allowed");
  for (int i = 0; i < 4; ++i)
    log += line(i * ms, "10.9.0.1", "/g", "allowed");
  log += line(0, "192.0.2.1", "/g", "denied", "-", 403);
  // tenant: the query key limits; the header key never applies (a log has no headers).
  log += line(0, "10.0.1.1", "/t/x?tenant=a", "allowed");
  log += line(100 * ms, "10.0.1.2", "/t/x?tenant=a", "limited", "per_tenant.short", 429);
  log += line(100 * ms, "10.0.1.3", "/t/x?tenant=b", "allowed");
  log += line(200 * ms, "10.0.1.4", "/t/x", "allowed");
  // paid: pay to pass answers 428 instead of 429.
  log += line(0, "10.0.2.1", "/p/", "allowed");
  log += line(100 * ms, "10.0.2.1", "/p/", "challenged", S, 428);
  // dry: shadow mode forwards and commits nothing for the shadowed limit.
  log += line(0, "10.0.3.1", "/d/", "allowed");
  log += line(100 * ms, "10.0.3.1", "/d/", "shadow_limited", S);
  log += line(200 * ms, "10.0.3.1", "/d/", "shadow_limited", S);
  // sockets: a 101 is an upgrade; a 429 logged in category sockets was a refused one. The log
  // is wrong on purpose about the last: it says allowed.
  log += line(0, "10.0.4.1", "/ws/a", "allowed", "-", 101);
  log += line(10 * ms, "10.0.4.1", "/ws/a", "limited", S, 429);
  log += line(20 * ms, "10.0.4.1", "/ws/a", "allowed", "-", 429);
  // Bad lines: one that only the whole parse finds (a raw quote: found during the replay, in
  // time order), and one the first read finds.
  log += with(line(0, "10.0.0.9", "/g", "allowed"), "/g", "/g\"");
  log += "2026-11-23T09:24:24.000Z nonsense\n";
  log_set logs({dir.write("access.log", log)});
  logs.index({});
  CHECK(logs.counts().reordered > 0);
  const replay_result r = replay(logs, sim, nullptr, {});
  REQUIRE(logs.counts().requests == 24);
  CHECK(logs.counts().bad == 2);
  REQUIRE(logs.bad_lines().size() == 2);
  CHECK(logs.bad_lines()[0].line == 25);
  CHECK(logs.bad_lines()[1].line == 26);
  const run_summary s = summarise(r.runs[0], sim, 10);

  const auto& g = category(s, "general");
  CHECK(g.requests == 12);
  CHECK(g.admitted == 9);
  CHECK(g.exempt == 4);
  CHECK(g.outcomes[static_cast<int>(core::outcome::limited)] == 2);
  CHECK(g.outcomes[static_cast<int>(core::outcome::denied)] == 1);
  CHECK(g.limited_by == decltype(g.limited_by){{S, 2}});
  CHECK(g.top_addresses == decltype(g.top_addresses){{"10.0.0.1", 2}});
  CHECK(g.top_networks == decltype(g.top_networks){{"10.0.0.0/24", 2}});

  const auto& t = category(s, "tenant");
  CHECK((t.requests == 4 && t.admitted == 3));
  CHECK(count_of(t.limited_by, "per_tenant.short") == 1);
  CHECK(count_of(t.unkeyed, "per_tenant") == 1);
  CHECK(count_of(t.unkeyed, "per_key") == 4);

  const auto& p = category(s, "paid");
  CHECK((p.requests == 2 && p.admitted == 1));
  CHECK(p.outcomes[static_cast<int>(core::outcome::challenged)] == 1);
  CHECK(count_of(p.limited_by, S) == 1);

  const auto& d = category(s, "dry");
  CHECK((d.requests == 3 && d.admitted == 3));
  CHECK(d.outcomes[static_cast<int>(core::outcome::shadow_limited)] == 2);
  CHECK(count_of(d.shadow_by, S) == 2);
  CHECK(d.limited_by.empty());

  const auto& w = category(s, "sockets");
  CHECK((w.requests == 3 && w.admitted == 1));
  CHECK(r.upgrades == 3);
  // Every logged decision but the wrong one agrees.
  CHECK(r.agreement.compared == 24);
  CHECK(r.agreement.differ == 1);
  REQUIRE(r.agreement.first.size() == 1);
  CHECK(r.agreement.first[0].line == 24);
  CHECK(r.agreement.first[0].decision[1] == "limited");
}

TEST_CASE("sim replay: --compare lists exactly the requests decided otherwise", "[sim]") {
  temp_dir dir;
  dir.write("policy.yaml", replay_policy);
  simulator a(config::load_gateway(dir.write("gateway.yaml", replay_gateway)));
  std::string strict = replay_policy;
  strict.replace(strict.find("burst: 2"), 8, "burst: 1");
  dir.write("strict.yaml", strict);
  std::string gw = replay_gateway;
  gw.replace(gw.find("[policy.yaml]"), 13, "[strict.yaml]");
  simulator b(config::load_gateway(dir.write("strict_gateway.yaml", gw)));
  std::string log;
  // Burst 2 admits 0 and 0.1 s; burst 1 only 0 s. At 1.05 s: burst 2 has tat 2 s, tau 1 s:
  // passes; burst 1 has tat 1 s, tau 0: passes too. At 1.1 s only burst 2 (tat 3 s, tau 1 s)
  // still rejects, burst 1 (tat 2.05 s) too: both limited.
  log += line(0, "10.0.0.1", "/g", "allowed");
  log += line(100 * ms, "10.0.0.1", "/g", "allowed");
  log += line(1050 * ms, "10.0.0.1", "/g", "allowed");
  log += line(1100 * ms, "10.0.0.1", "/g", "limited", "ipv4_individual.short", 429);
  log_set logs({dir.write("access.log", log)});
  logs.index({});
  const replay_result r = replay(logs, a, &b, {});
  REQUIRE(r.differences_total == 1);
  REQUIRE(r.differences.size() == 1);
  CHECK(r.differences[0].line == 2);
  CHECK((r.differences[0].decision[0] == "allowed" && r.differences[0].decision[1] == "limited"));
  CHECK(r.differences[0].limit[1] == "ipv4_individual.short");
}

TEST_CASE("sim report: a target's bytes cannot forge lines of the text report", "[sim]") {
  temp_dir dir;
  dir.write("policy.yaml", replay_policy);
  simulator sim(config::load_gateway(dir.write("gateway.yaml", replay_gateway)));
  std::string log = line(0, "10.0.0.1", "/g", "allowed");
  // Logged as limited: the simulation allows it, so it is listed, its target escaped.
  log += with(line(0, "10.0.0.2", "/g", "limited", "ipv4_individual.short", 429), "/g",
              "/g\\x0aforged\\x20line\\x1b[2J");
  log_set logs({dir.write("access.log", log)});
  logs.index({});
  const replay_result r = replay(logs, sim, nullptr, {});
  REQUIRE(r.agreement.first.size() == 1);
  CHECK(r.agreement.first[0].target == "/g\nforged line\x1b[2J");
  const std::string text = text_report({logs, r, {summarise(r.runs[0], sim, 10)}, 0, 50});
  CHECK(text.find("GET /g\\x0aforged\\x20line\\x1b[2J: logged limited") != std::string::npos);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find("\nforged") == std::string::npos);
}
