#pragma once
/// The time series' share of the report (docs/simulator.md, "Attack mode and the time series"):
/// what the text, JSON and HTML reports all take from a category's buckets.

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/sim/report.hpp"

namespace tollgate::sim {

/// `series` merged `factor` buckets into one (the last may hold fewer).
std::vector<time_bucket> coarser(const std::vector<time_bucket>& series, std::size_t factor);
/// The factor that brings `n` buckets down to at most `rows`.
std::size_t factor_for(std::size_t n, std::size_t rows) noexcept;
/// Requests of `b` answered otherwise than forwarded, pass or refusal alike.
std::uint64_t refused(const time_bucket& b) noexcept;
/// `b`'s requests of outcome `o`.
inline std::uint64_t of(const time_bucket& b, core::outcome o) noexcept {
  return b.outcomes[static_cast<std::size_t>(o)];
}
/// `v` with up to one decimal: "512", "10.2".
std::string rate_text(double v);
/// The text report's section on attack mode and the time series of `run`: the changes of
/// level, and a table of at most 24 rows per category with attack mode.
void text_attack(std::string& out, const run_summary& run);

}  // namespace tollgate::sim
