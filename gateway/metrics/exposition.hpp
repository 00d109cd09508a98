#pragma once
/// Turns the workers' counters into the Prometheus text format (docs/design.md §10), through
/// prometheus-cpp's metric families and text serializer.

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/metrics/counters.hpp"

namespace tollgate::metrics {

/// The name in registry::categories of category `category` of host entry `host` ("" for the
/// top level) when the configuration has `hosts` (docs/design.md §15, "Tenants (per Host)"):
/// written as two labels, `category` and `host`. Without hosts a category's name is its own.
std::string host_category(std::string_view host, std::string_view category);

/// The notAfter of each certificate ACME keeps (docs/design.md §17), by name.
/// Thread safety: every member may be called from any thread (one mutex).
class certificate_expiries {
 public:
  /// Records that certificate `name` expires at `not_after` (Unix seconds).
  void set(const std::string& name, double not_after) {
    const std::lock_guard lock(mutex_);
    for (auto& [n, v] : values_) {
      if (n == name) {
        v = not_after;
        return;
      }
    }
    values_.emplace_back(name, not_after);
  }
  /// Every certificate's name and expiry, in the order first set.
  std::vector<std::pair<std::string, double>> all() const {
    const std::lock_guard lock(mutex_);
    return values_;
  }

 private:
  mutable std::mutex mutex_;                            ///< guards values_
  std::vector<std::pair<std::string, double>> values_;  ///< name → notAfter
};

/// Label tables and process-wide values, owned by the application.
/// Thread safety: name tables lock; the counters are atomic.
struct registry {
  name_table categories;                          ///< label `category` (and `host`: host_category)
  name_table upstreams;                           ///< label `upstream`
  name_table listeners;                           ///< label `listener`
  name_table reasons;                             ///< label `reason` (violation reasons)
  name_table limits{max_limit_names};             ///< label `level` (limit names)
  name_table consumer_tiers{max_consumer_tiers};  ///< label `consumer_tier` (tier names)
  std::atomic<std::uint64_t> reloads_ok{0};  ///< tollgate_config_reloads_total{result="success"}
  std::atomic<std::uint64_t> reloads_failed{
      0};                                  ///< tollgate_config_reloads_total{result="failure"}
  std::atomic<bool> last_reload_ok{true};  ///< tollgate_config_last_reload_successful
  /// tollgate_config_last_reload_success_timestamp_seconds (the start, before any reload)
  std::atomic<double> last_reload_success{0};
  /// tollgate_certificate_expiry_timestamp_seconds: set by the ACME clients, read at scrape.
  certificate_expiries certificates;
};

/// One bounded table of the process (limiter state, violation counters, bans).
struct table_values {
  std::string name;      ///< label `table`
  double entries = 0;    ///< held now
  double capacity = 0;   ///< most it holds
  double evictions = 0;  ///< live entries dropped for room, since the start
};

/// One upstream endpoint's health.
struct endpoint_values {
  std::string upstream;  ///< label `upstream`
  std::string endpoint;  ///< label `endpoint`, host:port as configured
  bool up = true;        ///< not ejected by any worker now
};

/// Values read at scrape time.
/// One category's attack mode (docs/design.md §16), by its label index.
struct attack_values {
  bool on = false;                       ///< the category has attack_mode: its series are written
  double level = 0;                      ///< 0..3
  std::array<double, 16> transitions{};  ///< [from * 4 + to]
};

struct scrape_values {
  std::vector<std::pair<std::string, double>> tracked_keys;  ///< level -> entries held
  std::vector<table_values> tables;                          ///< every bounded table
  double active_bans = 0;                                    ///< bans in force
  /// Attack mode per category label index (shorter: no category past its end has it).
  std::vector<attack_values> attack;
  /// Clients on each step of the penalty ladder (metrics::penalty_steps order).
  std::array<double, penalty_steps.size()> penalty_clients{};
  /// Label indices of the categories in force (a category a reload removed has no series
  /// any more).
  std::vector<std::uint16_t> categories;
  /// Per entry of `categories`, the label indices (`level`) of its limits: each has a
  /// tollgate_rate_limited_total series from the start, at 0.
  std::vector<std::vector<std::uint16_t>> category_limits;
  /// Per entry of `categories`, the label indices (`consumer_tier`) of its policy's tiers
  /// (docs/design.md §15), empty for a policy without tiers. When every entry is empty, no
  /// series has a `consumer_tier` label.
  std::vector<std::vector<std::uint16_t>> category_tiers;
  std::vector<std::uint16_t> upstreams;    ///< label indices of the upstreams in force
  std::vector<endpoint_values> endpoints;  ///< of the upstreams in force
  /// Each ACME certificate's name (its first domain) and notAfter in Unix seconds.
  std::vector<std::pair<std::string, double>> certificates;
  std::string version;  ///< tollgate_build_info{version}
  /// The Redis store's counters per worker (none with the in-process store).
  std::vector<const store_counters*> store;
  bool store_degraded = false;  ///< Redis cannot be reached: fail_mode decides
  /// Admin connections closed at admin.max_connections: the one waiting longest on its peer
  /// closed to make room, and newcomers refused (none was waiting).
  double admin_closed_for_room = 0, admin_refused = 0;
};

/// The exposition of every metric, summed over `workers`, with the process's own
/// (process_resident_memory_bytes, process_cpu_seconds_total, process_open_fds, ...: the
/// names every Prometheus client library uses).
std::string render(const std::vector<const worker_counters*>& workers, const registry& r,
                   const scrape_values& values);

}  // namespace tollgate::metrics
