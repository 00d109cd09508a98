// Configuration files that cannot be loaded (a folder, broken YAML): --check-config and
// start-up say so and exit 1, and a reload keeps the running configuration and counts it.

#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "harness.hpp"

using namespace tollgate::test;

namespace {

namespace fs = std::filesystem;

const std::string gateway_yaml = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
upstreams: { app: { endpoints: ["{echo}"] } }
routes:
  - { match: { path_prefix: /strict }, category: strict, upstream: app }
default_route: { category: open, upstream: app }
policies: ["{policy}"]
)";

const std::string policy_yaml = R"(
categories:
  open:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  strict:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 2 } }
)";

/// `gateway_yaml` naming a second policy file, `extra` (relative to the gateway file).
std::string with_policy(const std::string& extra) {
  std::string yaml = gateway_yaml;
  const std::string from = R"(policies: ["{policy}"])";
  yaml.replace(yaml.find(from), from.size(), R"(policies: ["{policy}", ")" + extra + "\"]");
  return yaml;
}

const std::string failures = R"(tollgate_config_reloads_total{result="failure"})";
const std::string successes = R"(tollgate_config_reloads_total{result="success"})";

/// A folder with a valid policy, a folder named like a policy file, and a broken policy.
struct scratch {
  fs::path dir = fs::temp_directory_path() / ("tollgate-cfg-" + std::to_string(getpid()));
  scratch() {
    fs::create_directories(dir / "folder.yaml");
    std::ofstream(dir / "p.yaml") << "categories: { general: {} }\n";
    std::ofstream(dir / "broken.yaml") << "categories:\n  general: {}\n  auth: { cost: 1\n";
  }
  ~scratch() { fs::remove_all(dir); }
  /// Writes g.yaml naming p.yaml and `extra`, and returns its path.
  std::string gateway(const std::string& extra) const {
    std::ofstream(dir / "g.yaml") << "listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
                                     "admin: { address: 127.0.0.1, port: 0 }\n"
                                     "upstreams: { app: { endpoints: ['127.0.0.1:1'] } }\n"
                                     "default_route: { category: general, upstream: app }\n"
                                     "policies: [p.yaml, "
                                  << extra << "]\n";
    return (dir / "g.yaml").string();
  }
};

}  // namespace

TEST_CASE("a reload naming a folder as a policy file keeps the running configuration",
          "[integration][reload]") {
  echo_server echo;
  gateway gw(gateway_yaml, policy_yaml, echo.port);
  CHECK(sample(metrics_text(gw), failures) == 0);
  for (int i = 0; i < 2; ++i)
    CHECK(request(gw.port, get("/strict")).status == 200);

  fs::create_directories(gw.dir / "folder.yaml");
  std::string bigger = policy_yaml;
  bigger.replace(bigger.find("burst: 2"), 8, "burst: 4");
  const auto line = gw.reload(with_policy("folder.yaml"), bigger);
  CHECK(line.find("reload failed") != std::string::npos);
  CHECK(line.find((gw.dir / "folder.yaml").string() + ": cannot read file: it is a directory") !=
        std::string::npos);
  // Still serving, with the old limits and their state: the burst of 2 is spent.
  auto r = request(gw.port, get("/strict"));
  CHECK(r.status == 429);
  CHECK(r.header("x-ratelimit-limit") == "2");
  CHECK(request(gw.port, get("/open")).status == 200);
  CHECK(sample(metrics_text(gw), failures) == 1);
  CHECK(sample(metrics_text(gw), successes) == 0);

  // A broken YAML file the same way; then a good reload still takes effect.
  std::ofstream(gw.dir / "broken.yaml") << "categories:\n  x: { cost: 1\n";
  CHECK(gw.reload(with_policy("broken.yaml"), bigger).find("broken.yaml:3: YAML syntax") !=
        std::string::npos);
  CHECK(sample(metrics_text(gw), failures) == 2);
  CHECK(gw.reload(gateway_yaml, bigger).find("in force") != std::string::npos);
  CHECK(sample(metrics_text(gw), successes) == 1);
  r = request(gw.port, get("/strict"));
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-limit") == "4");
}

TEST_CASE("tollgate --check-config and start-up report an unloadable policy file and exit 1",
          "[integration]") {
  scratch s;
  const std::string folder = (s.dir / "folder.yaml").string();
  child check({built("tollgate"), "--check-config", s.gateway("folder.yaml")});
  CHECK(check.wait_for_line("folder.yaml") == folder + ": cannot read file: it is a directory");
  CHECK(check.wait() == 1);

  child start({built("tollgate"), "--config", s.gateway("folder.yaml")});
  const auto line = start.wait_for_line("folder.yaml");
  CHECK(line.find("[critical] " + folder + ": cannot read file: it is a directory") !=
        std::string::npos);
  CHECK(start.wait() == 1);

  child broken({built("tollgate"), "--check-config", s.gateway("broken.yaml")});
  CHECK(broken.wait_for_line("broken.yaml") ==
        (s.dir / "broken.yaml").string() + ":4: YAML syntax: end of map flow not found");
  CHECK(broken.wait() == 1);
}

TEST_CASE("a category leaving a family or every request unlimited is reported unless it says so",
          "[integration]") {
  scratch s;
  std::ofstream(s.dir / "traps.yaml")
      << "categories:\n"
         "  v4_only:\n"
         "    limits:\n"
         "      ipv4_individual: { short: { rate: 1/s, burst: 1 } }\n"
         "  nothing: { limits: {} }\n"
         "  meant: { unlimited: true, limits: {} }\n"
         "  whole:\n"
         "    limits:\n"
         "      ipv4_network: { short: { rate: 1/s, burst: 1 } }\n"
         "      ipv6_provider: { short: { rate: 1/s, burst: 1 } }\n"
         "  everyone: { limits: { all: { key: global, short: { rate: 1/s, burst: 1 } } } }\n";
  const std::string file = (s.dir / "traps.yaml").string();
  const std::string v4_only =
      file +
      ":2: categories.v4_only: limits IPv4 clients only (no ipv6_subnet or "
      "ipv6_provider limit): IPv6 clients are unlimited; add a limit for them, or say "
      "unlimited: true if that is meant";
  const std::string nothing =
      file +
      ":5: categories.nothing: limits no request by its address and has no global "
      "limit (a keyed limit binds only requests that carry its key): every other request "
      "is unlimited; add a limit, or say unlimited: true if that is meant";
  const std::string path = s.gateway("traps.yaml");
  {
    child check({built("tollgate"), "--check-config", path});
    CHECK(check.wait_for_line("v4_only") == "warning: " + v4_only);
    CHECK(check.wait_for_line("nothing") == "warning: " + nothing);
    CHECK(check.wait_for_line(": ok") ==
          path + ": ok (1 listeners, 1 upstreams, 0 routes, 6 categories)");
    CHECK(check.wait() == 0);  // a warning, not an error
    // p.yaml's general has no limits at all: named too. meant (unlimited: true), whole (both
    // families) and everyone (a global limit) are not.
    CHECK(check.output().find("p.yaml:1: categories.general: limits no request") !=
          std::string::npos);
    CHECK(check.output().find("categories.meant") == std::string::npos);
    CHECK(check.output().find("categories.whole") == std::string::npos);
    CHECK(check.output().find("categories.everyone") == std::string::npos);
  }
  child start({built("tollgate"), "--config", path});
  CHECK(start.wait_for_line("categories.v4_only").find("[warning] " + v4_only) !=
        std::string::npos);
  CHECK(start.wait_for_line("categories.nothing").find("[warning] " + nothing) !=
        std::string::npos);
  start.wait_for_line("listening on public");
}
