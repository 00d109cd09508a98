#pragma once
/// What `tollgate simulate` prints: a replay's result as text for people, or as one JSON object
/// for scripts. Both are built from the same summaries, so they cannot disagree.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gateway/sim/replay.hpp"

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
};

/// One configuration's summary.
struct run_summary {
  std::string file;                          ///< its gateway file
  std::vector<category_summary> categories;  ///< in policy order
  std::uint64_t unroutable = 0;              ///< targets that are no valid path
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

/// `t` as RFC 3339 UTC with microseconds.
std::string format_time(core::nanos t);

}  // namespace tollgate::sim
