// tollgate: the command line of DESIGN §2, start-up, signals and reload.

#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "gateway/app/admin_api.hpp"
#include "gateway/app/descriptors.hpp"
#include "gateway/app/logging.hpp"
#include "gateway/app/notify.hpp"
#include "gateway/app/simulate.hpp"
#include "gateway/config/error.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/config/reload_diff.hpp"
#include "gateway/metrics/exposition.hpp"
#include "gateway/net/admin.hpp"
#include "gateway/net/server.hpp"
#include "gateway/pow/challenge.hpp"
#include "gateway/pow/crypto.hpp"
#include "gateway/store/local_store.hpp"
#include "gateway/store/redis_store.hpp"

namespace {

using namespace tollgate;
namespace asio = boost::asio;

constexpr std::string_view version = "0.1.0";

int usage() {
  std::fprintf(stderr,
               "usage: tollgate [--config FILE]      run (default FILE: config/gateway.yaml)\n"
               "       tollgate --check-config FILE  validate, print errors with file:line\n"
               "       tollgate --version\n"
               "       tollgate pow solve CHALLENGE BITS  print a nonce for a challenge\n"
               "       tollgate simulate --config FILE --log LOG [--log LOG ...]\n"
               "                [--compare OTHER_FILE] [--json] [--top N]\n"
               "                                     replay a request log offline (DESIGN §13)\n");
  return 2;
}

std::uint64_t random_u64() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

/// The limiter store the configuration asks for. Throws std::runtime_error when it cannot be
/// made (a password variable that is not set, TLS files that do not load).
std::unique_ptr<store::decision_store> make_store(const config::store_config& c, unsigned workers) {
  const auto& cap = c.capacity;
  // Global limits are split into one slice per worker (limit::memory_store).
  auto local = std::make_unique<store::local_store>(
      limit::store_capacity{cap[0], cap[1], cap[2], cap[3], cap[4]}, random_u64(), workers);
  if (c.type == config::store_config::kind::memory) return local;
  store::redis_options o;
  for (const auto& e : c.redis)
    o.nodes.emplace_back(e.host, e.port);
  o.cluster = c.cluster;
  o.username = c.username;
  if (!c.password_env.empty()) {
    const char* p = std::getenv(c.password_env.c_str());
    if (p == nullptr || *p == '\0') {
      throw std::runtime_error("store.password_env: " + c.password_env + " is not set");
    }
    o.password = p;
  }
  o.key_prefix = c.key_prefix;
  o.timeout = c.timeout;
  o.connect_timeout = c.connect_timeout;
  switch (c.fail_mode) {
    case config::store_config::failure::local:
      o.on_failure = store::fail_mode::local;
      break;
    case config::store_config::failure::open:
      o.on_failure = store::fail_mode::open;
      break;
    case config::store_config::failure::closed:
      o.on_failure = store::fail_mode::closed;
      break;
  }
  if (c.tls) {
    o.tls_ca = c.tls->ca;
    o.tls_certificate = c.tls->certificate;
    o.tls_private_key = c.tls->private_key;
    o.tls_server_name = c.tls->server_name;
  }
  return std::make_unique<store::redis_store>(std::move(o), workers, std::move(local));
}

/// The key that hashes limit key values (API keys, tokens). Random per process with the
/// in-process store; with Redis, replicas must hash alike to share a key's limit, so it is
/// derived from the PoW secret, which replicas already share.
core::siphash_key identity_key_for(const config::gateway_config& g, const std::string& secret,
                                   bool secret_given) {
  if (g.store.type == config::store_config::kind::memory) return {random_u64(), random_u64()};
  if (!secret_given) {
    spdlog::warn(
        "{} is not set: limits keyed on headers, query parameters, cookies or bearer "
        "tokens are not shared with other replicas through redis",
        g.pow.secret_env);
  }
  const pow::digest d = pow::sha256("tollgate limit keys\n", secret);
  std::uint64_t k0 = 0, k1 = 0;
  for (int i = 0; i < 8; ++i) {
    k0 = k0 << 8 | d[i];
    k1 = k1 << 8 | d[8 + i];
  }
  return {k0, k1};
}

/// TOLLGATE_TEST_CLOCK_OFFSET_MS: moves this process's clock (tests of replicas whose clocks
/// differ); 0 when unset.
core::nanos test_clock_offset() {
  const char* v = std::getenv("TOLLGATE_TEST_CLOCK_OFFSET_MS");
  if (v == nullptr || *v == '\0') return 0;
  return std::strtoll(v, nullptr, 10) * core::ns_per_ms;
}

/// What the store needs at start that the file alone does not show: the password's variable
/// set, the TLS files loadable. Throws std::runtime_error naming the key.
void check_store(const config::store_config& c) {
  if (c.type != config::store_config::kind::redis) return;
  if (!c.password_env.empty()) {
    const char* p = std::getenv(c.password_env.c_str());
    if (p == nullptr || *p == '\0') {
      throw std::runtime_error("store.password_env: " + c.password_env + " is not set");
    }
  }
  if (c.tls) {
    store::redis_options o;
    o.nodes = {{"check", 1}};
    o.tls_ca = c.tls->ca;
    o.tls_certificate = c.tls->certificate;
    o.tls_private_key = c.tls->private_key;
    store::redis_store(std::move(o), 1, nullptr);  // loads the files, connects nothing
  }
}

int check_config(const std::string& path) {
  try {
    const auto g = config::load_gateway(path);
    net::make_tls_contexts(g);                      // certificates and keys load
    const policy::challenge_page page(g.pow.page);  // the page template compiles
    try {
      check_store(g.store);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(g.file + ": " + e.what());
    }
    for (const auto& w : config::coverage_warnings(g.policy))
      std::fprintf(stderr, "warning: %s\n", w.c_str());
    std::printf("%s: ok (%zu listeners, %zu upstreams, %zu routes, %zu categories)\n", path.c_str(),
                g.listeners.size(), g.upstreams.size(), g.routes.size(),
                g.policy.categories.size());
    return 0;
  } catch (const std::exception& e) {
    // config::error above all; anything else is a bug, but still an answer, not an abort.
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

std::string endpoints_of(const config::upstream_config& u) {
  std::string out;
  for (const auto& e : u.endpoints) {
    if (!out.empty()) out += ", ";
    out += e.host + ":" + std::to_string(e.port);
  }
  return out;
}

void log_summary(const config::gateway_config& g, unsigned workers) {
  std::string categories;
  for (const auto& c : g.policy.categories)
    categories += (categories.empty() ? "" : ", ") + c.name;
  spdlog::info("tollgate {}: {} workers, store {}, categories: {}", version, workers,
               g.store.type == config::store_config::kind::memory ? "memory" : "redis", categories);
  for (const auto& u : g.upstreams)
    spdlog::info("upstream {}: {}", u.name, endpoints_of(u));
  spdlog::info("{} routes, default: {} -> {}", g.routes.size(), g.default_route.category,
               g.default_route.upstream);
}

std::string admin_token() {
  const char* t = std::getenv("TOLLGATE_ADMIN_TOKEN");
  if (t != nullptr && *t != '\0') return t;
  spdlog::warn(
      "TOLLGATE_ADMIN_TOKEN is not set: the admin API is open to whoever reaches the "
      "admin listener");
  return {};
}

/// tollgate pow solve CHALLENGE BITS
int solve(const char* challenge, const char* bits_text) {
  char* end = nullptr;
  const unsigned long bits = std::strtoul(bits_text, &end, 10);
  if (end == bits_text || *end != '\0' || bits > 64) {
    std::fprintf(stderr, "tollgate pow solve: BITS must be a number from 0 to 64\n");
    return 2;
  }
  std::printf("%s\n", pow::solve(challenge, static_cast<unsigned>(bits),
                                 std::max(1u, std::thread::hardware_concurrency()))
                          .c_str());
  return 0;
}

/// The label sets of the configuration in force: its categories and their limits, its
/// upstreams and the health of their endpoints.
void describe_in_force(const net::snapshot& s, metrics::scrape_values& values) {
  values.categories = s.category_metric;
  values.category_limits = s.limit_metric;
  values.upstreams = s.upstream_metric;
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  for (std::size_t u = 0; u < s.config.upstreams.size(); ++u) {
    const auto& up = s.config.upstreams[u];
    for (std::size_t e = 0; e < up.endpoints.size(); ++e) {
      const auto& ep = up.endpoints[e];
      const bool ejected = s.ejected_until[u][e].load(std::memory_order_relaxed) > now;
      const std::string host =
          ep.host.find(':') != std::string::npos ? "[" + ep.host + "]" : ep.host;
      values.endpoints.push_back({up.name, host + ":" + std::to_string(ep.port), !ejected});
    }
  }
}

/// Seconds since 1970, now.
double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// What a reload needs of the running process.
struct reload_context {
  const std::string& path;                        ///< the gateway file
  core::siphash_key identity_key;                 ///< the process's key for identity values
  metrics::registry& metrics;                     ///< label tables and reload counters
  policy::pow_state& pow;                         ///< process-wide PoW state
  net::server& server;                            ///< where the new snapshot goes
  std::shared_ptr<const net::snapshot>& current;  ///< the snapshot in force; replaced
  core::log_file& access_log;                     ///< reopened, or pointed elsewhere
};

/// What a reload read from the files: the configuration, or why there is none.
struct reload_files {
  std::optional<config::gateway_config> loaded;  ///< read and checked
  std::string error;                             ///< otherwise, what was wrong
};

/// Puts `files`, read by a reload, in force for requests that start afterwards. Each changed
/// setting that takes effect only at restart is logged by name and keeps its running value;
/// the rest applies, the logging level included. A file that cannot be used is logged and
/// counted, and the running configuration stays.
void reload(const reload_context& r, reload_files files) {
  try {
    if (!files.loaded) throw std::runtime_error(files.error);
    config::gateway_config loaded = std::move(*files.loaded);
    const auto& running = r.current->config;
    const auto restart_only = config::restart_only_changes(running, loaded);
    auto next = std::make_shared<const net::snapshot>(
        config::keep_restart_only(running, std::move(loaded)), r.identity_key, r.metrics, r.pow);
    // The access log is (re)opened before anything changes: a file that cannot be opened
    // fails the reload. Reopened even when unchanged, for logrotate.
    app::open_access_log(r.access_log, next->config.logging);
    for (const auto& key : restart_only) {
      spdlog::warn("reload: {} changed; takes effect at restart", key);
    }
    for (const auto& w : config::coverage_warnings(next->config.policy))
      spdlog::warn("{}", w);
    r.server.publish(next);
    r.current = std::move(next);
    // spdlog's level is one atomic, read by every logger call: it changes live. Set before the
    // line that says the configuration is in force (which is then true of the level too), and
    // that line written at the new level when it is above info, so that it is still seen.
    const auto level = spdlog::level::from_str(r.current->config.logging.level);
    spdlog::set_level(level);
    app::set_log_format(r.current->config.logging.format);
    r.metrics.reloads_ok.fetch_add(1);
    r.metrics.last_reload_ok.store(true);
    r.metrics.last_reload_success.store(unix_seconds_now());
    spdlog::log(std::max(level, spdlog::level::info), "reload: configuration from {} in force",
                r.path);
  } catch (const std::exception& e) {
    // config::error is what a bad file gives; catching every std::exception is the last line
    // of defence: a reload must never end the process that is serving.
    r.metrics.reloads_failed.fetch_add(1);
    r.metrics.last_reload_ok.store(false);
    spdlog::error("reload failed, the running configuration stays: {}", e.what());
  }
}

/// The threads `workers: auto` means: the CPUs this process may run on (its affinity mask),
/// fewer when a cgroup's CPU quota (cpu.max: containers, Kubernetes limits) allows less.
unsigned auto_workers() {
  unsigned n = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) n = std::max(1, CPU_COUNT(&set));
  // cgroup v2: "QUOTA PERIOD" or "max PERIOD".
  if (std::ifstream f("/sys/fs/cgroup/cpu.max"); f) {
    std::string quota;
    double period = 0;
    if (f >> quota >> period && quota != "max" && period > 0) {
      const double cpus = std::ceil(std::stod(quota) / period);
      if (cpus >= 1 && cpus < n) n = static_cast<unsigned>(cpus);
    }
  }
  return n;
}

int run(const std::string& path) {
  // Signals that must not end the process before their handlers exist (a SIGHUP sent by
  // `systemctl reload` just after the start): blocked until the signal_set below is made,
  // then delivered to it. Blocked before any thread starts, so that none takes them.
  sigset_t early;
  sigemptyset(&early);
  sigaddset(&early, SIGHUP);
  sigaddset(&early, SIGUSR1);
  ::pthread_sigmask(SIG_BLOCK, &early, nullptr);
  spdlog::flush_on(spdlog::level::info);
  config::gateway_config cfg;
  try {
    cfg = config::load_gateway(path);
  } catch (const std::exception& e) {  // config::error; anything else must not abort either
    spdlog::critical("{}", e.what());
    return 1;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.logging.level));
  app::set_log_format(cfg.logging.format);
  core::log_file access_log;
  try {
    app::open_access_log(access_log, cfg.logging);
  } catch (const std::exception& e) {
    spdlog::critical("{}: logging.access_log: {}", cfg.file, e.what());
    return 1;
  }
  const unsigned workers = cfg.workers != 0 ? cfg.workers : auto_workers();
  std::unique_ptr<store::decision_store> store_owner;
  try {
    store_owner = make_store(cfg.store, workers);
  } catch (const std::exception& e) {
    spdlog::critical("{}: {}", cfg.file, e.what());
    return 1;
  }
  store::decision_store& store = *store_owner;
  auto* redis = dynamic_cast<store::redis_store*>(store_owner.get());
  const core::steady_unix_clock clock(test_clock_offset());
  // The PoW secret: from the environment, or made up now (challenges then die with the
  // process, and replicas cannot verify each other's).
  std::string secret;
  const char* given = std::getenv(cfg.pow.secret_env.c_str());
  const bool secret_given = given != nullptr && *given != '\0';
  if (secret_given) {
    secret = given;
  } else {
    spdlog::warn("{} is not set: using a random PoW secret; challenges will not survive a restart",
                 cfg.pow.secret_env);
    secret.resize(32);
    pow::random_bytes(secret.data(), secret.size());
  }
  const core::siphash_key identity_key = identity_key_for(cfg, secret, secret_given);
  policy::pow_state pow_state(secret, cfg.pow, cfg.policy.pow_counters);
  net::shared_state shared{store, clock, pow_state};
  shared.access_log = &access_log;
  metrics::registry metrics;
  metrics.last_reload_success.store(unix_seconds_now());

  std::shared_ptr<const net::snapshot> current;
  try {
    current =
        std::make_shared<const net::snapshot>(std::move(cfg), identity_key, metrics, pow_state);
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
  // Signals are caught from here on (Asio queues them until the handler below waits), so a
  // SIGHUP sent as soon as the listeners are announced reloads rather than kills.
  asio::io_context control;
  asio::signal_set signals(control, SIGINT, SIGTERM, SIGHUP);
  signals.add(SIGUSR1);
  ::pthread_sigmask(SIG_UNBLOCK, &early, nullptr);
  log_summary(current->config, workers);
  for (const auto& w : config::coverage_warnings(current->config.policy))
    spdlog::warn("{}", w);
  const app::descriptor_budget fds =
      app::fit_descriptors(current->config, workers, app::raise_descriptor_limit());
  if (fds.max_connections == 0) {
    spdlog::critical(
        "{} file descriptors (ulimit -n, raised to the hard limit) cannot hold a single client "
        "connection: {} are reserved for listeners, admin.max_connections, upstream pools "
        "and the process",
        fds.limit, fds.fixed);
    return 1;
  }
  if (fds.max_connections < current->config.limits.max_connections) {
    spdlog::warn(
        "limits.max_connections {} needs {} file descriptors (two per connection, {} reserved) "
        "but the limit is {} (ulimit -n, raised to the hard limit): serving at most {} "
        "connections",
        current->config.limits.max_connections,
        fds.fixed + 2 * std::uint64_t{current->config.limits.max_connections}, fds.fixed, fds.limit,
        fds.max_connections);
  }
  net::server server(current, shared, workers, fds.max_connections, metrics);
  try {
    server.bind();
  } catch (const std::exception& e) {
    spdlog::critical("cannot listen: {}", e.what());
    return 1;
  }
  for (const auto& [name, ep] : server.bound()) {
    spdlog::info("listening on {} {}:{}", name, ep.address().to_string(), ep.port());
  }

  // The main thread runs the admin listener and the signals.
  bool draining = false;
  std::unique_ptr<net::admin_server> admin;
  try {
    const auto& a = current->config.admin;
    admin = std::make_unique<net::admin_server>(
        control,
        boost::asio::ip::tcp::endpoint(asio::ip::make_address(a.address.to_string()), a.port),
        net::admin_server::bounds{a.max_connections, a.request_timeout},
        net::admin_server::handlers{
            [&] {
              metrics::scrape_values values;
              for (const auto& t : store.tracked()) {
                values.tracked_keys.emplace_back(t.name, static_cast<double>(t.entries));
                values.tables.push_back({"limiter_" + t.name, static_cast<double>(t.entries),
                                         static_cast<double>(t.capacity),
                                         static_cast<double>(t.evictions)});
              }
              pow_state.violations().for_each_table(
                  [&](std::string_view name, std::size_t n, std::size_t cap, std::uint64_t ev) {
                    values.tables.push_back({std::string(name), static_cast<double>(n),
                                             static_cast<double>(cap), static_cast<double>(ev)});
                  });
              describe_in_force(*current, values);
              values.version = std::string(version);
              values.active_bans =
                  static_cast<double>(pow_state.violations().bans(clock.now()).size() +
                                      pow_state.manual_bans().list(clock.now()).size());
              if (redis != nullptr) {
                values.store = redis->counters();
                values.store_degraded = redis->degraded();
              }
              // This runs on the admin listener's own thread (it answers /metrics).
              values.admin_closed_for_room = static_cast<double>(admin->closed_for_room());
              values.admin_refused = static_cast<double>(admin->refused());
              return metrics::render(server.counters(), metrics, values);
            },
            [&]() -> std::pair<bool, std::string> {
              if (draining) return {false, "draining"};
              if (redis == nullptr || !redis->degraded()) return {true, "ready"};
              // Degraded: with fail_mode closed every request gets 503, so the balancer had
              // better send them elsewhere; otherwise this replica still serves.
              if (redis->on_failure() == store::fail_mode::closed) {
                return {false, "store degraded: redis unreachable, fail_mode closed"};
              }
              return {true, "ready (store degraded: redis unreachable, fail_mode " +
                                std::string(store::fail_mode_name(redis->on_failure())) + ")"};
            },
            [&](const net::admin_server::request& r) {
              return app::admin_api(
                         {pow_state, store, clock, current, server.limited(), redis != nullptr})
                  .handle(r);
            },
            admin_token()});
  } catch (const std::exception& e) {
    spdlog::critical("cannot listen on the admin address: {}", e.what());
    return 1;
  }
  spdlog::info("admin listening on {}:{}", admin->endpoint().address().to_string(),
               admin->endpoint().port());
  admin->start();
  server.start();
  app::notify_systemd("READY=1");  // Type=notify: systemd may now send reloads

  // SIGTERM/SIGINT: /readyz says 503 at once, serving goes on for shutdown.delay (balancers
  // notice), then the listeners close and requests in flight have shutdown.drain_timeout. The
  // admin listener answers until the end. A second signal skips what is left of the delay.
  asio::steady_timer delay(control);
  std::thread stopper;
  auto stop_serving = [&] {  // the delay's handler: runs once
    const auto drain = current->config.shutdown.drain_timeout;
    spdlog::info("closing the listeners; requests in flight have {} ms",
                 std::chrono::duration_cast<std::chrono::milliseconds>(drain).count());
    // server.stop() waits for the workers: on its own thread, so that the admin listener (on
    // this one) still answers meanwhile.
    stopper = std::thread([&, drain] {
      server.stop(drain);
      asio::post(control, [&] {
        admin->stop();
        control.stop();
      });
    });
  };
  // A reload reads its files on a thread of its own: a large policy file takes seconds to
  // read, and this thread answers the admin listener (liveness probes, scrapes) meanwhile.
  // The new snapshot is made and put in force here, where the metrics' label tables live. A
  // SIGHUP during a reload asks for one more after it, which reads the files as they are then.
  std::thread reader;
  bool reading = false, read_again = false;
  std::function<void()> start_reload = [&] {
    reading = true;
    app::notify_reloading();
    reader = std::thread([&] {
      reload_files files;
      try {
        files.loaded = config::load_gateway(path);
      } catch (const std::exception& e) {
        files.error = e.what();
      }
      asio::post(control, [&, files = std::move(files)]() mutable {
        reader.join();
        reload({path, identity_key, metrics, pow_state, server, current, access_log},
               std::move(files));
        app::notify_systemd("READY=1");
        reading = false;
        if (std::exchange(read_again, false)) start_reload();
      });
    });
  };
  // SIGHUP reloads, SIGUSR1 reopens the access log (logrotate).
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int signo) {
        if (ec) return;
        if (signo == SIGHUP) {
          if (reading) {
            read_again = true;
          } else {
            start_reload();
          }
        } else if (signo == SIGUSR1) {
          try {
            app::open_access_log(access_log, current->config.logging);
            spdlog::info("access log reopened");
          } catch (const std::exception& e) {
            spdlog::error("{}", e.what());
          }
        } else if (!draining) {
          draining = true;
          app::notify_systemd("STOPPING=1");
          const auto wait = current->config.shutdown.delay;
          spdlog::info("signal {}: draining; not ready, still serving for {} ms", signo,
                       std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
          delay.expires_after(wait);
          delay.async_wait([&](const boost::system::error_code&) { stop_serving(); });
        } else {
          delay.cancel();  // the delay's handler stops serving now
        }
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  control.run();
  if (stopper.joinable()) stopper.join();
  if (reader.joinable()) reader.join();  // a reload cut short by the stop
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "config/gateway.yaml";
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("tollgate %s\n", version.data());
    return 0;
  }
  if (argc == 3 && std::strcmp(argv[1], "--check-config") == 0) return check_config(argv[2]);
  if (argc >= 2 && std::strcmp(argv[1], "simulate") == 0) return app::simulate(argc - 2, argv + 2);
  if (argc == 5 && std::strcmp(argv[1], "pow") == 0 && std::strcmp(argv[2], "solve") == 0) {
    return solve(argv[3], argv[4]);
  }
  if (argc == 3 && std::strcmp(argv[1], "--config") == 0) {
    path = argv[2];
  } else if (argc != 1) {
    return usage();
  }
  return run(path);
}
