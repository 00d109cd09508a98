// Calendar quotas (docs/design.md §3, "Quotas") through a real tollgate in front of a real
// tollgate-echo: exactly the quota's requests pass, then 429 quota_exceeded until the next UTC
// midnight; and a gateway whose clock is set a few seconds before midnight
// (TOLLGATE_TEST_CLOCK_OFFSET_MS) starts the new day's count exactly at midnight, with the
// in-process store and with Redis.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "tests/redis/support.hpp"

using namespace tollgate::test;

namespace {

using std::chrono::milliseconds;

constexpr std::int64_t day_ms = 86'400'000;

/// The real clock, in Unix milliseconds.
std::int64_t unix_ms() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A gateway file with one worker per `workers`, every request in category `general`, and
/// `store` (a YAML mapping).
std::string gateway_yaml(const std::string& store, int workers = 2) {
  return "listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
         "admin: { address: 127.0.0.1, port: 0 }\n"
         "workers: " +
         std::to_string(workers) +
         "\n"
         "upstreams: { app: { endpoints: [\"{echo}\"] } }\n"
         "default_route: { category: general, upstream: app }\n"
         "policies: [\"{policy}\"]\n"
         "store: " +
         store + "\n";
}

/// A wide address limit and a daily quota of `n` per API key.
std::string daily_policy(int n) {
  return policy_yaml(
      "      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }\n"
      "      daily: { key: { header: X-Api-Key }, quota: { limit: " +
      std::to_string(n) + ", period: day } }\n");
}

std::string with_key(const std::string& key) {
  return get("/q", "X-Api-Key: " + key + "\r\n");
}

int retry_after(const response& r) {
  return std::atoi(r.header("retry-after").c_str());
}

}  // namespace

TEST_CASE("a daily quota of N passes exactly N requests, then 429 quota_exceeded until midnight",
          "[quota]") {
  // Not across a real midnight: that is the next test's, on a clock set for it.
  if (const std::int64_t left = day_ms - unix_ms() % day_ms; left < 20'000) {
    std::this_thread::sleep_for(milliseconds(left + 500));
  }
  echo_server echo;
  gateway gw(gateway_yaml("{ type: memory }"), daily_policy(5), echo.port);

  for (int i = 0; i < 5; ++i) {
    const auto r = request(gw.port, with_key("k-1"));
    INFO(r.body);
    REQUIRE(r.status == 200);
    CHECK(r.header("x-ratelimit-limit") == "5");
    CHECK(r.header("x-ratelimit-remaining") == std::to_string(4 - i));
    CHECK(r.header("x-ratelimit-level") == "daily");
  }
  const std::int64_t before = unix_ms();
  const auto r = request(gw.port, with_key("k-1"));
  const std::int64_t after = unix_ms();
  REQUIRE(r.status == 429);
  CHECK(r.header("x-ratelimit-reason") == "quota_exceeded");
  CHECK(r.header("content-type") == "application/problem+json");
  CHECK(r.body.find(R"("code":"quota_exceeded")") != std::string::npos);
  CHECK(r.body.find(R"("period":"day")") != std::string::npos);
  CHECK(r.body.find("\"retry_after\":" + r.header("retry-after")) != std::string::npos);
  // Retry-After: the seconds to the next UTC midnight, rounded up.
  const std::int64_t midnight = (before / day_ms + 1) * day_ms;
  CHECK(retry_after(r) >= (midnight - after) / 1000);
  CHECK(retry_after(r) <= (midnight - before + 999) / 1000 + 1);
  CHECK(r.header("x-ratelimit-reset") == std::to_string(midnight / 1000));
  CHECK(r.header("x-ratelimit-limit") == "5");
  CHECK(r.header("x-ratelimit-remaining") == "0");
  CHECK(r.header("ratelimit").starts_with("\"daily\";r=0;t="));
  CHECK(r.header("ratelimit-policy") ==
        "\"ipv4_individual.short\";q=1000;w=1, \"daily\";q=5;w=86400");
  CHECK(request(gw.port, with_key("k-1")).status == 429);

  // Another key has its own quota; a request without one is not counted against any.
  CHECK(request(gw.port, with_key("k-2")).status == 200);
  CHECK(request(gw.port, get("/q")).status == 200);
  CHECK(echo.requests() == 7);
  const std::string m = metrics_text(gw);
  CHECK(
      sample(
          m,
          R"(tollgate_rate_limited_total{category="general",level="daily",tier="quota",mode="enforce"})") ==
      2);
}

TEST_CASE("a daily quota starts again exactly at UTC midnight, in either store", "[quota][redis]") {
  const bool use_redis = GENERATE(false, true);
  CAPTURE(use_redis);
  std::unique_ptr<redis_server> redis;
  if (use_redis) redis = std::make_unique<redis_server>();
  echo_server echo;
  const std::string yaml =
      use_redis ? redis_gateway_yaml(redis->port) : gateway_yaml("{ type: memory }");

  // The gateway's clock runs `offset` ahead of the real one, to 4 s before a midnight.
  const std::int64_t start = unix_ms();
  const std::int64_t midnight = (start / day_ms + 1) * day_ms;
  const std::int64_t offset = midnight - 4000 - start;
  std::unique_ptr<gateway> gw;
  {
    const scoped_env clock("TOLLGATE_TEST_CLOCK_OFFSET_MS", std::to_string(offset));
    gw = std::make_unique<gateway>(yaml, daily_policy(3), echo.port);
  }
  if (use_redis) require_degraded(*gw, 0);
  const auto gateway_ms = [&] { return unix_ms() + offset; };
  REQUIRE(gateway_ms() < midnight - 1000);  // started in time: the rest takes milliseconds

  for (int i = 0; i < 3; ++i) {
    const auto r = request(gw->port, with_key("k-night"));
    INFO(r.body);
    REQUIRE(r.status == 200);
    CHECK(r.header("x-ratelimit-reset") == std::to_string(midnight / 1000));
  }
  // Until midnight on the gateway's clock, refused; from midnight on, the new day's quota.
  int refused = 0, admitted = 0;
  while (admitted < 3) {
    const std::int64_t sent = gateway_ms();
    const auto r = request(gw->port, with_key("k-night"));
    const std::int64_t answered = gateway_ms();
    INFO("sent at midnight " << sent - midnight << " ms, answered at " << answered - midnight
                             << " ms: " << r.status << " " << r.body);
    if (answered < midnight) {
      REQUIRE(r.status == 429);
      CHECK(r.header("x-ratelimit-reason") == "quota_exceeded");
      CHECK(retry_after(r) >= 1);
      CHECK(retry_after(r) <= (midnight - sent + 999) / 1000);
      ++refused;
    } else if (sent >= midnight) {
      REQUIRE(r.status == 200);
      CHECK(r.header("x-ratelimit-remaining") == std::to_string(2 - admitted));
      CHECK(r.header("x-ratelimit-reset") == std::to_string(midnight / 1000 + 86400));
      ++admitted;
    } else if (r.status == 200) {
      ++admitted;  // asked across midnight, and counted in the new day
    }
    REQUIRE(answered < midnight + 2000);
    // Close to midnight, ask often; the boundary is what is tested.
    std::this_thread::sleep_for(milliseconds(midnight - answered > 300 ? 100 : 10));
  }
  CHECK(refused >= 5);
  // The new day's quota is spent too.
  const auto r = request(gw->port, with_key("k-night"));
  CHECK(r.status == 429);
  CHECK(r.header("x-ratelimit-reset") == std::to_string(midnight / 1000 + 86400));
  CHECK(echo.requests() == 6);
}
