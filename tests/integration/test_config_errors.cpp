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
