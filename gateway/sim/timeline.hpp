#pragma once
/// A replay's time series (docs/simulator.md, "Attack mode and the time series"): per category
/// and per bucket of the log's time, its requests by outcome and its busiest second; for a
/// category with attack mode (docs/design.md §16), also the level in force and the learnt
/// baseline as the monitor's ticks left them, and every change of level. Buckets start one
/// second wide; when a log outgrows max_buckets, neighbours merge in pairs and the width
/// doubles, so that any log, a day or ten years, gives at most max_buckets of them.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gateway/core/clock.hpp"
#include "gateway/core/outcome.hpp"

namespace tollgate::sim {

/// One category's stretch of time.
struct time_bucket {
  std::uint64_t requests = 0;                                 ///< replayed
  std::uint64_t admitted = 0;                                 ///< forwarded
  std::array<std::uint64_t, core::outcome_count> outcomes{};  ///< by outcome
  std::uint64_t peak = 0;   ///< the most requests in one second of it
  double baseline_sum = 0;  ///< the baseline after each of its attack-mode ticks, summed
  std::uint32_t ticks = 0;  ///< attack-mode ticks in it (0: no baseline known)
  std::uint8_t level = 0;   ///< the highest attack level in force in it

  /// Adds `o`, the bucket that follows, into this one.
  void merge(const time_bucket& o) noexcept;
  /// The mean baseline over its ticks (requests per second); 0 without ticks.
  double baseline() const noexcept {
    return ticks == 0 ? 0 : baseline_sum / static_cast<double>(ticks);
  }
};

/// A change of attack level during a replay.
struct level_change {
  core::nanos time = 0;        ///< the tick that made it
  std::uint16_t category = 0;  ///< by index
  std::uint8_t from = 0;       ///< level left
  std::uint8_t to = 0;         ///< level entered
  std::string why;             ///< the monitor's reason
};

/// Thread safety: none (one simulation, one thread).
class timeline {
 public:
  /// At most this many buckets per category (between half of it and it once merged).
  static constexpr std::size_t max_buckets = 1500;

  /// Series for `categories` categories.
  explicit timeline(std::size_t categories) : series_(categories) {}

  /// The bucket of `category` holding the whole second `second` (seconds since the epoch).
  /// The first call fixes the origin; later seconds only grow, earlier ones fall in bucket 0.
  time_bucket& at(std::uint16_t category, std::int64_t second);

  /// The first bucket's start (seconds since the epoch).
  std::int64_t origin() const noexcept { return origin_; }
  /// Each bucket's width in seconds (a power of two).
  std::int64_t width() const noexcept { return width_; }
  /// How many buckets the longest series has.
  std::size_t size() const noexcept { return size_; }
  /// The buckets of `category` (fewer than size() when its last ones are empty).
  const std::vector<time_bucket>& buckets(std::size_t category) const { return series_[category]; }

  std::vector<level_change> changes;  ///< every change of level, in time order

 private:
  /// Merges neighbours in pairs: the width doubles.
  void halve();

  std::vector<std::vector<time_bucket>> series_;  ///< by category
  bool started_ = false;
  std::int64_t origin_ = 0;
  std::int64_t width_ = 1;
  std::size_t size_ = 0;
};

}  // namespace tollgate::sim
