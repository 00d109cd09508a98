// The shipped configuration (config/gateway.yaml, policies/default.yaml) through HTTP.

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <sstream>

#include "harness.hpp"

using namespace tollgate::test;

namespace {

std::string shipped_gateway_yaml() {
  std::ifstream in(std::string(TOLLGATE_SOURCE_DIR) + "/config/gateway.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = yaml.find(from);
    REQUIRE(at != std::string::npos);
    yaml.replace(at, from.size(), to);
  };
  // Loopback and kernel-chosen ports for the test; everything else as shipped.
  replace("address: 0.0.0.0\n    port: 8080", "address: 127.0.0.1\n    port: 0");
  replace("port: 9090", "port: 0");
  replace("\"127.0.0.1:9000\"", "\"{echo}\"");
  replace("../policies/default.yaml", std::string(TOLLGATE_SOURCE_DIR) + "/policies/default.yaml");
  // The access log in the test's own directory rather than the repository's build/.
  replace("access_log: ../build/access.log", "access_log: access.log");
  return yaml;
}

}  // namespace

TEST_CASE("the shipped configuration limits each category as design.md section 3 says",
          "[integration][default]") {
  echo_server echo;
  gateway gw(shipped_gateway_yaml(), "", echo.port);
  struct category_case {
    const char* category;
    std::string request;
    int burst;
    double per_second;
  };
  const category_case cases[] = {
      {"auth", "POST /api/auth/login HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", 5, 2},
      {"federation", get("/api/inbox/1"), 15, 5},
      {"general", get("/api/profiles/x"), 50, 20},
      {"websocket", get("/ws/crdt/doc", "Upgrade: websocket\r\nConnection: Upgrade\r\n"), 20, 10},
  };
  int network = 1;
  for (const auto& c : cases) {
    INFO(c.category);
    // Each category from its own /24, so no network limit is shared between them.
    const std::string source = "127.0." + std::to_string(network++) + ".9";
    const int sent = c.burst + 5;
    std::string raw;
    for (int i = 0; i < sent; ++i)
      raw += c.request;
    const auto start = std::chrono::steady_clock::now();
    const auto rs = exchange(gw.port, raw, static_cast<std::size_t>(sent), source);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int allowed = 0;
    for (const auto& r : rs) {
      if (r.status == 200) {
        ++allowed;
        CHECK(r.header("x-ratelimit-limit") == std::to_string(c.burst));
      } else {
        CHECK(r.status == 429);
        CHECK(r.header("x-ratelimit-level") == "ipv4_individual");
        CHECK(r.header("x-ratelimit-reason") == "burst_exhausted");
      }
    }
    // Exactly the burst, plus what the rate refilled while the requests were on their way.
    CHECK(allowed >= c.burst);
    CHECK(allowed <= c.burst + static_cast<int>(elapsed * c.per_second) + 1);
    CHECK(allowed < sent);
  }
  const auto metrics = request(gw.admin_port, get("/metrics")).body;
  for (const char* category : {"auth", "federation", "general", "websocket"}) {
    INFO(category);
    CHECK(metrics.find(std::string("tollgate_requests_total{category=\"") + category +
                       "\",decision=\"limited\"}") != std::string::npos);
  }
}

TEST_CASE("the shipped auth routes catch the spellings upstreams serve as the same route",
          "[integration][default]") {
  echo_server echo;
  gateway gw(shipped_gateway_yaml(), "", echo.port);
  const char* const targets[] = {"/api/auth/login/", "/API/auth/login", "/api/auth/login;x=1",
                                 "/Api/Auth/Login/;jsessionid=7"};
  int network = 1;
  for (const char* target : targets) {
    INFO(target);
    const std::string source = "127.0." + std::to_string(network++) + ".9";
    const int sent = 12;  // auth: burst 5, 2/s; general would take 50
    std::string raw;
    for (int i = 0; i < sent; ++i)
      raw += std::string("POST ") + target + " HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
    const auto rs = exchange(gw.port, raw, static_cast<std::size_t>(sent), source);
    REQUIRE(rs[0].status == 200);
    CHECK(rs[0].header("x-ratelimit-limit") == "5");
    // The upstream gets the target as the client sent it.
    CHECK(rs[0].body.find(std::string(R"("target":")") + target + "\"") != std::string::npos);
    int limited = 0;
    for (const auto& r : rs) {
      if (r.status == 429) ++limited;
    }
    CHECK(limited >= 1);
  }
  // The method is still part of the rule: a GET of the same spelling is general.
  const auto r = request(gw.port, get("/API/auth/login/"), "127.0.9.9");
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-limit") == "50");
  const auto metrics = request(gw.admin_port, get("/metrics")).body;
  CHECK(metrics.find(R"(tollgate_requests_total{category="auth",decision="limited"})") !=
        std::string::npos);
}
