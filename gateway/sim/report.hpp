#pragma once
/// What `tollgate simulate` prints: a replay's result as text for people, or as one JSON object
/// for scripts. Both are built from the same summaries, so they cannot disagree.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gateway/policy/attack.hpp"
#include "gateway/sim/replay.hpp"
#include "gateway/sim/timeline.hpp"

namespace tollgate::sim {

/// One category under one configuration, with names instead of slots.
struct category_summary {
  std::string name;                                                  ///< the category
  std::uint64_t requests = 0;                                        ///< replayed
  std::uint64_t admitted = 0;                                        ///< forwarded
  std::uint64_t exempt = 0;                                          ///< on the allow list
  std::array<std::uint64_t, core::outcome_count> outcomes{};         ///< by outcome
  std::vector<std::pair<std::string, std::uint64_t>> limited_by;     ///< "limit.tier": 429 and 428
  std::vector<std::pair<std::string, std::uint64_t>> shadow_by;      ///< "limit.tier": shadowed
  std::vector<std::pair<std::string, std::uint64_t>> unkeyed;        ///< limit: key missing
  std::vector<std::pair<std::string, std::uint64_t>> tier_requests;  ///< consumer tier: replayed
  std::vector<std::pair<std::string, std::uint64_t>> tier_limited;   ///< consumer tier: 429, 428
  std::vector<std::pair<std::string, std::uint64_t>> top_addresses;  ///< most limited first
  std::vector<std::pair<std::string, std::uint64_t>> top_networks;   ///< most limited first
  bool attack = false;  ///< has attack mode (docs/design.md §16)
  /// Per level, the multiple of the baseline above which it is entered; 0: not configured.
  std::array<double, policy::attack_levels> above{};
  /// Its time series, run_summary::series_width seconds a bucket from series_origin.
  std::vector<time_bucket> series;
};

/// A change of attack level, with its category's name.
struct level_change_summary {
  core::nanos time = 0;   ///< the tick that made it
  std::string category;   ///< the category
  std::uint8_t from = 0;  ///< level left
  std::uint8_t to = 0;    ///< level entered
  std::string why;        ///< the monitor's reason
};

/// One configuration's summary.
struct run_summary {
  std::string file;                           ///< its gateway file
  std::vector<category_summary> categories;   ///< in policy order
  std::uint64_t unroutable = 0;               ///< targets that are no valid path
  std::int64_t series_origin = 0;             ///< the first bucket's start (s since the epoch)
  std::int64_t series_width = 1;              ///< seconds per bucket
  std::vector<level_change_summary> changes;  ///< attack levels entered and left, in time order
};

/// Summarises `t`, the tally of `s`, keeping the `top` most limited addresses and networks.
run_summary summarise(const run_tally& t, const simulator& s, std::size_t top);

/// What a report shows.
struct report_input {
  const log_set& logs;            ///< the logs replayed
  const replay_result& result;    ///< the replay
  std::vector<run_summary> runs;  ///< one, or two with --compare
  double seconds = 0;             ///< wall time of the whole run
  std::size_t listed = 50;        ///< differences listed in text
};

/// The report as text.
std::string text_report(const report_input& in);
/// The report as one JSON object (and a newline).
std::string json_report(const report_input& in);
/// The report as one self-contained HTML page: inline CSS and SVG charts of each category's
/// time series, nothing loaded from anywhere (docs/simulator.md).
std::string html_report(const report_input& in);

/// `t` as RFC 3339 UTC with microseconds.
std::string format_time(core::nanos t);

}  // namespace tollgate::sim
