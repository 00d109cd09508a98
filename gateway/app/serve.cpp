#include "gateway/app/serve.hpp"
#include "gateway/app/attack_watch.hpp"
#include "gateway/net/jwks_fetch.hpp"

#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "gateway/app/admin_endpoints.hpp"
#include "gateway/app/descriptors.hpp"
#include "gateway/app/logging.hpp"
#include "gateway/app/notify.hpp"
#include "gateway/app/overrides.hpp"
#include "gateway/app/reload.hpp"
#include "gateway/app/standing.hpp"
#include "gateway/app/state_file.hpp"
#include "gateway/app/store_setup.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/metrics/exposition.hpp"
#include "gateway/net/acme_client.hpp"
#include "gateway/net/admin.hpp"
#include "gateway/net/server.hpp"
#include "gateway/pow/crypto.hpp"
#include "gateway/store/local_store.hpp"

namespace tollgate::app {

namespace {

namespace asio = boost::asio;

/// TOLLGATE_TEST_CLOCK_OFFSET_MS: moves this process's clock (tests of replicas whose clocks
/// differ); 0 when unset.
core::nanos test_clock_offset() {
  const char* v = std::getenv("TOLLGATE_TEST_CLOCK_OFFSET_MS");
  if (v == nullptr || *v == '\0') return 0;
  return std::strtoll(v, nullptr, 10) * core::ns_per_ms;
}

/// The endpoints of `u` as host:port, comma-separated.
std::string endpoints_of(const config::upstream_config& u) {
  std::string out;
  for (const auto& e : u.endpoints) {
    if (!out.empty()) out += ", ";
    out += e.host + ":" + std::to_string(e.port);
  }
  return out;
}

/// The start-up line: version, workers, store, categories, upstreams and routes.
void log_summary(const config::gateway_config& g, unsigned workers, std::string_view version) {
  std::string categories;
  for (const auto& c : g.policy.categories)
    categories += (categories.empty() ? "" : ", ") + c.name;
  spdlog::info("tollgate {}: {} workers, store {}, categories: {}", version, workers,
               g.store.type == config::store_config::kind::memory ? "memory" : "redis", categories);
  for (const auto& u : g.upstreams)
    spdlog::info("upstream {}: {}", u.name, endpoints_of(u));
  spdlog::info("{} routes, default: {} -> {}", g.routes.size(), g.default_route.category,
               g.default_route.upstream);
  for (const auto& h : g.hosts) {
    std::string names;
    for (const auto& c : h.policy.categories)
      names += (names.empty() ? "" : ", ") + c.name;
    spdlog::info("host {} ({} names): {} routes, default: {} -> {}, categories: {}", h.label(),
                 h.names.size(), h.routes.size(), h.default_route.category,
                 h.default_route.upstream, names);
  }
}

/// TOLLGATE_ADMIN_TOKEN, or "" (said: the admin API is then open).
std::string admin_token() {
  const char* t = std::getenv("TOLLGATE_ADMIN_TOKEN");
  if (t != nullptr && *t != '\0') return t;
  spdlog::warn(
      "TOLLGATE_ADMIN_TOKEN is not set: the admin API is open to whoever reaches the "
      "admin listener");
  return {};
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

/// The running gateway: its configuration, store, workers, admin listener and signals, made in
/// start-up order (each step logs what stops the start, and says false), then serving until a
/// stop signal has drained the workers. Members are destroyed in the reverse order: the admin
/// listener, the workers, the signals, then the control loop they run on.
class gateway_process {
 public:
  /// The gateway of file `path`; `early` are the signals blocked until their handler exists.
  gateway_process(std::string path, std::string_view version, const sigset_t& early)
      : path_(std::move(path)),
        version_(version),
        early_(early),
        clock_(test_clock_offset()),
        delay_(control_) {}

  /// Starts and serves; the exit status.
  int run() {
    if (!load() || !prepare() || !listen() || !open_admin()) return 1;
    admin_->start();
    server_->start();
    overrides_->start();
    // A ban this replica's violation caused is counted by worker 0 (its counters have one
    // writer), wherever the entry was applied.
    // Attack mode forced through another replica: applied here on this thread, as the admin
    // API applies it.
    standing_->on_attack([this](std::string category, std::uint8_t level, core::nanos until) {
      asio::post(control_, [this, category = std::move(category), level, until] {
        // An entry read again at start may have run its course.
        if (until != 0 && until <= clock_.now()) return;
        const bool release = level == policy::standing_entry::released;
        const std::string why =
            release ? attack_->release(category) : attack_->force(category, level, until);
        if (!why.empty()) {
          spdlog::warn("standing: attack mode of {} from another replica not applied: {}", category,
                       why);
        } else {
          spdlog::info(
              "standing: attack mode of {} {} by another replica", category,
              release ? "released" : "forced to " + std::string(policy::attack_level_names[level]));
        }
      });
    });
    standing_->start(workers_, {[this] { server_->count_ban(); },
                                [this](pow::penalty_action a) { server_->count_transition(a); }});
    save_state_later();
    for (const forced_attack& f : std::exchange(forced_, {})) {
      const std::string why = attack_->force(f.category, f.level, f.until);
      if (why.empty()) {
        spdlog::info("state: attack mode of {} forced to {} again", f.category,
                     policy::attack_level_names[f.level]);
      } else {
        spdlog::warn("state: attack mode of {} not forced again: {}", f.category, why);
      }
    }
    attack_->start();
    follow_jwks();
    start_acme();
    notify_systemd("READY=1");  // Type=notify: systemd may now send reloads
    wait_signal();
    control_.run();
    if (stopper_.joinable()) stopper_.join();
    if (reader_.joinable()) reader_.join();  // a reload cut short by the stop
    spdlog::info("stopped");
    return 0;
  }

 private:
  /// The configuration, the logs and the store.
  bool load() {
    try {
      cfg_ = config::load_gateway(path_);
    } catch (const std::exception& e) {  // config::error; anything else must not abort either
      spdlog::critical("{}", e.what());
      return false;
    }
    spdlog::set_level(spdlog::level::from_str(cfg_.logging.level));
    set_log_format(cfg_.logging.format);
    try {
      open_access_log(access_log_, cfg_.logging);
    } catch (const std::exception& e) {
      spdlog::critical("{}: logging.access_log: {}", cfg_.file, e.what());
      return false;
    }
    workers_ = cfg_.workers != 0 ? cfg_.workers : auto_workers();
    try {
      store_ = make_store(cfg_.store, workers_);
    } catch (const std::exception& e) {
      spdlog::critical("{}: {}", cfg_.file, e.what());
      return false;
    }
    return true;
  }

  /// The PoW secret and state, the key of identity values, the first snapshot.
  bool prepare() {
    // The PoW secret: from the environment, or made up now (challenges then die with the
    // process, and replicas cannot verify each other's).
    const char* given = std::getenv(cfg_.pow.secret_env.c_str());
    const bool secret_given = given != nullptr && *given != '\0';
    if (secret_given) {
      secret_ = given;
    } else {
      spdlog::warn(
          "{} is not set: using a random PoW secret; challenges will not survive a restart",
          cfg_.pow.secret_env);
      secret_.resize(32);
      pow::random_bytes(secret_.data(), secret_.size());
    }
    // A state file carries the identity key its quotas' keys were hashed under.
    std::optional<std::string> state;
    if (!cfg_.store.state_file.empty()) state = read_state_file(cfg_.store.state_file);
    const auto kept_key = state ? state_identity_key(*state) : std::nullopt;
    identity_key_ = kept_key ? *kept_key : identity_key_for(cfg_, secret_, secret_given);
    pow_.emplace(secret_, cfg_.pow, cfg_.policy.pow_counters);
    shared_.emplace(net::shared_state{*store_, clock_, *pow_});
    shared_->access_log = &access_log_;
    overrides_.emplace(*shared_->overrides, *store_, clock_);
    metrics_.last_reload_success.store(unix_seconds_now());
    try {
      current_ =
          std::make_shared<const net::snapshot>(std::move(cfg_), identity_key_, metrics_, *pow_);
    } catch (const std::exception& e) {
      spdlog::critical("{}", e.what());
      return false;
    }
    standing_.emplace(*pow_, *shared_->tiers_set, *store_, current_->config.policy.pow_counters,
                      current_);
    if (standing_->shared()) shared_->standing = &*standing_;
    if (state) {
      state_parts parts = state_now();
      load_state(current_->config.store.state_file, *state, parts, clock_.now());
      forced_ = std::move(parts.forced);
    }
    return true;
  }

  /// The signals' handler, then the workers and their listeners.
  bool listen() {
    // Signals are caught from here on (Asio queues them until the handler waits), so a SIGHUP
    // sent as soon as the listeners are announced reloads rather than kills.
    signals_.emplace(control_, SIGINT, SIGTERM, SIGHUP);
    signals_->add(SIGUSR1);
    ::pthread_sigmask(SIG_UNBLOCK, &early_, nullptr);
    log_summary(current_->config, workers_, version_);
    for (const auto& w : config::coverage_warnings(current_->config))
      spdlog::warn("{}", w);
    const auto max_connections = connection_budget();
    if (!max_connections) return false;
    server_.emplace(current_, *shared_, workers_, *max_connections, metrics_);
    try {
      server_->bind();
    } catch (const std::exception& e) {
      spdlog::critical("cannot listen: {}", e.what());
      return false;
    }
    for (const auto& [name, ep] : server_->bound()) {
      spdlog::info("listening on {} {}:{}", name, ep.address().to_string(), ep.port());
    }
    return true;
  }

  /// The client connections the descriptors allow (fewer than limits.max_connections when
  /// they are short: said); nothing when not even one.
  std::optional<std::uint32_t> connection_budget() const {
    const auto& c = current_->config;
    const descriptor_budget fds = fit_descriptors(c, workers_, raise_descriptor_limit());
    if (fds.max_connections == 0) {
      spdlog::critical(
          "{} file descriptors (ulimit -n, raised to the hard limit) cannot hold a single "
          "client connection: {} are reserved for listeners, admin.max_connections, upstream "
          "pools and the process",
          fds.limit, fds.fixed);
      return std::nullopt;
    }
    if (fds.max_connections < c.limits.max_connections) {
      spdlog::warn(
          "limits.max_connections {} needs {} file descriptors (two per connection, {} "
          "reserved) but the limit is {} (ulimit -n, raised to the hard limit): serving at "
          "most {} connections",
          c.limits.max_connections, fds.fixed + 2 * std::uint64_t{c.limits.max_connections},
          fds.fixed, fds.limit, fds.max_connections);
    }
    return fds.max_connections;
  }

  /// The admin listener, on this thread with the signals.
  bool open_admin() {
    attack_.emplace(control_, current_, *server_, clock_);
    endpoints_.emplace(admin_sources{*store_, *pow_, clock_, current_, *server_, metrics_,
                                     draining_, version_, *overrides_, *attack_, *standing_});
    try {
      const auto& a = current_->config.admin;
      admin_ = std::make_unique<net::admin_server>(
          control_, asio::ip::tcp::endpoint(asio::ip::make_address(a.address.to_string()), a.port),
          net::admin_server::bounds{a.max_connections, a.request_timeout},
          endpoints_->handlers(admin_, admin_token()));
    } catch (const std::exception& e) {
      spdlog::critical("cannot listen on the admin address: {}", e.what());
      return false;
    }
    spdlog::info("admin listening on {}:{}", admin_->endpoint().address().to_string(),
                 admin_->endpoint().port());
    return true;
  }

  /// Handles the next signal (and so on, until the signal set is cancelled).
  void wait_signal() {
    signals_->async_wait([this](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      on_signal(signo);
      wait_signal();
    });
  }

  /// SIGHUP reloads, SIGUSR1 reopens the access log (logrotate), SIGTERM and SIGINT drain.
  void on_signal(int signo) {
    if (signo == SIGHUP) {
      if (reading_) {
        read_again_ = true;
      } else {
        start_reload();
      }
    } else if (signo == SIGUSR1) {
      try {
        open_access_log(access_log_, current_->config.logging);
        spdlog::info("access log reopened");
      } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
      }
    } else if (!draining_) {
      start_draining(signo);
    } else {
      delay_.cancel();  // the delay's handler stops serving now
    }
  }

  /// A reload reads its files on a thread of its own: a large policy file takes seconds to
  /// read, and this thread answers the admin listener (liveness probes, scrapes) meanwhile.
  /// The new snapshot is made and put in force here, where the metrics' label tables live. A
  /// SIGHUP during a reload asks for one more after it, which reads the files as they are then.
  void start_reload() {
    reading_ = true;
    notify_reloading();
    reader_ = std::thread([this] {
      reload_files files;
      try {
        files.loaded = config::load_gateway(path_);
      } catch (const std::exception& e) {
        files.error = e.what();
      }
      asio::post(control_, [this, files = std::move(files)]() mutable {
        reader_.join();
        reload({path_, identity_key_, metrics_, *pow_, *server_, current_, access_log_,
                [this] {
                  attack_->refresh();
                  standing_->set_snapshot(current_);
                }},
               std::move(files));
        follow_jwks();
        notify_systemd("READY=1");
        reading_ = false;
        if (std::exchange(read_again_, false)) start_reload();
      });
    });
  }

  /// Fetches identity.jwt.jwks_url of the configuration in force into its verifier: the same
  /// fetcher while the URL stays (a reload's verifier was seeded with the keys in force), a new
  /// one when it changes, none without one.
  void follow_jwks() {
    const auto& jwt = current_->config.identity.jwt;
    if (!current_->jwt || !jwt || jwt->jwks_url.empty()) {
      jwks_.reset();
      return;
    }
    if (jwks_ && jwks_->url() == jwt->jwks_url) {
      jwks_->retarget(current_->jwt, jwt->jwks_refresh);
      return;
    }
    jwks_ = std::make_unique<net::jwks_fetcher>(control_, jwt->jwks_url, jwt->jwks_refresh,
                                                current_->jwt);
  }

  /// An ACME client per listener with tls.acme (docs/design.md §17), for the life of the
  /// process: the settings are those of the start (a reload keeps them).
  void start_acme() {
    for (const auto& l : current_->config.listeners) {
      if (!l.tls || !l.tls->acme) continue;
      const std::string name = l.tls->acme->domains.front();
      acme_.push_back(std::make_unique<net::acme_client>(
          control_, l.name, *l.tls->acme, shared_->acme,
          [this, name](std::int64_t not_after, bool fresh) {
            metrics_.certificates.set(name, static_cast<double>(not_after));
            if (fresh) install_certificates();
          }));
    }
  }

  /// A new snapshot of the configuration in force, its TLS contexts made again, so that the
  /// listeners serve a certificate ACME has just stored to new connections (docs/design.md
  /// §17); the files are read as a reload reads them.
  void install_certificates() {
    try {
      auto next =
          std::make_shared<const net::snapshot>(current_->config, identity_key_, metrics_, *pow_);
      if (next->jwt && current_->jwt) next->jwt->set_keys(current_->jwt->keys());
      current_ = next;
      attack_->refresh();  // before the workers have it
      standing_->set_snapshot(current_);
      server_->publish(std::move(next));
      follow_jwks();
      spdlog::info("acme: certificates installed");
    } catch (const std::exception& e) {
      spdlog::error("acme: the new certificate cannot be installed: {}", e.what());
    }
  }

  /// SIGTERM/SIGINT: /readyz says 503 at once, serving goes on for shutdown.delay (balancers
  /// notice), then the listeners close and requests in flight have shutdown.drain_timeout. The
  /// admin listener answers until the end. A second signal skips what is left of the delay.
  void start_draining(int signo) {
    draining_ = true;
    notify_systemd("STOPPING=1");
    const auto wait = current_->config.shutdown.delay;
    spdlog::info("signal {}: draining; not ready, still serving for {} ms", signo,
                 std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
    delay_.expires_after(wait);
    delay_.async_wait([this](const boost::system::error_code&) { stop_serving(); });
  }

  /// What the state file holds, as it is now.
  state_parts state_now() {
    state_parts parts(*pow_, *shared_->tiers_set, *shared_->overrides);
    parts.identity_key = identity_key_;
    if (auto* local = dynamic_cast<store::local_store*>(store_.get())) {
      parts.limits = &local->memory();
      for (const policy::compiled_policy* p : current_->policies()) {
        for (const policy::category_limits& c : p->categories()) {
          for (const limit::limit_spec& l : c.limits) {
            if (!l.is_quota()) continue;
            for (const bool v6 : {false, true}) {
              const quota_place q{l.table(v6), l.scope};
              if (std::find(parts.quotas.begin(), parts.quotas.end(), q) == parts.quotas.end())
                parts.quotas.push_back(q);
            }
          }
        }
      }
    }
    if (attack_) {
      for (const attack_watch::view& v : attack_->list()) {
        if (v.status.forced && v.status.level > 0)
          parts.forced.push_back({v.category, v.status.level, v.forced_until});
      }
    }
    return parts;
  }

  /// Writes the state file now (store.state_file), logging at info when `at_stop`.
  void save_state(bool at_stop) {
    const auto& path = current_->config.store.state_file;
    if (path.empty()) return;
    save_timer_.cancel();
    state_parts parts = state_now();
    std::size_t bytes = 0;
    const auto started = std::chrono::steady_clock::now();
    const std::string error = save_state_file(path, parts, clock_.now(), bytes);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    if (!error.empty()) {
      spdlog::error("state: not saved: {}", error);
    } else {
      spdlog::log(at_stop ? spdlog::level::info : spdlog::level::debug,
                  "state: saved {} ({} bytes) in {:.1f} ms", path, bytes, ms);
    }
  }

  /// Saves the state file every store.save_interval (on this thread: the workers go on).
  void save_state_later() {
    if (current_->config.store.state_file.empty()) return;
    save_timer_.expires_after(current_->config.store.save_interval);
    save_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || draining_) return;
      save_state(false);
      save_state_later();
    });
  }

  /// The delay's handler: runs once.
  void stop_serving() {
    const auto drain = current_->config.shutdown.drain_timeout;
    spdlog::info("closing the listeners; requests in flight have {} ms",
                 std::chrono::duration_cast<std::chrono::milliseconds>(drain).count());
    // server.stop() waits for the workers: on its own thread, so that the admin listener (on
    // this one) still answers meanwhile.
    stopper_ = std::thread([this, drain] {
      server_->stop(drain);
      asio::post(control_, [this] {
        // The workers are stopped: what they recorded is all there.
        save_state(true);
        attack_->stop();
        acme_.clear();
        admin_->stop();
        control_.stop();
      });
    });
  }

  std::string path_;                              ///< the gateway file
  std::string_view version_;                      ///< tollgate_build_info
  sigset_t early_;                                ///< blocked until signals_ exists
  config::gateway_config cfg_;                    ///< as loaded, until the snapshot takes it
  core::log_file access_log_;                     ///< the access log
  unsigned workers_ = 1;                          ///< worker threads
  std::unique_ptr<store::decision_store> store_;  ///< the limiter store
  const core::steady_unix_clock clock_;           ///< time for decisions and headers
  std::string secret_;                            ///< the PoW secret
  core::siphash_key identity_key_{};              ///< hashes limit key values
  std::optional<policy::pow_state> pow_;          ///< challenges, violations, bans
  std::optional<net::shared_state> shared_;       ///< what every worker shares
  std::optional<override_keeper> overrides_;      ///< the admin API's overrides, shared or not
  /// Violations, bans and spent proofs, shared by replicas with store: redis.
  std::optional<standing_keeper> standing_;
  metrics::registry metrics_;                            ///< label tables, reload counters
  std::shared_ptr<const net::snapshot> current_;         ///< the configuration in force
  asio::io_context control_;                             ///< this thread's: admin, signals
  std::optional<asio::signal_set> signals_;              ///< SIGINT, SIGTERM, SIGHUP, SIGUSR1
  std::unique_ptr<net::jwks_fetcher> jwks_;              ///< identity.jwt.jwks_url, when set
  std::vector<std::unique_ptr<net::acme_client>> acme_;  ///< one per listener with tls.acme
  std::optional<net::server> server_;                    ///< the workers
  std::optional<attack_watch> attack_;                   ///< attack mode (docs/design.md §16)
  std::optional<admin_endpoints> endpoints_;             ///< what the admin listener answers
  std::unique_ptr<net::admin_server> admin_;             ///< the admin listener
  bool draining_ = false;                                ///< a stop signal came
  asio::steady_timer delay_;                             ///< shutdown.delay
  asio::steady_timer save_timer_{control_};              ///< store.save_interval
  std::thread stopper_;                                  ///< stops the workers
  std::thread reader_;                                   ///< reads a reload's files
  bool reading_ = false, read_again_ = false;            ///< a reload is reading; one more asked
  /// Attack levels the state file had forced, until attack_ runs to force them again.
  std::vector<forced_attack> forced_;
};

}  // namespace

int serve(const std::string& path, std::string_view version) {
  // Signals that must not end the process before their handlers exist (a SIGHUP sent by
  // `systemctl reload` just after the start): blocked until the signal_set is made, then
  // delivered to it. Blocked before any thread starts, so that none takes them.
  sigset_t early;
  sigemptyset(&early);
  sigaddset(&early, SIGHUP);
  sigaddset(&early, SIGUSR1);
  ::pthread_sigmask(SIG_BLOCK, &early, nullptr);
  spdlog::flush_on(spdlog::level::info);
  return gateway_process(path, version, early).run();
}

}  // namespace tollgate::app
