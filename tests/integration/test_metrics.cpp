// The admin listener and its metrics, read by promtool and scraped by a real Prometheus.

#include <signal.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <thread>

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
)";

const std::string policy_yaml = R"(
categories:
  open:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  strict:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 2 }, long: { rate: 1/h, burst: 100 } }
)";

/// /metrics, checked to be Prometheus text format 0.0.4.
std::string metrics_of(const gateway& gw) {
  const auto r = request(gw.admin_port, get("/metrics"));
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type").rfind("text/plain; version=0.0.4", 0) == 0);
  return r.body;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

}  // namespace

TEST_CASE("metrics count requests by category and decision, and promtool accepts them",
          "[integration][metrics]") {
  echo_server echo;
  gateway gw(gateway_yaml, policy_yaml, echo.port);
  for (int i = 0; i < 3; ++i)
    CHECK(request(gw.port, get("/open")).status == 200);
  for (int i = 0; i < 5; ++i)
    request(gw.port, get("/strict"));
  const std::string text = metrics_of(gw);
  INFO(text);
  CHECK(has_line(text, R"(tollgate_requests_total{category="open",decision="allowed"} 3)"));
  CHECK(has_line(text, R"(tollgate_requests_total{category="strict",decision="allowed"} 2)"));
  CHECK(has_line(text, R"(tollgate_requests_total{category="strict",decision="limited"} 3)"));
  CHECK(has_line(
      text,
      R"(tollgate_rate_limited_total{category="strict",level="ipv4_individual",tier="short",mode="enforce"} 3)"));
  CHECK(has_line(text, R"(tollgate_tracked_keys{level="ipv4_individual"} 2)"));
  CHECK(has_line(text, R"(tollgate_upstream_duration_seconds_count{upstream="app"} 5)"));
  CHECK(has_line(text, R"(tollgate_limiter_check_seconds_count 8)"));
  // No client address is ever a label value (the upstream's endpoint is one, by design).
  const std::string endpoint = "endpoint=\"127.0.0.1:" + std::to_string(echo.port) + "\"";
  CHECK(text.find(endpoint) != std::string::npos);
  CHECK(text.find("127.0.0.1") == text.find(endpoint) + 10);
  CHECK(text.find("127.0.0.1", text.find(endpoint) + 11) == std::string::npos);

  std::string out;
  CHECK(run_with_input({"promtool", "check", "metrics"}, text, out) == 0);
  CHECK(out.empty());
}

TEST_CASE("health, readiness and unknown admin paths", "[integration][metrics]") {
  echo_server echo;
  gateway gw(gateway_yaml, policy_yaml, echo.port);
  CHECK(request(gw.admin_port, get("/healthz")).status == 200);
  const auto ready = request(gw.admin_port, get("/readyz"));
  CHECK(ready.status == 200);
  CHECK(ready.body == "ready\n");
  CHECK(request(gw.admin_port, get("/nope")).status == 404);
  CHECK(request(gw.admin_port, "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
            .status == 405);
}

TEST_CASE("reloads are counted by result", "[integration][metrics]") {
  echo_server echo;
  gateway gw(gateway_yaml, policy_yaml, echo.port);
  CHECK(gw.reload(gateway_yaml, "categories: { open: { cost: 0 } }").find("failed") !=
        std::string::npos);
  CHECK(gw.reload(gateway_yaml, policy_yaml).find("in force") != std::string::npos);
  const std::string text = metrics_of(gw);
  CHECK(has_line(text, R"(tollgate_config_reloads_total{result="failure"} 1)"));
  CHECK(has_line(text, R"(tollgate_config_reloads_total{result="success"} 1)"));
}

TEST_CASE("a real Prometheus server scrapes the admin listener", "[integration][metrics]") {
  echo_server echo;
  gateway gw(gateway_yaml, policy_yaml, echo.port);
  for (int i = 0; i < 4; ++i)
    CHECK(request(gw.port, get("/open")).status == 200);

  const auto dir = gw.dir / "prometheus";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "prometheus.yml") << "global: { scrape_interval: 1s }\n"
                                           "scrape_configs:\n"
                                           "  - job_name: tollgate\n"
                                           "    static_configs: [{ targets: ['127.0.0.1:"
                                        << gw.admin_port << "'] }]\n";
  const auto port = free_port();
  child prometheus({"/usr/bin/prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
                    "--storage.tsdb.path=" + (dir / "data").string(),
                    "--web.listen-address=127.0.0.1:" + std::to_string(port)});
  const std::string query =
      "/api/v1/"
      "query?query=tollgate_requests_total%7Bcategory%3D%22open%22%2Cdecision%3D%22allowed%22%7D";
  std::string body;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      body = request(port, get(query)).body;
      if (body.find(R"("value":[)") != std::string::npos) break;
    } catch (const std::exception&) {
      // Prometheus is still starting.
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  INFO(body);
  CHECK(body.find(R"("job":"tollgate")") != std::string::npos);
  CHECK(body.find(R"(,"4"])") != std::string::npos);
}
