#pragma once
/// Turns the workers' counters into the Prometheus text format (DESIGN §10), through
/// prometheus-cpp's metric families and text serializer.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gateway/metrics/counters.hpp"

namespace tollgate::metrics {

/// Label tables and process-wide values, owned by the application.
/// Thread safety: name tables lock; the counters are atomic.
struct registry {
  name_table categories;                     ///< label `category`
  name_table upstreams;                      ///< label `upstream`
  name_table listeners;                      ///< label `listener`
  name_table reasons;                        ///< label `reason` (violation reasons)
  name_table limits{max_limit_names};        ///< label `level` (limit names)
  std::atomic<std::uint64_t> reloads_ok{0};  ///< tollgate_config_reloads_total{result="success"}
  std::atomic<std::uint64_t> reloads_failed{
      0};  ///< tollgate_config_reloads_total{result="failure"}
};

/// Values read at scrape time.
struct scrape_values {
  std::vector<std::pair<std::string, double>> tracked_keys;  ///< level -> entries held
  double active_bans = 0;                                    ///< bans in force
  /// The Redis store's counters per worker (none with the in-process store).
  std::vector<const store_counters*> store;
  bool store_degraded = false;  ///< Redis cannot be reached: fail_mode decides
};

/// The exposition of every metric, summed over `workers`.
std::string render(const std::vector<const worker_counters*>& workers, const registry& r,
                   const scrape_values& values);

}  // namespace tollgate::metrics
