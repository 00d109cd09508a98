#pragma once
/// Attack mode in a replay (docs/design.md §16): the gateway's own attack_monitor per category
/// with attack_mode, ticked at each whole second of the log's time with the category's count of
/// replayed requests, as gateway/app/attack_watch.cpp ticks it each second of the wall clock;
/// its status written on a board that admission reads. Everything follows from the log's times,
/// so the same log always gives the same levels. It also keeps the replay's time series.

#include <cstdint>
#include <optional>
#include <vector>

#include "gateway/core/clock.hpp"
#include "gateway/core/outcome.hpp"
#include "gateway/policy/attack.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/sim/timeline.hpp"

namespace tollgate::sim {

/// Thread safety: none (one simulation, one thread).
class attack_replay {
 public:
  /// For the categories of `p`, which must outlive it.
  explicit attack_replay(const policy::compiled_policy& p);

  /// Ticks every monitor at each whole second after the last tick up to `now`, before a
  /// request at `now` is decided. A gap longer than catch_up() is ticked second by second for
  /// catch_up() (every level has stepped down and the baseline has forgotten the traffic
  /// before it), then once at the last whole second: years of silence cost no more.
  void advance(core::nanos now);
  /// Counts a request of `category` decided at `now` as `result` (after advance(now)).
  void count(std::uint16_t category, core::nanos now, core::outcome result);

  /// What admission reads; null when no category has attack mode.
  const policy::attack_board* board() const noexcept { return any_ ? &board_ : nullptr; }
  /// The time series and the changes of level so far.
  const timeline& series() const noexcept { return timeline_; }
  /// The longest stretch of silence ticked second by second.
  core::nanos catch_up() const noexcept { return catch_up_; }

 private:
  /// Ticks every monitor at `at` (a whole second).
  void tick(core::nanos at);

  const policy::compiled_policy& policy_;
  policy::attack_board board_;                                   ///< by category index
  std::vector<std::optional<policy::attack_monitor>> monitors_;  ///< by category index
  std::vector<std::uint64_t> totals_;                            ///< requests so far, by category
  std::vector<std::int64_t> second_;                             ///< the second last counted in
  std::vector<std::uint64_t> in_second_;                         ///< requests in that second
  bool any_ = false;                                             ///< some category has attack mode
  bool started_ = false;                                         ///< ticked once
  core::nanos next_ = 0;                                         ///< the next tick's instant
  core::nanos catch_up_ = 0;                                     ///< see advance
  timeline timeline_;
};

}  // namespace tollgate::sim
