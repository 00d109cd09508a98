// Which settings a reload can apply and which need a restart (tests of the comparison).

#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <functional>

#include "gateway/config/reload_diff.hpp"

using namespace tollgate;
using namespace tollgate::config;

namespace {

using keys = std::vector<std::string>;

/// A running configuration: a plain listener and a TLS one (paths only: nothing is loaded).
gateway_config running_config() {
  gateway_config g;
  g.file = "gateway.yaml";
  listener_config plain;
  plain.name = "public";
  plain.address = core::address::from_v4(0);
  plain.port = 8080;
  listener_config secure = plain;
  secure.name = "secure";
  secure.port = 8443;
  secure.tls.emplace().certificates = {
      {"certs/a.pem", "certs/a.key", 3, 3, "listeners.secure.tls"}};
  g.listeners = {plain, secure};
  g.workers = 2;
  upstream_config app;
  app.name = "app";
  app.endpoints = {{"127.0.0.1", 9000}};
  g.upstreams = {app};
  return g;
}

/// A change made to the running configuration, and the keys a reload must name for it.
struct row {
  const char* what;
  std::function<void(gateway_config&)> change;
  keys expected;
};

const std::vector<row> rows = {
    {"nothing", [](gateway_config&) {}, {}},
    {"a listener's port",
     [](gateway_config& g) { g.listeners[0].port = 8081; },
     {"listeners.public.port"}},
    {"a listener's address",
     [](gateway_config& g) { g.listeners[1].address = core::address::from_v4(0x7f000001); },
     {"listeners.secure.address"}},
    {"PROXY protocol on",
     [](gateway_config& g) { g.listeners[0].proxy_protocol = true; },
     {"listeners.public.proxy_protocol"}},
    {"TLS on",
     [](gateway_config& g) { g.listeners[0].tls = g.listeners[1].tls; },
     {"listeners.public.tls"}},
    {"TLS off", [](gateway_config& g) { g.listeners[1].tls.reset(); }, {"listeners.secure.tls"}},
    {"a renewed certificate's path (live)",
     [](gateway_config& g) { g.listeners[1].tls->certificates[0].certificate = "certs/b.pem"; },
     {}},
    {"a listener renamed",
     [](gateway_config& g) { g.listeners[0].name = "front"; },
     {"listeners.public", "listeners.front"}},
    {"a listener added",
     [](gateway_config& g) {
       g.listeners.push_back(g.listeners[0]);
       g.listeners.back().name = "extra";
       g.listeners.back().port = 8082;
     },
     {"listeners.extra"}},
    {"a listener removed", [](gateway_config& g) { g.listeners.pop_back(); }, {"listeners.secure"}},
    {"listeners reordered (live)",
     [](gateway_config& g) { std::swap(g.listeners[0], g.listeners[1]); },
     {}},
    {"the admin address",
     [](gateway_config& g) { g.admin.address = core::address::from_v4(0x7f000002); },
     {"admin.address"}},
    {"the admin port", [](gateway_config& g) { g.admin.port = 9091; }, {"admin.port"}},
    {"workers", [](gateway_config& g) { g.workers = 0; }, {"workers"}},
    {"max_connections",
     [](gateway_config& g) { g.limits.max_connections = 5; },
     {"limits.max_connections"}},
    {"other limits (live)",
     [](gateway_config& g) {
       g.limits.max_header_bytes = 1024;
       g.limits.max_connections_per_address = 3;
     },
     {}},
    {"the PoW secret's variable",
     [](gateway_config& g) { g.pow.secret_env = "OTHER"; },
     {"pow.secret_env"}},
    {"the challenge lifetime",
     [](gateway_config& g) { g.pow.challenge_ttl = std::chrono::seconds(1); },
     {"pow.challenge_ttl"}},
    {"the replay cache",
     [](gateway_config& g) { g.pow.replay_cache_entries = 1; },
     {"pow.replay_cache_entries"}},
    {"the browsers' page (live)", [](gateway_config& g) { g.pow.page.title = "One moment"; }, {}},
    {"the solver hash rate",
     [](gateway_config& g) { g.pow.solver_hash_rate = 1; },
     {"pow.solver_hash_rate"}},
    {"the store type",
     [](gateway_config& g) { g.store.type = store_config::kind::redis; },
     {"store.type"}},
    {"the store address",
     [](gateway_config& g) {
       g.store.redis = {{"10.0.0.1", 6379}};
     },
     {"store.address"}},
    {"the store key prefix",
     [](gateway_config& g) { g.store.key_prefix = "other:"; },
     {"store.key_prefix"}},
    {"the store password variable",
     [](gateway_config& g) { g.store.password_env = "PW"; },
     {"store.password_env"}},
    {"store TLS",
     [](gateway_config& g) {
       g.store.tls = redis_tls_config{"ca.pem", "", "", ""};
     },
     {"store.tls"}},
    {"the store timeout",
     [](gateway_config& g) { g.store.timeout = std::chrono::milliseconds(1); },
     {"store.timeout"}},
    {"the store fail mode",
     [](gateway_config& g) { g.store.fail_mode = store_config::failure::closed; },
     {"store.fail_mode"}},
    {"a store table", [](gateway_config& g) { g.store.capacity[4] = 7; }, {"store.capacity.keyed"}},
    {"violation counters",
     [](gateway_config& g) {
       g.policy.pow_counters.max_counter = 3;
       g.policy.pow_counters.max_network_entries = 3;
     },
     {"pow_counters.max_counter", "pow_counters.max_network_entries"}},
    {"logging (live)",
     [](gateway_config& g) {
       g.logging.level = "debug";
       g.logging.access_log = logging_config::destination::standard_output;
       g.logging.format = logging_config::log_format::json;
       g.access.deny.push_back(core::cidr::parse("192.0.2.0/24").value());
       g.shutdown.delay = std::chrono::seconds(3);
     },
     {}},
    {"upstreams, trusted proxies (live)",
     [](gateway_config& g) {
       g.upstreams[0].endpoints.push_back({"127.0.0.1", 9001});
       g.trusted_proxies.push_back(core::cidr::parse("10.0.0.0/8").value());
     },
     {}},
    {"several at once, in file order",
     [](gateway_config& g) {
       g.store.type = store_config::kind::redis;
       g.workers = 8;
       g.admin.port = 1;
       g.listeners[1].port = 1;
     },
     {"listeners.secure.port", "admin.port", "workers", "store.type"}},
};

}  // namespace

TEST_CASE("a reload names each changed restart-only setting by its key", "[config][reload]") {
  const gateway_config running = running_config();
  for (const auto& r : rows) {
    INFO(r.what);
    gateway_config next = running;
    r.change(next);
    CHECK(restart_only_changes(running, next) == r.expected);
  }
}

TEST_CASE("what a reload puts in force has no restart-only change left", "[config][reload]") {
  const gateway_config running = running_config();
  for (const auto& r : rows) {
    INFO(r.what);
    gateway_config next = running;
    r.change(next);
    CHECK(restart_only_changes(running, keep_restart_only(running, next)).empty());
  }
}

TEST_CASE("a reload keeps the running listeners and applies the rest", "[config][reload]") {
  const gateway_config running = running_config();
  gateway_config next = running;
  next.listeners[0].port = 9999;
  next.listeners[1].tls->certificates[0].certificate = "certs/b.pem";
  next.logging.level = "debug";
  next.limits.max_header_bytes = 1024;
  next.workers = 16;
  next.pow.challenge_ttl = std::chrono::seconds(5);
  next.pow.page.title = "One moment";
  const gateway_config applied = keep_restart_only(running, next);
  REQUIRE(applied.listeners.size() == 2);
  CHECK(applied.listeners[0].port == 8080);
  CHECK(applied.workers == 2);
  // The process's PoW state stays; the browsers' page is a rendering, and changes live.
  CHECK(applied.pow.challenge_ttl == running.pow.challenge_ttl);
  CHECK(applied.pow.page.title == "One moment");
  // Live: the certificate a TLS listener presents, logging, other limits.
  CHECK(applied.listeners[1].tls->certificates[0].certificate == "certs/b.pem");
  CHECK(applied.logging.level == "debug");
  CHECK(applied.limits.max_header_bytes == 1024);

  SECTION("a TLS listener renamed keeps its name and certificate, so sessions find both") {
    next = running;
    next.listeners[1].name = "tls";
    next.listeners[1].tls->certificates[0].certificate = "certs/b.pem";
    const gateway_config kept = keep_restart_only(running, next);
    REQUIRE(kept.listeners.size() == 2);
    CHECK(kept.listeners[1].name == "secure");
    CHECK(kept.listeners[1].tls->certificates[0].certificate == "certs/a.pem");
  }
  SECTION("TLS turned off keeps the running certificate; turned on is not applied") {
    next = running;
    next.listeners[1].tls.reset();
    next.listeners[0].tls.emplace().certificates = {
        {"certs/c.pem", "certs/c.key", 1, 1, "listeners.public.tls"}};
    const gateway_config kept = keep_restart_only(running, next);
    REQUIRE(kept.listeners[1].tls.has_value());
    CHECK(kept.listeners[1].tls->certificates[0].certificate == "certs/a.pem");
    CHECK_FALSE(kept.listeners[0].tls.has_value());
  }
}

TEST_CASE("restart-only keys are named as written in the files", "[config][reload]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tollgate-rd-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  const std::string listeners =
      "listeners: [{ name: public, address: 0.0.0.0, port: 8080 }]\n"
      "upstreams: { app: { endpoints: ['127.0.0.1:9000'] } }\n"
      "default_route: { category: general, upstream: app }\n";
  write("p.yaml", "categories: { general: {} }\n");
  write("q.yaml", "categories: { general: {} }\npow_counters: { decay_interval: 5m }\n");
  const auto before = load_gateway(write("a.yaml", listeners + "policies: [p.yaml]\n"));
  const auto after = load_gateway(write("b.yaml", listeners + "policies: [q.yaml]\n"
                                                              "admin: { port: 9191 }\n"
                                                              "workers: 3\n"
                                                              "logging: { level: debug }\n"
                                                              "pow: { secret_env: POW_KEY_2 }\n"));
  fs::remove_all(dir);
  CHECK(restart_only_changes(before, after) ==
        keys{"admin.port", "workers", "pow.secret_env", "pow_counters.decay_interval"});
}
