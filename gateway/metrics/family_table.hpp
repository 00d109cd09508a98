#pragma once
/// The metric families as a table (internal to metrics/): each family's name, help, type and
/// labels beside the field it reads. exposition.cpp writes the table; families.cpp is it.

#include <prometheus/metric_type.h>

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "gateway/metrics/exposition.hpp"

namespace tollgate::metrics {

/// What /proc says of this process.
struct process_stats {
  double cpu_seconds = 0, resident_bytes = 0, virtual_bytes = 0, start_time = 0;
  double open_fds = 0, max_fds = 0;
};

/// The labels a family's series run over, each in the order its series are written.
enum class axis : std::uint8_t {
  none,
  category,          ///< `category`: the categories in force
  category_limit,    ///< `level`: the limits of the category of the family's first axis
  category_tier,     ///< `consumer_tier`: the tiers of the policy of that category
  upstream,          ///< `upstream`: the upstreams in force
  listener,          ///< `listener`: every listener so far
  reason,            ///< `reason`: every violation reason so far
  decision,          ///< `decision`
  code_class,        ///< `code_class`
  upstream_error,    ///< `kind` of tollgate_upstream_errors_total
  refusal,           ///< `reason` of tollgate_connections_refused_total
  verification,      ///< `result` of tollgate_pow_verifications_total
  tier,              ///< `tier`: short, long
  limit_mode,        ///< `mode`: enforce (always shown), shadow (shown once it happens)
  ws_direction,      ///< `direction`
  ws_action,         ///< `action`
  upgrade_refusal,   ///< `reason` of tollgate_websocket_upgrades_refused_total
  ws_close_code,     ///< `code`: the close codes, then "other"
  ws_closer,         ///< `by`
  store_source,      ///< `source`
  store_error,       ///< `kind` of tollgate_store_errors_total
  version,           ///< `version`: the one build
  endpoint,          ///< `upstream` and `endpoint` of every endpoint in force
  tracked_level,     ///< `level` of tollgate_tracked_keys
  table,             ///< `table`: every bounded table
  reload_result,     ///< `result`: success, failure
  admin_closed,      ///< `reason`: room, refused
  token_result,      ///< `result` of tollgate_token_checks_total
  clearance_result,  ///< `result` of tollgate_pow_clearances_total
  penalty_step,      ///< `step`: the penalty ladder's actions (docs/design.md §16)
  attack_from,       ///< `from`: attack mode's levels
  attack_to,         ///< `to`: attack mode's levels
  h2_goaway,         ///< `reason` of tollgate_http2_goaways_total
  certificate,       ///< `name`: each certificate obtained by ACME
};
inline constexpr std::size_t axis_count = static_cast<std::size_t>(axis::certificate) + 1;

/// Label indices of one series, by axis position in its family.
using series_index = std::array<std::size_t, 5>;

/// A histogram of any size, read through.
struct histogram_view {
  std::span<const counter> buckets;  ///< per bucket, +Inf last
  const counter* sum_ns = nullptr;   ///< sum of observations, nanoseconds
  std::span<const double> bounds;    ///< the buckets' upper bounds, seconds
};
template <std::size_t N>
histogram_view view(const histogram<N>& h, const std::array<double, N>& bounds) {
  return {h.buckets, &h.sum_ns, bounds};
}

/// Everything a scrape reads.
struct scrape {
  const std::vector<const worker_counters*>& workers;
  const registry& r;
  const scrape_values& values;
  process_stats process;
};

/// A count of one worker's (or its store side's), summed over the workers.
template <class W>
using count_of = std::uint64_t (*)(const W&, const series_index&);
/// A histogram of one worker's (or its store side's), summed over the workers.
template <class W>
using histogram_of = histogram_view (*)(const W&, const series_index&);
/// A value the scrape reads once.
using value_of = double (*)(const scrape&, const series_index&);

/// One metric family: its name, help, type and labels beside what it reads.
struct family_row {
  std::string_view name;                                          ///< the family's name
  std::string_view help;                                          ///< its HELP line
  prometheus::MetricType type = prometheus::MetricType::Counter;  ///< counter, gauge, histogram
  std::array<axis, 5> labels{};  ///< series run over these, the first outermost
  std::variant<count_of<worker_counters>, histogram_of<worker_counters>, value_of,
               count_of<store_counters>, histogram_of<store_counters>>
      read;                   ///< what a series reads, at its label indices
  bool only_counted = false;  ///< a series only once its count is not 0
  bool code_first = false;    ///< the second label written before the first
  bool store_only = false;    ///< written only with the Redis store
};

/// Every family, in the order of the exposition.
extern const std::span<const family_row> families;

}  // namespace tollgate::metrics
