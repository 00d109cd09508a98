#pragma once
// What the Redis store's process-level tests share: gateway and policy files for one Redis,
// the store's metrics, bounded polling, and environment variables for a child's lifetime.

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "tests/integration/harness.hpp"

namespace tollgate::test {

/// A gateway file for one Redis at `redis_port`; `store` is what follows `type` and `address`
/// in the store's mapping (timeout, fail_mode, ...); `routes` the routes (YAML), before the
/// default route to category general.
inline std::string redis_gateway_yaml(std::uint16_t redis_port,
                                      const std::string& store = "timeout: 1s, fail_mode: closed",
                                      int workers = 2, const std::string& routes = "") {
  return "listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
         "admin: { address: 127.0.0.1, port: 0 }\n"
         "workers: " +
         std::to_string(workers) +
         "\n"
         "upstreams: { app: { endpoints: [\"{echo}\"] } }\n" +
         routes +
         "\ndefault_route: { category: general, upstream: app }\n"
         "policies: [\"{policy}\"]\n"
         "store: { type: redis, address: \"127.0.0.1:" +
         std::to_string(redis_port) + "\", " + store +
         " }\n"
         "logging: { level: info, access_log: false }\n";
}

/// A policy of one category, general, with `limits` (YAML lines, indented six spaces).
inline std::string policy_yaml(const std::string& limits) {
  return "categories:\n  general:\n    limits:\n" + limits;
}

/// Polls `done` every 20 ms until it holds or `limit` passes; whether it held.
template <class F>
bool eventually(F&& done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// One sample of `gw`'s metrics (-1 when absent).
inline double metric(const gateway& gw, const std::string& name) {
  return sample(metrics_text(gw), name);
}
/// tollgate_store_decisions_total{source=...}.
inline double decisions(const gateway& gw, const std::string& source) {
  return metric(gw, "tollgate_store_decisions_total{source=\"" + source + "\"}");
}
/// tollgate_store_errors_total{kind=...}.
inline double store_errors(const gateway& gw, const std::string& kind) {
  return metric(gw, "tollgate_store_errors_total{kind=\"" + kind + "\"}");
}
/// tollgate_store_degraded.
inline double degraded(const gateway& gw) {
  return metric(gw, "tollgate_store_degraded");
}

/// Waits (bounded) until tollgate_store_degraded of `gw` is `value` (0: every worker has
/// Redis); fails the test, showing the gateway's log, when it is not.
inline void require_degraded(const gateway& gw, double value,
                             std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const bool reached = eventually([&] { return degraded(gw) == value; }, limit);
  INFO(gw.process->output());
  REQUIRE(reached);
}

/// Sets an environment variable for as long as it lives (children started meanwhile inherit
/// it), then puts back what was there.
class scoped_env {
 public:
  scoped_env(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old, had_ = true;
    setenv(name_.c_str(), value.c_str(), 1);
  }
  ~scoped_env() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::string name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace tollgate::test
