// Tenants per Host (docs/design.md §15, "Tenants (per Host)"): a Host names a `hosts` entry
// (exact names before wildcards, one label for "*.", without case or port), whose routes and
// categories apply; its limits' state is named apart from every other entry's; its errors name
// file, line and key; its metrics carry a `host` label.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gateway/admission/admission.hpp"
#include "gateway/config/error.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/core/text.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/metrics/exposition.hpp"
#include "gateway/policy/tenants.hpp"

using namespace tollgate;

namespace {

namespace fs = std::filesystem;

const core::nanos now = 1'735'000'000 * core::ns_per_s;

/// A scratch folder holding a top-level policy (general, burst 3), two tenants' (general,
/// bursts 2 and 5; b also `reports`), and the gateway files the tests write.
struct scratch {
  fs::path dir;
  scratch() {
    dir = fs::temp_directory_path() / ("tollgate-hosts-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "top.yaml") << "categories:\n  general:\n    limits:\n"
                                       "      ipv4_individual: { short: { rate: 1/m, burst: 3 } }\n"
                                       "violations:\n  rejected: { levels: [individual] }\n";
    std::ofstream(dir / "a.yaml") << "categories:\n  general:\n    limits:\n"
                                     "      ipv4_individual: { short: { rate: 1/m, burst: 2 } }\n"
                                     "    status_violations: { 403: rejected }\n";
    std::ofstream(dir / "b.yaml") << "categories:\n  general:\n    limits:\n"
                                     "      ipv4_individual: { short: { rate: 1/m, burst: 5 } }\n"
                                     "  reports:\n    limits:\n"
                                     "      ipv4_individual: { short: { rate: 1/m, burst: 1 } }\n";
  }
  ~scratch() { fs::remove_all(dir); }
  std::string write(const std::string& text) const {
    const auto path = (dir / "g.yaml").string();
    std::ofstream(path) << text;
    return path;
  }
  void put(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
  }
};

const std::string top =
    "listeners: [{ name: public, address: 0.0.0.0, port: 8080 }]\n"
    "upstreams: { app: { endpoints: ['127.0.0.1:9000'] } }\n"
    "default_route: { category: general, upstream: app }\n"
    "policies: [top.yaml]\n";

const std::string two_hosts =
    top +
    "hosts:\n"
    "  - names: [api.example.com, \"*.Tenant.Example.com\"]\n"
    "    default_route: { category: general, upstream: app }\n"
    "    policies: [a.yaml]\n"
    "  - names: [b.example.com, special.tenant.example.com]\n"
    "    routes: [{ match: { path_prefix: /reports }, category: reports, upstream: app }]\n"
    "    default_route: { category: general, upstream: app }\n"
    "    policies: [b.yaml]\n";

std::string error_of(const scratch& s, const std::string& text) {
  try {
    config::load_gateway(s.write(text));
  } catch (const config::error& e) {
    std::string what = e.what();
    const std::string prefix = s.dir.string() + "/";
    for (auto at = what.find(prefix); at != std::string::npos; at = what.find(prefix))
      what.erase(at, prefix.size());
    return what;
  }
  return "";
}

/// Fields from "Name: value" lines.
class string_headers final : public admission::header_source {
 public:
  explicit string_headers(std::string_view text) {
    while (!text.empty()) {
      const auto end = text.find('\n');
      const std::string_view line = text.substr(0, end);
      text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
      const auto colon = line.find(':');
      if (colon != std::string_view::npos) {
        fields_.emplace_back(std::string(line.substr(0, colon)),
                             std::string(core::trim(line.substr(colon + 1))));
      }
    }
  }
  std::string_view value(std::string_view name) const override {
    for (const auto& [n, v] : fields_) {
      if (core::iequals(n, name)) return v;
    }
    return {};
  }
  std::size_t count(std::string_view name) const override {
    std::size_t n = 0;
    for (const auto& f : fields_)
      n += core::iequals(f.first, name) ? 1 : 0;
    return n;
  }
  void each(std::string_view name, void (*f)(void*, std::string_view),
            void* context) const override {
    for (const auto& [n, v] : fields_) {
      if (core::iequals(n, name)) f(context, v);
    }
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

/// One gateway's admission over `two_hosts`, with a memory store that answers at once.
struct world {
  scratch files;
  config::gateway_config cfg = config::load_gateway(files.write(two_hosts));
  policy::compiled_policy compiled{cfg.policy, {1, 2}};
  policy::tenants hosts{cfg, compiled, {1, 2}};
  policy::router router{cfg, compiled, &hosts};
  policy::pow_state pow{"hosts-test-secret", cfg.pow, cfg.policy.pow_counters};
  policy::gate gate{pow};
  limit::memory_store store{{}, 3};
  admission::setting setting{cfg, compiled, router, nullptr, gate, pow};
  admission::record r;

  /// The top level's policy and both entries'.
  std::vector<const policy::compiled_policy*> all() const {
    return {&compiled, &hosts.entries()[0].policy, &hosts.entries()[1].policy};
  }

  /// GET `target` with Host `host` from `peer`: its status.
  int get(std::string_view host, std::string_view target = "/",
          std::string_view peer = "203.0.113.7") {
    const std::string fields = host.empty() ? std::string() : "Host: " + std::string(host) + "\n";
    const string_headers headers(fields);
    const admission::request_view v{"GET", target, &headers, core::address::parse(peer).value(),
                                    false, false,  false,    true,
                                    true,  now};
    admission::step s = admission::admit(setting, v, r);
    if (s == admission::step::ask_store) {
      r.decision = store.decide(r.limits);
      s = admission::after_store(setting, r);
    }
    return s == admission::step::forward ? 200 : r.reply.status;
  }
};

}  // namespace

TEST_CASE("a Host names a host entry: exact before wildcard, one label, no case, no port") {
  world w;
  struct row {
    const char* host;
    int entry;  ///< -1: the top level
  };
  const row rows[] = {
      {"api.example.com", 0},
      {"API.Example.COM", 0},
      {"api.example.com:8443", 0},
      {"api.example.com.", 0},
      {" api.example.com ", 0},
      {"a.tenant.example.com", 0},
      {"A-1.TENANT.example.com:80", 0},
      {"special.tenant.example.com", 1},  // exact, before entry 0's wildcard
      {"b.example.com", 1},
      {"tenant.example.com", -1},      // the wildcard needs a label in front
      {"a.b.tenant.example.com", -1},  // and only one
      {".tenant.example.com", -1},
      {"example.com", -1},
      {"other.example.com", -1},
      {"", -1},
      {"[::1]:8080", -1},
      {"127.0.0.1", -1},
  };
  for (const auto& x : rows) {
    INFO("Host: '" << x.host << "'");
    const policy::tenant* t = w.hosts.find(x.host);
    if (x.entry < 0) {
      CHECK(t == nullptr);
    } else {
      REQUIRE(t != nullptr);
      CHECK(t == &w.hosts.entries()[static_cast<std::size_t>(x.entry)]);
    }
  }
  CHECK(w.hosts.entries()[0].label == "api.example.com");
  CHECK(w.hosts.entries()[1].label == "b.example.com");
}

TEST_CASE("a host entry's routes and categories apply to its Host, the top level's to others") {
  world w;
  struct row {
    const char* host;
    const char* target;
    const char* category;
    const policy::compiled_policy* policy;
  };
  const row rows[] = {
      {"api.example.com", "/reports", "general", &w.hosts.entries()[0].policy},
      {"b.example.com", "/reports/x", "reports", &w.hosts.entries()[1].policy},
      {"b.example.com", "/", "general", &w.hosts.entries()[1].policy},
      {"elsewhere.example", "/reports", "general", &w.compiled},
      {"", "/", "general", &w.compiled},
  };
  for (const auto& x : rows) {
    INFO(x.host << " " << x.target);
    CHECK(w.get(x.host, x.target) == 200);
    REQUIRE(w.r.route != nullptr);
    CHECK(w.r.category().name == x.category);
    CHECK(w.r.route->policy == x.policy);
  }
}

TEST_CASE("two hosts' categories of one name keep their state apart") {
  world w;
  const auto state_of = [](const policy::compiled_policy& p) {
    return p.find("general")->limits.at(0).state_name;
  };
  CHECK(state_of(w.compiled) == "general/ipv4_individual/32");
  CHECK(state_of(w.hosts.entries()[0].policy) == "api.example.com@general/ipv4_individual/32");
  CHECK(state_of(w.hosts.entries()[1].policy) == "b.example.com@general/ipv4_individual/32");
  std::set<std::uint32_t> scopes;
  for (const policy::compiled_policy* p : w.all())
    scopes.insert(p->find("general")->limits.at(0).scope);
  CHECK(scopes.size() == 3);
  // Categories are numbered across the configuration: per-category tables index them so.
  std::vector<std::uint16_t> indices;
  for (const policy::compiled_policy* p : w.all())
    for (const auto& c : p->categories())
      indices.push_back(c.index);
  CHECK(indices == std::vector<std::uint16_t>{0, 1, 2, 3});

  // One client: host a's burst of 2 spent leaves host b's 5 and the top level's 3 whole.
  std::vector<int> a, b, other;
  for (int i = 0; i < 3; ++i)
    a.push_back(w.get("x.tenant.example.com"));
  CHECK(a == std::vector<int>{200, 200, 429});
  CHECK(w.r.rate.limit == "2");
  for (int i = 0; i < 6; ++i)
    b.push_back(w.get("b.example.com"));
  CHECK(b == std::vector<int>{200, 200, 200, 200, 200, 429});
  CHECK(w.r.rate.limit == "5");
  for (int i = 0; i < 4; ++i)
    other.push_back(w.get("c.example.com"));
  CHECK(other == std::vector<int>{200, 200, 200, 429});
  CHECK(w.r.rate.limit == "3");
  // Another name of the same entry shares its state.
  CHECK(w.get("api.example.com") == 429);
}

TEST_CASE("host entries' errors name file, line and key") {
  scratch s;
  s.put("levels.yaml", "levels: { ipv4_individual: 32 }\ncategories:\n  general: {}\n");
  s.put("ladder.yaml",
        "penalties: { points: { rate_limited: 1 }, steps: [{ at: 1, action: warn }] }\n");
  s.put("bad.yaml",
        "categories:\n  general:\n    limits:\n      ipv4_individual: { short: "
        "{ rate: 1/m, burst: 0 } }\n");
  s.put("why.yaml", "categories:\n  general:\n    status_violations: { 403: nope }\n");
  const auto host = [](const std::string& entry) { return top + "hosts:\n" + entry; };
  const std::string dr = "    default_route: { category: general, upstream: app }\n";
  struct bad {
    std::string yaml;
    std::string message;
  };
  const bad cases[] = {
      {host("  - { default_route: { category: general, upstream: app }, policies: [a.yaml] }\n"),
       "g.yaml:6: hosts[0].names: missing required key"},
      {host("  - names: []\n" + dr + "    policies: [a.yaml]\n"),
       "g.yaml:6: hosts[0].names: list at least one name"},
      {host("  - names: [a.example, \"b example\"]\n" + dr + "    policies: [a.yaml]\n"),
       "g.yaml:6: hosts[0].names[1]: invalid host name 'b example' (expected a DNS name, or "
       "\"*.\" and one; without a port)"},
      {host("  - names: [\"a.example:8080\"]\n" + dr + "    policies: [a.yaml]\n"),
       "g.yaml:6: hosts[0].names[0]: invalid host name 'a.example:8080' (expected a DNS name, "
       "or \"*.\" and one; without a port)"},
      {host("  - names: [\"*.*.example\"]\n" + dr + "    policies: [a.yaml]\n"),
       "g.yaml:6: hosts[0].names[0]: invalid host name '*.*.example' (expected a DNS name, or "
       "\"*.\" and one; without a port)"},
      {host("  - names: [a..example]\n" + dr + "    policies: [a.yaml]\n"),
       "g.yaml:6: hosts[0].names[0]: invalid host name 'a..example' (expected a DNS name, or "
       "\"*.\" and one; without a port)"},
      {host("  - names: [a.example]\n" + dr + "    policies: [a.yaml]\n" +
            "  - names: [b.example, A.Example]\n" + dr + "    policies: [b.yaml]\n"),
       "g.yaml:9: hosts[1].names[1]: 'a.example' is already a name of hosts[0]"},
      {host("  - names: [a.example]\n" + dr), "g.yaml:6: hosts[0].policies: missing required key"},
      {host("  - names: [a.example]\n" + dr + "    policies: []\n"),
       "g.yaml:8: hosts[0].policies: at least one policy file is needed"},
      {host("  - names: [a.example]\n    policies: [a.yaml]\n"),
       "g.yaml:6: hosts[0].default_route: missing required key"},
      {host("  - names: [a.example]\n    default_route: { category: reports, upstream: app }\n"
            "    policies: [a.yaml]\n"),
       "g.yaml:7: hosts[0].default_route.category: unknown category 'reports' (not defined in "
       "the policy files)"},
      {host("  - names: [a.example]\n" + dr + "    policies: [a.yaml]\n" +
            "    routes: [{ match: { path: /x }, category: general, upstream: nope }]\n"),
       "g.yaml:9: hosts[0].routes[0].upstream: unknown upstream 'nope'"},
      {host("  - names: [a.example]\n" + dr + "    policies: [a.yaml]\n    colour: red\n"),
       "g.yaml:9: hosts[0].colour: unknown key (expected names, routes, default_route or "
       "policies)"},
      {host("  - names: [a.example]\n" + dr + "    policies: [levels.yaml]\n"),
       "levels.yaml:1: levels: levels are the gateway's, set in its top-level policies: a "
       "host's policy files define categories and tiers"},
      {host("  - names: [a.example]\n" + dr + "    policies: [ladder.yaml]\n"),
       "ladder.yaml:1: penalties: penalties are the gateway's, set in its top-level policies: a "
       "host's policy files define categories and tiers"},
      {host("  - names: [a.example]\n" + dr + "    policies: [bad.yaml]\n"),
       "bad.yaml:4: categories.general.limits.ipv4_individual.short.burst: expected a whole "
       "number from 1 to 1000000, got '0'"},
      {host("  - names: [a.example]\n" + dr + "    policies: [why.yaml]\n"),
       "why.yaml:3: categories.general.status_violations.403: unknown violation reason 'nope' "
       "(define it under violations)"},
      {host("  - names: [a.example]\n" + dr + "    policies: [missing.yaml]\n"),
       "missing.yaml: cannot read file: No such file or directory"},
  };
  for (const auto& b : cases) {
    INFO(b.yaml);
    CHECK(error_of(s, b.yaml) == b.message);
  }
}

TEST_CASE("a host entry's policy names the gateway's violations and keeps its address levels") {
  scratch s;
  const auto g = config::load_gateway(s.write(two_hosts));
  REQUIRE(g.hosts.size() == 2);
  CHECK(g.hosts[0].names == std::vector<std::string>{"api.example.com", "*.tenant.example.com"});
  CHECK(g.hosts[0].policy.category("general")->status_violations.at(403) == "rejected");
  CHECK(g.hosts[1].routes.size() == 1);
  CHECK(g.hosts[1].routes[0].category == "reports");
  std::vector<std::string> reasons, top_reasons;
  for (const auto& v : g.hosts[1].policy.violations)
    reasons.push_back(v.name);
  for (const auto& v : g.policy.violations)
    top_reasons.push_back(v.name);
  CHECK(reasons == top_reasons);
}

TEST_CASE("metrics carry a host label for the categories of a configuration with hosts") {
  metrics::registry r;
  metrics::worker_counters w;
  const auto top_general = r.categories.index(metrics::host_category("", "general"));
  const auto a_general = r.categories.index(metrics::host_category("api.example.com", "general"));
  w.requests[a_general][0].add(7);
  metrics::scrape_values v;
  v.categories = {top_general, a_general};
  v.category_limits = {{}, {}};
  const std::string text = metrics::render({&w}, r, v);
  CHECK(text.find("tollgate_requests_total{category=\"general\",host=\"api.example.com\","
                  "decision=\"allowed\"} 7") != std::string::npos);
  CHECK(text.find("tollgate_requests_total{category=\"general\",host=\"\",decision=\"allowed\"} "
                  "0") != std::string::npos);
  // Families without a category have no host label.
  CHECK(text.find("tollgate_upstream_errors_total{host") == std::string::npos);
  CHECK(text.find("tollgate_limiter_check_seconds_count{host") == std::string::npos);
}
