// The admin API's operator controls through a real gateway and upstream on loopback: resetting
// a network, bans placed and lifted by hand, the most limited clients, audit lines, and the
// answers to bad input. Sources are addresses of 127.0.0.0/8 (all local on Linux), so each
// test has networks of its own.

#include <stdlib.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "harness.hpp"

using namespace tollgate::test;

namespace {

// Slow refills (1/h), so that what the test exhausts stays exhausted until it is reset.
const std::string gateway_yaml = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
logging: { level: info, format: json }
upstreams: { app: { endpoints: ["{echo}"] } }
routes:
  - { match: { path_prefix: /paid }, category: paid, upstream: app }
default_route: { category: open, upstream: app }
policies: ["{policy}"]
)";

const std::string policy_yaml = R"(
categories:
  open:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 2 } }
      ipv4_network:    { short: { rate: 1/h, burst: 4 } }
  paid:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
    pow: { enabled: true, on_limit: true, on_limit_bits: 8 }
violations:
  abuse:      { levels: [individual], ban: { threshold: 2, duration: 1h } }
  pow_failed: { levels: [network] }
)";

const std::string token_header = "Authorization: Bearer adm1n-t0ken\r\n";

/// Sets TOLLGATE_ADMIN_TOKEN while the gateway starts.
std::unique_ptr<gateway> start_gateway(std::uint16_t echo_port) {
  setenv("TOLLGATE_ADMIN_TOKEN", "adm1n-t0ken", 1);
  auto gw = std::make_unique<gateway>(gateway_yaml, policy_yaml, echo_port);
  unsetenv("TOLLGATE_ADMIN_TOKEN");
  return gw;
}

/// One admin request with the token, `body` as JSON when given.
response admin(const gateway& gw, const std::string& method, const std::string& target,
               const std::string& body = "") {
  return request(gw.admin_port, method + " " + target + " HTTP/1.1\r\nHost: a\r\n" + token_header +
                                    "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                                    body);
}

int status_from(const gateway& gw, const std::string& source, const std::string& path = "/x") {
  return request(gw.port, get(path), source).status;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Polls `f` every 50 ms for up to `limit`.
template <class F>
bool eventually(F f, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!f()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

}  // namespace

TEST_CASE("a network locked out by limits and bans is reset and served again, others kept",
          "[integration][admin]") {
  echo_server echo;
  const auto gw = start_gateway(echo.port);
  // 127.0.7.1 reports two violations (admitted, then banned); 127.0.7.2 spends its burst and
  // is limited; together they spend the /24's burst, so 127.0.7.3 is limited at the network.
  CHECK(status_from(*gw, "127.0.7.1", "/x?violation=abuse") == 200);
  CHECK(status_from(*gw, "127.0.7.1", "/x?violation=abuse") == 200);
  CHECK(status_from(*gw, "127.0.7.1") == 403);
  CHECK(status_from(*gw, "127.0.7.2") == 200);
  CHECK(status_from(*gw, "127.0.7.2") == 200);
  CHECK(status_from(*gw, "127.0.7.2") == 429);
  const auto network_limited = request(gw->port, get("/x"), "127.0.7.3");
  CHECK(network_limited.status == 429);
  CHECK(network_limited.header("x-ratelimit-level") == "ipv4_network");
  // Elsewhere: one address limited, one banned; neither is in the block reset below.
  CHECK(status_from(*gw, "127.0.8.1") == 200);
  CHECK(status_from(*gw, "127.0.8.1") == 200);
  CHECK(status_from(*gw, "127.0.8.1") == 429);
  CHECK(status_from(*gw, "127.0.8.2", "/x?violation=abuse") == 200);
  CHECK(status_from(*gw, "127.0.8.2", "/x?violation=abuse") == 200);
  CHECK(status_from(*gw, "127.0.8.2") == 403);

  const auto r = admin(*gw, "DELETE", "/admin/addresses/127.0.7.0/24");
  REQUIRE(r.status == 200);
  CHECK(has(r.body, R"("address":"127.0.7.0/24")"));
  CHECK(has(r.body, R"("automatic_bans_lifted":1)"));
  CHECK(has(r.body, R"("individual_entries":1)"));  // 127.0.7.1's counters
  // 127.0.7.1 and .2 in the open category, and the /24 (127.0.7.3 was refused: no entry).
  CHECK(has(r.body, R"("limiter_entries":3)"));

  const std::uint64_t before = echo.requests();
  CHECK(status_from(*gw, "127.0.7.1") == 200);
  CHECK(status_from(*gw, "127.0.7.2") == 200);
  CHECK(status_from(*gw, "127.0.7.3") == 200);
  CHECK(echo.requests() == before + 3);
  CHECK(status_from(*gw, "127.0.8.1") == 429);
  CHECK(status_from(*gw, "127.0.8.2") == 403);
  const auto bans = admin(*gw, "GET", "/admin/bans");
  CHECK(has(bans.body, R"("address":"127.0.8.2/32","kind":"automatic")"));
  CHECK_FALSE(has(bans.body, "127.0.7."));

  // One address: its counters, ban and both levels' state; its own answer says the /32.
  CHECK(admin(*gw, "DELETE", "/admin/addresses/127.0.8.2").status == 200);
  CHECK(status_from(*gw, "127.0.8.2") == 200);
  CHECK(gw->process->wait_for_line("action=reset target=127.0.7.0/24").find("result=200") !=
        std::string::npos);
}

TEST_CASE("a manual network ban answers 403 inside it, lists, expires and lifts",
          "[integration][admin]") {
  echo_server echo;
  const auto gw = start_gateway(echo.port);
  auto r = admin(*gw, "PUT", "/admin/bans/127.0.9.0/24?duration=2s&reason=load+test");
  REQUIRE(r.status == 201);
  CHECK(has(r.body, R"("address":"127.0.9.0/24","kind":"manual")"));
  const std::uint64_t before = echo.requests();
  for (const char* inside : {"127.0.9.1", "127.0.9.254"}) {
    INFO(inside);
    const auto refused = request(gw->port, get("/x"), inside);
    CHECK(refused.status == 403);
    CHECK(has(refused.body, R"("code":"banned")"));
    const int retry = std::stoi(refused.header("retry-after"));
    CHECK(retry >= 1);
    CHECK(retry <= 2);
    CHECK(status_from(*gw, inside, "/paid/x") == 403);  // every category
  }
  CHECK(echo.requests() == before);
  CHECK(status_from(*gw, "127.0.10.1") == 200);
  r = admin(*gw, "GET", "/admin/bans");
  CHECK(has(r.body, R"("address":"127.0.9.0/24","kind":"manual")"));
  CHECK(has(r.body, R"("reason":"load test")"));
  CHECK(has(metrics_text(*gw), "tollgate_active_bans 1"));

  // It ends by itself.
  CHECK(eventually([&] { return status_from(*gw, "127.0.9.1") == 200; }));
  CHECK(admin(*gw, "GET", "/admin/bans").body == R"({"bans":[]})");

  // Placed again (a JSON body this time) and lifted by hand; lifting twice is a 404.
  r = admin(*gw, "PUT", "/admin/bans/127.0.9.0%2F24", R"({"duration":"1h"})");
  CHECK(r.status == 201);
  CHECK(status_from(*gw, "127.0.9.1") == 403);
  r = admin(*gw, "PUT", "/admin/bans/127.0.9.0/24?duration=2h");
  CHECK(r.status == 200);  // replaced
  CHECK(has(r.body, R"("retry_after":7200)"));
  // An address inside is not banned itself: the answer names the ban that covers it.
  r = admin(*gw, "DELETE", "/admin/bans/127.0.9.1");
  CHECK(r.status == 404);
  CHECK(has(r.body, R"("covered_by":["127.0.9.0/24"])"));
  r = admin(*gw, "DELETE", "/admin/bans/127.0.9.0/24");
  CHECK(r.status == 200);
  CHECK(has(r.body, R"("kinds":["manual"])"));
  CHECK(status_from(*gw, "127.0.9.1") == 200);
  CHECK(admin(*gw, "DELETE", "/admin/bans/127.0.9.0/24").status == 404);
  // A ban inside a block does not cover the block.
  CHECK(admin(*gw, "PUT", "/admin/bans/127.0.9.7?duration=1m").status == 201);
  r = admin(*gw, "DELETE", "/admin/bans/127.0.9.0/24");
  CHECK(r.status == 404);
  CHECK(has(r.body, R"("covered_by":[])"));
  CHECK(status_from(*gw, "127.0.9.7") == 403);
  CHECK(status_from(*gw, "127.0.9.8") == 200);

  // One address by hand: that address only.
  CHECK(admin(*gw, "PUT", "/admin/bans/127.0.10.6?duration=10m").status == 201);
  CHECK(status_from(*gw, "127.0.10.6") == 403);
  CHECK(status_from(*gw, "127.0.10.7") == 200);
  CHECK(has(admin(*gw, "GET", "/admin/addresses/127.0.10.6").body,
            R"("manual_bans":["127.0.10.6/32"])"));
  // A reload keeps it, as it keeps automatic bans.
  CHECK(has(gw->reload(gateway_yaml, policy_yaml), "in force"));
  CHECK(status_from(*gw, "127.0.10.6") == 403);
}

TEST_CASE("the most limited addresses and networks are those the test limited most",
          "[integration][admin]") {
  echo_server echo;
  const auto gw = start_gateway(echo.port);
  // 429s: 127.0.11.1 five times, 127.0.11.2 twice; 428s (pay to pass): 127.0.12.1 three
  // times. Admitted requests are not counted.
  auto limited = [&](const std::string& source, const std::string& path, int n, int status) {
    for (int i = 0; i < n; ++i)
      CHECK(status_from(*gw, source, path) == status);
  };
  limited("127.0.11.1", "/x", 2, 200);
  limited("127.0.11.1", "/x", 5, 429);
  limited("127.0.11.2", "/x", 2, 200);
  limited("127.0.11.2", "/x", 2, 429);
  limited("127.0.12.1", "/paid/x", 1, 200);
  limited("127.0.12.1", "/paid/x", 3, 428);
  limited("127.0.13.1", "/x", 2, 200);

  auto r = admin(*gw, "GET", "/admin/limited?top=2");
  REQUIRE(r.status == 200);
  CHECK(has(r.body, R"("window_seconds":60)"));
  CHECK(has(r.body, R"("addresses":[{"address":"127.0.11.1/32","rejected":5,"overestimate":0},)"
                    R"({"address":"127.0.12.1/32","rejected":3,"overestimate":0}])"));
  CHECK(has(r.body, R"("networks":[{"address":"127.0.11.0/24","rejected":7,"overestimate":0},)"
                    R"({"address":"127.0.12.0/24","rejected":3,"overestimate":0}])"));
  r = admin(*gw, "GET", "/admin/limited");
  CHECK(has(r.body, R"({"address":"127.0.11.2/32","rejected":2,"overestimate":0})"));
  CHECK_FALSE(has(r.body, "127.0.13."));
  for (const char* bad : {"top=0", "top=65", "top=x", "count=3"}) {
    INFO(bad);
    r = admin(*gw, "GET", std::string("/admin/limited?") + bad);
    CHECK(r.status == 400);
    CHECK(r.header("content-type") == "application/problem+json");
  }
}

TEST_CASE("every admin change leaves one audit line, without the token", "[integration][admin]") {
  echo_server echo;
  const auto gw = start_gateway(echo.port);
  CHECK(admin(*gw, "PUT", "/admin/bans/127.0.14.0/24?duration=90s&reason=%22x%22").status == 201);
  CHECK(admin(*gw, "DELETE", "/admin/bans/127.0.14.0/24").status == 200);
  CHECK(admin(*gw, "DELETE", "/admin/addresses/127.0.14.9").status == 200);
  CHECK(admin(*gw, "PUT", "/admin/bans/127.0.14.9/24?duration=1h").status == 400);
  // Without the token: refused, and said so.
  CHECK(request(gw->admin_port,
                "PUT /admin/bans/127.0.15.0/24?duration=1h HTTP/1.1\r\nHost: a\r\n"
                "Content-Length: 0\r\n\r\n")
            .status == 401);
  CHECK(status_from(*gw, "127.0.15.1") == 200);

  // logging.format json: each audit line is one JSON object.
  const auto ban = gw->process->wait_for_line("admin audit: action=ban");
  CHECK(ban.rfind(R"({"time":")", 0) == 0);
  CHECK(has(ban, R"("level":"info")"));
  // The note is escaped twice: once in the line, once in the JSON object around it.
  CHECK(has(ban, R"(target=127.0.14.0/24 duration=90s reason=\"\\\"x\\\"\" result=201)"));
  CHECK(has(ban, "result=201 peer=127.0.0.1:"));
  CHECK(has(ban, "token=yes"));
  const auto unban = gw->process->wait_for_line("admin audit: action=unban");
  CHECK(has(unban, "target=127.0.14.0/24 kinds=manual result=200"));
  const auto reset = gw->process->wait_for_line("admin audit: action=reset");
  CHECK(has(reset, "target=127.0.14.9/32"));
  CHECK(has(reset, "result=200"));
  const auto bad = gw->process->wait_for_line("admin audit: action=ban");
  CHECK(has(bad, "result=400"));
  CHECK(has(bad, "host bits are set"));
  const auto refused = gw->process->wait_for_line("admin audit: action=refused");
  CHECK(has(refused, "result=401"));
  CHECK(has(refused, "token=absent"));
  CHECK_FALSE(has(gw->process->output(), "adm1n-t0ken"));
}

TEST_CASE("bad admin input is a 400 problem that says what is wrong", "[integration][admin]") {
  echo_server echo;
  const auto gw = start_gateway(echo.port);
  struct bad_case {
    std::string method, target, body, detail;
  };
  const bad_case cases[] = {
      {"PUT", "/admin/bans/127.0.16.1/24?duration=1h", "", "host bits are set"},
      {"PUT", "/admin/bans/not-an-ip?duration=1h", "", "not an IP address or CIDR block"},
      {"PUT", "/admin/bans/127.0.16.0/24", "", "duration is required"},
      {"PUT", "/admin/bans/127.0.16.0/24?duration=forever", "", "is not a duration"},
      {"PUT", "/admin/bans/127.0.16.0/24?duration=31d", "", "at most 30d"},
      {"PUT", "/admin/bans/127.0.16.0/24?duration=0s", "", "is not a duration"},
      {"PUT", "/admin/bans/127.0.16.0/24?for=1h", "", "unknown query parameter"},
      {"PUT", "/admin/bans/127.0.16.0/24", "{\"duration\":", "not a JSON object"},
      {"PUT", "/admin/bans/127.0.16.0/24", R"({"duration":3600})", "duration: a string"},
      {"PUT", "/admin/bans/127.0.16.0/24", R"({"until":"1h"})", "unknown member"},
      {"PUT", "/admin/bans/127.0.16.0/24?duration=1h&reason=a%0Ab", "", "control characters"},
      {"DELETE", "/admin/bans/127.0.16.0/33", "", "bad prefix length"},
      {"DELETE", "/admin/addresses/127.0.16", "", "not an IP address"},
      {"GET", "/admin/addresses/127.0.16.0/24", "", "GET takes one address"},
  };
  for (const auto& c : cases) {
    INFO(c.method << " " << c.target << " " << c.body);
    const auto r = admin(*gw, c.method, c.target, c.body);
    CHECK(r.status == 400);
    CHECK(r.header("content-type") == "application/problem+json");
    CHECK(has(r.body, R"("status":400)"));
    CHECK(has(r.body, c.detail));
  }
  CHECK(status_from(*gw, "127.0.16.1") == 200);  // nothing was banned
  CHECK(admin(*gw, "GET", "/admin/nothing").status == 404);
  const auto r = admin(*gw, "POST", "/admin/bans/127.0.16.1");
  CHECK(r.status == 405);
  CHECK(r.header("allow") == "PUT, DELETE");
}
