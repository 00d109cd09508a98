// Reload through a real process: what a SIGHUP changes, what it refuses to change live, and
// what it logs about it.

#include <unistd.h>
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace tollgate::test;

namespace {

const std::string gateway_yaml = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
upstreams: { app: { endpoints: ["{echo}"] } }
routes:
  - { match: { path_prefix: /strict }, category: strict, upstream: app }
default_route: { category: open, upstream: app }
policies: ["{policy}"]
logging: { level: info, access_log: false }
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

/// `text` with its first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

/// The keys of the "reload: KEY changed; takes effect at restart" lines in `log`, in order.
std::vector<std::string> restart_keys(const std::string& log) {
  static const std::string head = "reload: ";
  static const std::string tail = " changed; takes effect at restart";
  std::vector<std::string> out;
  for (auto at = log.find(tail); at != std::string::npos; at = log.find(tail, at + 1)) {
    const auto start = log.rfind(head, at) + head.size();
    out.push_back(log.substr(start, at - start));
  }
  return out;
}

/// Reloads `gw` with `yaml` and `policy` and waits until it is in force; returns what the
/// gateway logged meanwhile.
std::string reload_in_force(gateway& gw, const std::string& yaml, const std::string& policy) {
  const auto before = gw.process->output().size();
  // The first line about the reload: a restart-only key, or already the last one.
  if (gw.reload(yaml, policy).find("in force") == std::string::npos) {
    gw.process->wait_for_line("in force");
  }
  return gw.process->output().substr(before);
}

/// A folder of its own for the test, removed at the end.
struct scratch_dir {
  scratch_dir() { std::filesystem::create_directories(path); }
  ~scratch_dir() { std::filesystem::remove_all(path); }
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("tollgate-reload-" + std::to_string(getpid()));
};

const std::string successes = R"(tollgate_config_reloads_total{result="success"})";

}  // namespace

TEST_CASE("a reload names each changed restart-only key, keeps it, and applies the rest",
          "[integration][reload]") {
  echo_server echo;
  gateway gw(gateway_yaml, policy_yaml, echo.port);
  CHECK(request(gw.port, get("/strict")).status == 200);
  CHECK(request(gw.port, get("/strict")).status == 200);
  CHECK(request(gw.port, get("/strict")).status == 429);

  // Restart-only: the listener's port, the admin port, the workers. Live: a burst, the
  // access log.
  const std::uint16_t new_public = free_port();
  const std::uint16_t new_admin = free_port();
  std::string yaml =
      replaced(gateway_yaml, "port: 0 }]", "port: " + std::to_string(new_public) + " }]");
  yaml = replaced(yaml, "admin: { address: 127.0.0.1, port: 0 }",
                  "admin: { address: 127.0.0.1, port: " + std::to_string(new_admin) + " }");
  yaml = replaced(yaml, "workers: 2", "workers: 1");
  yaml = replaced(yaml, "access_log: false", "access_log: true");
  const auto log = reload_in_force(gw, yaml, replaced(policy_yaml, "burst: 2", "burst: 4"));
  INFO(log);
  CHECK(restart_keys(log) ==
        std::vector<std::string>{"listeners.public.port", "admin.port", "workers"});
  CHECK(log.find("reload: listeners.public.port changed; takes effect at restart") !=
        std::string::npos);

  // The new burst is in force, with the state of the old one: two more requests.
  auto r = request(gw.port, get("/strict"));
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-limit") == "4");
  CHECK(gw.process->wait_for_line("access ").find("\"GET /strict HTTP/1.1\" 200") !=
        std::string::npos);
  // The listeners are where they were, and nothing listens where the new file says.
  CHECK(sample(metrics_text(gw), successes) == 1);
  CHECK_THROWS(request(new_admin, get("/metrics")));
  CHECK_THROWS(request(new_public, get("/strict")));

  // Reloading the same file again says the same: the running values still differ from it.
  CHECK(restart_keys(reload_in_force(gw, yaml, replaced(policy_yaml, "burst: 2", "burst: 4"))) ==
        std::vector<std::string>{"listeners.public.port", "admin.port", "workers"});
  // Back to the running values: nothing to say.
  CHECK(restart_keys(reload_in_force(gw, gateway_yaml, policy_yaml)).empty());
  CHECK(sample(metrics_text(gw), successes) == 3);
}

TEST_CASE("a reload changes the logging level live", "[integration][reload]") {
  echo_server echo;
  const std::string logged = replaced(gateway_yaml, "access_log: false", "access_log: true");
  gateway gw(logged, policy_yaml, echo.port);
  CHECK(request(gw.port, get("/one")).status == 200);
  gw.process->wait_for_line("\"GET /one HTTP/1.1\" 200");

  // At warn, info lines (SIGUSR1's "access log reopened") are silent; the access log is not
  // one of them: it has its own switch. The next reload, changing the workers, logs at warn:
  // every line the gateway wrote before it is read by then.
  const std::string quiet = replaced(logged, "level: info", "level: warn");
  reload_in_force(gw, quiet, policy_yaml);
  const auto before = gw.process->output().size();
  CHECK(request(gw.port, get("/two")).status == 200);
  gw.process->wait_for_line("\"GET /two HTTP/1.1\" 200");
  gw.process->signal(SIGUSR1);
  // Read up to this reload's own "in force" line (written at warn): left unread, it would end
  // the next reload's wait early, and the SIGUSR1 below could then overtake that reload's
  // SIGHUP and be handled while the level is still warn.
  const auto log = reload_in_force(gw, replaced(quiet, "workers: 2", "workers: 3"), policy_yaml);
  CHECK(log.find("reload: workers changed") != std::string::npos);
  const auto after = gw.process->output().substr(before);
  INFO(after);
  CHECK(after.find("access log reopened") == std::string::npos);
  // Back at info, the same signal is logged.
  reload_in_force(gw, logged, policy_yaml);
  gw.process->signal(SIGUSR1);
  CHECK(!gw.process->wait_for_line("access log reopened").empty());
}

TEST_CASE("a reload renaming a TLS listener keeps it serving with its certificate",
          "[integration][reload][tls]") {
  const scratch_dir dir;
  const std::string cert = (dir.path / "cert.pem").string();
  const std::string key = (dir.path / "key.pem").string();
  std::string out;
  REQUIRE(run_with_input(
              {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
               "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=localhost",
               "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert},
              "", out) == 0);
  const std::string tls =
      replaced(gateway_yaml, "port: 0 }]",
               "port: 0, tls: { certificate: " + cert + ", private_key: " + key + " } }]");
  echo_server echo;
  gateway gw(tls, policy_yaml, echo.port);
  const auto https = [&](const std::string& target) {
    return run_with_input({"curl", "-s", "-o", "/dev/null", "--max-time", "10", "--cacert", cert,
                           "https://127.0.0.1:" + std::to_string(gw.port) + target},
                          "", out);
  };
  CHECK(https("/before") == 0);

  // Sessions find their listener's TLS context by name: under the new name there would be
  // none, and every handshake would be refused.
  const auto log = reload_in_force(gw, replaced(tls, "name: public", "name: secure"), policy_yaml);
  CHECK(restart_keys(log) == std::vector<std::string>{"listeners.public", "listeners.secure"});
  CHECK(https("/after") == 0);
  CHECK(echo.requests() == 2);
}

TEST_CASE("the upstream pool follows reloads that add and remove upstreams",
          "[integration][reload]") {
  echo_server first;
  echo_server second;
  // One worker, so that every request meets the same pool; /b goes to the second upstream
  // when there is one.
  const std::string one = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
upstreams: { a: { endpoints: ["{echo}"] } }
default_route: { category: open, upstream: a }
policies: ["{policy}"]
)";
  const std::string two =
      replaced(replaced(one, "upstreams: { a: { endpoints: [\"{echo}\"] } }",
                        "upstreams: { a: { endpoints: [\"{echo}\"] }, b: { endpoints: [\"{echo}\", "
                        "\"127.0.0.1:" +
                            std::to_string(second.port) + "\"] } }"),
               "default_route:",
               "routes: [{ match: { path_prefix: /b }, category: open, upstream: b }]\n"
               "default_route:");
  gateway gw(one, policy_yaml, first.port);
  std::uint64_t to_second = 0;
  for (int round = 0; round < 25; ++round) {
    INFO("round " << round);
    // Keep-alive requests leave connections in the pool of the snapshot in force.
    for (const auto& r : exchange(gw.port, get("/b") + get("/b"), 2))
      CHECK(r.status == 200);
    // Two reloads without a request between them: the pool last saw the first snapshot,
    // which is gone by the second reload.
    reload_in_force(gw, two, policy_yaml);
    reload_in_force(gw, two, policy_yaml);
    for (const auto& r : exchange(gw.port, get("/b") + get("/b") + get("/b") + get("/b"), 4))
      CHECK(r.status == 200);
    to_second += 2;  // round-robin over b's two endpoints
    CHECK(second.requests() == to_second);
    reload_in_force(gw, one, policy_yaml);
  }
}
