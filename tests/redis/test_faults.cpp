// The Redis store when Redis fails (docs/design.md §11): killed under load, paused, slow, its
// script cache flushed; and the over-limit cache that keeps floods away from it. Real tollgate
// processes, a real tollgate-echo and Debian's redis-server, on loopback ports.

#include <signal.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gateway/store/redis_wire.hpp"
#include "tests/integration/harness.hpp"
#include "tests/redis/support.hpp"

using namespace tollgate::test;
using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;

/// Wide enough that the load never meets it.
const std::string wide_policy =
    policy_yaml("      ipv4_individual: { short: { rate: 100000/s, burst: 100000 } }\n");

/// Whether `r` carries any rate-limit header.
bool has_rate_limit_headers(const response& r) {
  for (const auto& [name, value] : r.headers) {
    if (name.rfind("x-ratelimit-", 0) == 0 || name.rfind("ratelimit", 0) == 0 ||
        name == "retry-after") {
      return true;
    }
  }
  return false;
}

/// One request as the load saw it.
struct observed {
  clock_type::time_point start, end;
  std::chrono::milliseconds took{};
  response r;
  std::string error;
};

observed timed_request(std::uint16_t port, const std::string& raw,
                       const std::string& source = "127.0.0.1") {
  observed o;
  o.start = clock_type::now();
  try {
    o.r = request(port, raw, source);
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  o.end = clock_type::now();
  o.took = std::chrono::duration_cast<std::chrono::milliseconds>(o.end - o.start);
  return o;
}

/// Requests one after the other from a thread of its own, a few milliseconds apart, until
/// stopped; what came back is kept.
class steady_load {
 public:
  explicit steady_load(std::uint16_t port) {
    thread_ = std::thread([this, port] {
      for (std::size_t i = 0; !stop_.load(); ++i) {
        observed o = timed_request(port, get("/load/" + std::to_string(i)));
        {
          const std::lock_guard<std::mutex> lock(mutex_);
          seen_.push_back(std::move(o));
        }
        std::this_thread::sleep_for(3ms);
      }
    });
  }
  ~steady_load() { stop(); }
  steady_load(const steady_load&) = delete;
  steady_load& operator=(const steady_load&) = delete;

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  /// Requests done that started at or after `t`.
  std::size_t count_since(clock_type::time_point t) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    for (const auto& o : seen_)
      n += o.start >= t;
    return n;
  }
  /// Waits (bounded) until `n` requests that started at or after `t` are done.
  bool wait_for(std::size_t n, clock_type::time_point t) const {
    return eventually([&] { return count_since(t) >= n; });
  }
  std::vector<observed> seen() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return seen_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<observed> seen_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// What fail_mode `mode` answers while Redis is away; empty when that is what `o` got.
std::string fail_mode_mismatch(const std::string& mode, const observed& o) {
  if (!o.error.empty()) return "no response: " + o.error;
  const response& r = o.r;
  if (mode == "local") {
    if (r.status != 200 && r.status != 429) return "local: status " + std::to_string(r.status);
    if (r.header("x-ratelimit-limit") != "100000") return "local: no rate-limit headers";
  } else if (mode == "open") {
    if (r.status != 200) return "open: status " + std::to_string(r.status);
    if (has_rate_limit_headers(r)) return "open: rate-limit headers";
  } else {
    if (r.status != 503) return "closed: status " + std::to_string(r.status);
    if (r.header("content-type") != "application/problem+json") return "closed: content type";
    if (r.body.find("\"code\":\"store_unavailable\"") == std::string::npos) {
      return "closed: body " + r.body;
    }
  }
  return "";
}

/// A decision by Redis, as the client sees it: admitted, with the wide limit's headers.
bool decided_by_redis_policy(const response& r) {
  return r.status == 200 && r.header("x-ratelimit-limit") == "100000";
}

/// The number of calls of `command` in Redis's INFO commandstats (0 when it has none).
long long command_calls(const redis_server& redis, const std::string& command) {
  const std::string info = redis.cli({"INFO", "commandstats"});
  const std::string head = "cmdstat_" + command + ":calls=";
  const auto at = info.find(head);
  if (at == std::string::npos) return 0;
  return std::stoll(info.substr(at + head.size()));
}

/// Redis killed under steady load and started again, with fail_mode `mode`. Timeout 100 ms: a
/// busy machine does not time calls out before the kill, and every request must still be
/// answered well within 1 s.
void kill_and_restart(const std::string& mode) {
  redis_server redis;
  echo_server echo;
  gateway gw(redis_gateway_yaml(redis.port, "timeout: 100ms, fail_mode: " + mode), wide_policy,
             echo.port);
  require_degraded(gw, 0);
  CHECK(request(gw.admin_port, get("/readyz")).body == "ready\n");

  steady_load load(gw.port);
  const auto t0 = clock_type::now();
  REQUIRE(load.wait_for(20, t0));
  const double redis_before = decisions(gw, "redis");
  CHECK(redis_before >= 20);

  const auto t_killed = clock_type::now();
  redis.stop();
  require_degraded(gw, 1, 5s);
  const auto t_degraded = clock_type::now();
  {
    const std::string line = gw.process->wait_for_line("cannot use redis");
    INFO(line);
    CHECK(line.find("fail_mode " + mode + " decides until it can") != std::string::npos);
  }
  REQUIRE(load.wait_for(30, t_degraded));
  const auto ready = request(gw.admin_port, get("/readyz"));
  if (mode == "closed") {
    CHECK(ready.status == 503);
    CHECK(ready.body == "store degraded: redis unreachable, fail_mode closed\n");
  } else {
    CHECK(ready.status == 200);
    CHECK(ready.body == "ready (store degraded: redis unreachable, fail_mode " + mode + ")\n");
  }
  CHECK(decisions(gw, mode) >= 30);
  CHECK(store_errors(gw, "connect") >= 1);

  const auto t_restart = clock_type::now();
  redis.start();
  require_degraded(gw, 0, 10s);
  const auto t_back = clock_type::now();
  CHECK(gw.process->wait_for_line("connected to redis")
            .find("127.0.0.1:" + std::to_string(redis.port)) != std::string::npos);
  REQUIRE(load.wait_for(20, t_back));
  load.stop();
  CHECK(request(gw.admin_port, get("/readyz")).body == "ready\n");
  CHECK(decisions(gw, "redis") >= redis_before + 20);
  CHECK(request(gw.admin_port, get("/healthz")).status == 200);

  std::size_t during = 0, after = 0;
  for (const auto& o : load.seen()) {
    INFO("a request started "
         << std::chrono::duration_cast<std::chrono::milliseconds>(o.start - t_killed).count()
         << " ms after the kill: " << o.error << " " << o.r.status << " " << o.r.body);
    // Answered, and never kept waiting much past the timeout, whatever Redis is doing.
    CHECK(o.error.empty());
    CHECK(o.took < 1s);
    if (o.start >= t_degraded && o.end < t_restart) {
      ++during;
      CHECK(fail_mode_mismatch(mode, o) == "");
    }
    if (o.start >= t_back) {
      ++after;
      CHECK(decided_by_redis_policy(o.r));
    }
    if (o.end < t_killed) CHECK(decided_by_redis_policy(o.r));
  }
  CHECK(during >= 30);
  CHECK(after >= 20);
}

}  // namespace

TEST_CASE(
    "redis killed under load with fail_mode local: the in-process store decides, then "
    "redis again",
    "[redis][faults]") {
  kill_and_restart("local");
}

TEST_CASE(
    "redis killed under load with fail_mode open: admitted without headers, then redis "
    "again",
    "[redis][faults]") {
  kill_and_restart("open");
}

TEST_CASE(
    "redis killed under load with fail_mode closed: 503 store_unavailable and not ready, "
    "then redis again",
    "[redis][faults]") {
  kill_and_restart("closed");
}

TEST_CASE("after a 5 s outage the links are back within the backoff's cap", "[redis][faults]") {
  redis_server redis;
  echo_server echo;
  gateway gw(redis_gateway_yaml(redis.port, "timeout: 100ms, fail_mode: open"), wide_policy,
             echo.port);
  require_degraded(gw, 0);
  redis.stop();
  require_degraded(gw, 1, 5s);
  // Five seconds of requests answered by fail_mode open, while the backoff grows to its cap.
  std::vector<observed> seen;
  for (const auto until = clock_type::now() + 5s; clock_type::now() < until;) {
    seen.push_back(timed_request(gw.port, get("/o")));
    std::this_thread::sleep_for(20ms);
  }
  std::size_t wrong = 0;
  for (const auto& o : seen) {
    const std::string why = fail_mode_mismatch("open", o);
    if (!why.empty() || o.took >= 1s) {
      ++wrong;
      FAIL_CHECK(why << ", took " << o.took.count() << " ms");
    }
  }
  CHECK(wrong == 0);
  CHECK(seen.size() >= 50);

  const auto restarted = clock_type::now();
  redis.start();
  require_degraded(gw, 0, 10s);
  // At most one pause at the cap (2 s, plus up to half of it as jitter), then a connection.
  const auto back =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - restarted);
  INFO("back after " << back.count() << " ms");
  CHECK(back < 4s);
  CHECK(decided_by_redis_policy(request(gw.port, get("/o"))));
}

TEST_CASE("a slow or paused redis costs each request at most its timeout", "[redis][faults]") {
  redis_server redis;
  echo_server echo;
  // Each request: the configured 20 ms timeout and what a request costs besides (a loopback
  // connection, the echo's answer), far from connect_timeout's 1 s whatever the machine's
  // load; the typical one (median) within the timeout and a little. The exact bound of one
  // decision is the next test's.
  const auto bound = 250ms;
  auto typical = [](std::vector<observed> seen) {
    std::sort(seen.begin(), seen.end(),
              [](const observed& a, const observed& b) { return a.took < b.took; });
    return seen.empty() ? 0ms : seen[seen.size() / 2].took;
  };
  // timeout 20 ms, connect_timeout 1 s: a stall of 1 s ends the connection.
  gateway gw(redis_gateway_yaml(redis.port, "timeout: 20ms, connect_timeout: 1s, fail_mode: open"),
             wide_policy, echo.port);
  require_degraded(gw, 0);
  CHECK(decided_by_redis_policy(request(gw.port, get("/warm"))));

  SECTION("DEBUG SLEEP 0.3: the calls meanwhile time out, and the connection stays") {
    const double timeouts = store_errors(gw, "timeout");
    const double connects = store_errors(gw, "connect");
    std::atomic<bool> slept{false};
    std::string answer;
    std::thread sleeper([&] {
      answer = redis.cli({"DEBUG", "SLEEP", "0.3"});
      slept = true;
    });
    std::vector<observed> seen;
    // Requests all along the sleep (and a little past it): about 15 of them time out.
    const auto limit = clock_type::now() + 5s;
    while (!slept.load() && clock_type::now() < limit)
      seen.push_back(timed_request(gw.port, get("/s")));
    sleeper.join();
    CHECK(answer == "OK");
    for (const auto& o : seen) {
      INFO(o.error << " " << o.r.status << " took " << o.took.count() << " ms");
      CHECK(o.error.empty());
      CHECK(o.r.status == 200);
      CHECK(o.took < bound);
    }
    CHECK(typical(seen) < 60ms);
    CHECK(store_errors(gw, "timeout") >= timeouts + 3);
    CHECK(decisions(gw, "open") >= 3);
    // The late replies were read and dropped; the connection was not given up.
    CHECK(store_errors(gw, "connect") == connects);
    CHECK(degraded(gw) == 0);
    const double from_redis = decisions(gw, "redis");
    CHECK(decided_by_redis_policy(request(gw.port, get("/after"))));
    CHECK(decisions(gw, "redis") == from_redis + 1);
  }

  SECTION("SIGSTOP: timeouts, then the stalled connection is given up; SIGCONT: redis again") {
    const double timeouts = store_errors(gw, "timeout");
    redis.process->signal(SIGSTOP);
    struct resume {
      const redis_server& r;
      ~resume() { r.process->signal(SIGCONT); }
    } resume_anyway{redis};
    std::vector<observed> seen;
    for (int i = 0; i < 10; ++i)
      seen.push_back(timed_request(gw.port, get("/p")));
    CHECK(store_errors(gw, "timeout") >= timeouts + 1);
    // Unanswered for connect_timeout (1 s): the connection is closed and the link is down.
    const bool down = eventually(
        [&] {
          seen.push_back(timed_request(gw.port, get("/p")));
          return degraded(gw) == 1;
        },
        5s);
    CHECK(down);
    CHECK(gw.process->wait_for_line("cannot use redis").find("stopped answering") !=
          std::string::npos);
    for (int i = 0; i < 10; ++i)
      seen.push_back(timed_request(gw.port, get("/p")));
    for (const auto& o : seen) {
      INFO(o.error << " " << o.r.status << " took " << o.took.count() << " ms");
      CHECK(fail_mode_mismatch("open", o) == "");
      CHECK(o.took < bound);
    }
    CHECK(typical(seen) < 60ms);

    redis.process->signal(SIGCONT);
    const double from_redis = decisions(gw, "redis");
    require_degraded(gw, 0, 10s);
    CHECK(decided_by_redis_policy(request(gw.port, get("/back"))));
    CHECK(decisions(gw, "redis") >= from_redis + 1);
  }
}

TEST_CASE("a decision that waits for the call before it still ends within the timeout",
          "[redis][faults]") {
  redis_server redis;
  echo_server echo;
  // One worker: both requests' decisions go over one connection, the second waiting for the
  // first's call (the batching of docs/design.md §11).
  gateway gw(redis_gateway_yaml(redis.port, "timeout: 300ms, fail_mode: open", 1), wide_policy,
             echo.port);
  require_degraded(gw, 0);
  CHECK(decided_by_redis_policy(request(gw.port, get("/warm"))));
  redis.process->signal(SIGSTOP);  // no answer from now on, at once
  struct resume {
    const redis_server& r;
    ~resume() { r.process->signal(SIGCONT); }
  } resume_anyway{redis};
  observed first, second;
  std::thread a([&] { first = timed_request(gw.port, get("/a")); });
  std::this_thread::sleep_for(50ms);  // a's call is out
  second = timed_request(gw.port, get("/b"));
  a.join();
  INFO("first took " << first.took.count() << " ms, second " << second.took.count() << " ms");
  CHECK(first.r.status == 200);
  CHECK(second.r.status == 200);  // fail_mode open
  // Each within the configured 300 ms of asking (plus the request's own milliseconds). The
  // second used to wait out the first's call (250 ms) and then a whole timeout of its own:
  // 550 ms.
  CHECK(first.took < 450ms);
  CHECK(second.took < 450ms);
  CHECK(second.took >= 250ms);  // it did wait: Redis never answered
  CHECK(decisions(gw, "open") == 2);
}

TEST_CASE(
    "after SCRIPT FLUSH one decision goes to fail_mode, and the gateway loads the script "
    "again by itself",
    "[redis][faults]") {
  using tollgate::store::redis::gcra_sha;
  redis_server redis;
  echo_server echo;
  // One worker: one connection, so the decision after the flush meets the NOSCRIPT.
  gateway gw(redis_gateway_yaml(redis.port, "timeout: 1s, fail_mode: open", 1), wide_policy,
             echo.port);
  require_degraded(gw, 0);
  CHECK(redis.cli({"SCRIPT", "EXISTS", gcra_sha()}) == "1");
  CHECK(decided_by_redis_policy(request(gw.port, get("/1"))));
  CHECK(decisions(gw, "redis") == 1);

  CHECK(redis.cli({"SCRIPT", "FLUSH"}) == "OK");
  CHECK(redis.cli({"SCRIPT", "EXISTS", gcra_sha()}) == "0");
  const auto r = request(gw.port, get("/2"));
  CHECK(r.status == 200);
  CHECK_FALSE(has_rate_limit_headers(r));
  CHECK(store_errors(gw, "script") == 1);
  CHECK(decisions(gw, "open") == 1);
  CHECK(gw.process->wait_for_line("answered a decision with an error").find("NOSCRIPT") !=
        std::string::npos);

  // Reloaded without a reconnect: Redis has it again and decides again.
  CHECK(eventually([&] { return redis.cli({"SCRIPT", "EXISTS", gcra_sha()}) == "1"; }, 5s));
  CHECK(decided_by_redis_policy(request(gw.port, get("/3"))));
  CHECK(decisions(gw, "redis") == 2);
  CHECK(store_errors(gw, "script") == 1);
  CHECK(store_errors(gw, "connect") == 0);
  CHECK(degraded(gw) == 0);
}

TEST_CASE("a flood from a key over its limit is answered by the over-limit cache, not redis",
          "[redis][faults]") {
  redis_server redis;
  echo_server echo;
  const std::string policy =
      policy_yaml("      ipv4_individual: { short: { rate: 1/m, burst: 2 } }\n");
  gateway gw(redis_gateway_yaml(redis.port, "timeout: 1s, fail_mode: closed"), policy, echo.port);
  require_degraded(gw, 0);
  CHECK(request(gw.port, get("/f")).status == 200);
  CHECK(request(gw.port, get("/f")).status == 200);
  CHECK(request(gw.port, get("/f")).status == 429);

  CHECK(redis.cli({"CONFIG", "RESETSTAT"}) == "OK");
  const double cache_before = decisions(gw, "cache");
  const double redis_before = decisions(gw, "redis");
  constexpr int n = 200;
  int limited = 0;
  for (int i = 0; i < n; ++i) {
    const auto r = request(gw.port, get("/f/" + std::to_string(i)));
    limited += r.status == 429;
    if (r.status != 429 || r.header("x-ratelimit-level") != "ipv4_individual") {
      FAIL_CHECK("request " << i << ": " << r.status << " " << r.body);
    }
    const std::string wait = r.header("retry-after");
    if (wait.empty() || std::stoi(wait) < 1 || std::stoi(wait) > 60) {
      FAIL_CHECK("request " << i << ": Retry-After '" << wait << "'");
    }
  }
  CHECK(limited == n);
  const long long evalsha = command_calls(redis, "evalsha");
  INFO(redis.cli({"INFO", "commandstats"}));
  CHECK(evalsha < n / 4);
  const double from_cache = decisions(gw, "cache") - cache_before;
  CHECK(from_cache >= n - n / 4);
  CHECK(from_cache + (decisions(gw, "redis") - redis_before) == n);
  CHECK(echo.requests() == 2);

  // The cache is per key: another address still goes to Redis, and is admitted.
  CHECK(request(gw.port, get("/f"), "127.0.0.2").status == 200);
  CHECK(command_calls(redis, "evalsha") == evalsha + 1);
}

TEST_CASE(
    "the over-limit cache lets a key through as soon as redis would, on a gateway whose "
    "clock is 7 s behind",
    "[redis][faults]") {
  redis_server redis;
  echo_server echo;
  // T = 500 ms, burst 1: one request, then refusals for half a second.
  const std::string policy =
      policy_yaml("      ipv4_individual: { short: { rate: 2/s, burst: 1 } }\n");
  std::unique_ptr<gateway> gw;
  {
    const scoped_env behind("TOLLGATE_TEST_CLOCK_OFFSET_MS", "-7000");
    gw = std::make_unique<gateway>(
        redis_gateway_yaml(redis.port, "timeout: 1s, fail_mode: closed", 1), policy, echo.port);
  }
  require_degraded(*gw, 0);
  auto admitted = timed_request(gw->port, get("/x"));
  REQUIRE(admitted.r.status == 200);
  // Twice: the second round starts from the state the cache saw in the first.
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    const double cached = decisions(*gw, "cache");
    int refused = 0;
    observed next;
    for (;;) {
      next = timed_request(gw->port, get("/x"));
      REQUIRE(next.error.empty());
      if (next.r.status != 429) break;
      ++refused;
      REQUIRE(next.start - admitted.end < 3s);
      std::this_thread::sleep_for(10ms);
    }
    CHECK(next.r.status == 200);
    // Not before the 500 ms (Redis would not), and not much after.
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(next.end - admitted.start);
    CHECK(waited >= 450ms);
    CHECK(waited < 900ms);
    CHECK(refused >= 5);
    CHECK(decisions(*gw, "cache") >= cached + refused - 2);
    admitted = next;
  }
}

TEST_CASE("a gateway started while redis is down serves by fail_mode and connects when it comes",
          "[redis][faults]") {
  redis_server redis;
  redis.stop();
  echo_server echo;
  gateway gw(redis_gateway_yaml(redis.port, "timeout: 20ms, fail_mode: open"), wide_policy,
             echo.port);
  const std::string line = gw.process->wait_for_line("cannot use redis");
  INFO(line);
  CHECK(line.find("127.0.0.1:" + std::to_string(redis.port)) != std::string::npos);
  CHECK(line.find("fail_mode open decides until it can") != std::string::npos);
  CHECK(degraded(gw) == 1);
  const auto r = request(gw.port, get("/d"));
  CHECK(r.status == 200);
  CHECK_FALSE(has_rate_limit_headers(r));
  const auto ready = request(gw.admin_port, get("/readyz"));
  CHECK(ready.status == 200);
  CHECK(ready.body == "ready (store degraded: redis unreachable, fail_mode open)\n");

  redis.start();
  require_degraded(gw, 0, 10s);
  CHECK(decided_by_redis_policy(request(gw.port, get("/d"))));
  CHECK(decisions(gw, "redis") == 1);
  CHECK(request(gw.admin_port, get("/readyz")).body == "ready\n");
}

TEST_CASE("connections closed by redis (CLIENT KILL) are made again", "[redis][faults]") {
  redis_server redis;
  echo_server echo;
  gateway gw(redis_gateway_yaml(redis.port, "timeout: 1s, fail_mode: closed"), wide_policy,
             echo.port);
  require_degraded(gw, 0);
  CHECK(decided_by_redis_policy(request(gw.port, get("/k"))));
  const double connects = store_errors(gw, "connect");
  // One connection per worker, the one that follows the admin API's overrides, and the one of
  // the standing journal (docs/replicas.md).
  CHECK(redis.cli({"CLIENT", "KILL", "TYPE", "normal"}) == "4");
  CHECK(gw.process->wait_for_line("cannot use redis").find("connection closed by") !=
        std::string::npos);
  const bool back = eventually(
      [&] { return store_errors(gw, "connect") >= connects + 2 && degraded(gw) == 0; }, 10s);
  INFO(gw.process->output());
  CHECK(back);
  CHECK(decided_by_redis_policy(request(gw.port, get("/k"))));
  CHECK(decisions(gw, "redis") == 2);
}

TEST_CASE(
    "redis out of memory: the error is counted, fail_mode decides, and redis decides again "
    "once it has room",
    "[redis][faults]") {
  redis_server redis;
  echo_server echo;
  // 1/m: the key stays (expiring a minute after each request) for the test to read.
  const std::string policy =
      policy_yaml("      ipv4_individual: { short: { rate: 1/m, burst: 100 } }\n");
  gateway gw(redis_gateway_yaml(redis.port, "timeout: 1s, fail_mode: local", 1), policy, echo.port);
  require_degraded(gw, 0);
  auto r = request(gw.port, get("/o"));
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-remaining") == "99");
  CHECK(decisions(gw, "redis") == 1);
  const std::string key = "{tg:127.0.0.0/24}general/ipv4_individual/32:127.0.0.1";
  const std::string stored = redis.cli({"GET", key});
  CHECK(stored.size() == 41);  // two tats, "%011d%09d %011d%09d"

  CHECK(redis.cli({"CONFIG", "SET", "maxmemory", "1"}) == "OK");
  // The script's write is refused: the in-process store decides (its first request here).
  r = request(gw.port, get("/o"));
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-remaining") == "99");
  CHECK(store_errors(gw, "oom") == 1);
  CHECK(decisions(gw, "local") == 1);
  CHECK(gw.process->wait_for_line("answered a decision with an error").find("OOM") !=
        std::string::npos);
  // Nothing was written, and the link is fine.
  CHECK(redis.cli({"GET", key}) == stored);
  CHECK(degraded(gw) == 0);

  CHECK(redis.cli({"CONFIG", "SET", "maxmemory", "0"}) == "OK");
  r = request(gw.port, get("/o"));
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-remaining") == "98");
  CHECK(decisions(gw, "redis") == 2);
  CHECK(redis.cli({"GET", key}) != stored);
  CHECK(store_errors(gw, "connect") == 0);
}

TEST_CASE("with fail_mode closed and redis away, each refused request is one closed decision",
          "[redis][faults]") {
  redis_server redis;
  echo_server echo;
  gateway gw(redis_gateway_yaml(redis.port, "timeout: 20ms, fail_mode: closed"), wide_policy,
             echo.port);
  require_degraded(gw, 0);
  redis.stop();
  require_degraded(gw, 1, 5s);
  const double closed = decisions(gw, "closed");
  const double io = store_errors(gw, "io");
  for (int i = 0; i < 3; ++i)
    CHECK(request(gw.port, get("/c")).status == 503);
  // Three requests, three decisions by fail_mode; a link known to be down is no I/O error.
  CHECK(decisions(gw, "closed") == closed + 3);
  CHECK(store_errors(gw, "io") == io);
}
