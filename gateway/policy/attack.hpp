#pragma once
/// Attack mode (docs/design.md §16): per category, an exponentially weighted baseline of its
/// request rate, learnt outside attack mode and never below a floor; levels entered after the
/// rate stayed above their multiple of the baseline for `sustain`; a step down after
/// `cool_down` below the level in force, with the limits brought back in steps; levels forced
/// and released by an operator. The monitor is a state machine fed ticks (an instant and the
/// category's request count so far): the gateway ticks it each second from its control thread,
/// the simulator from the log's own times, so that both decide alike. Workers read its
/// outcome, one word per category, from an attack_board. Model: the EWMA load averages of
/// Linux's loadavg and Finagle's failure accrual, with hysteresis in both directions.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/config/policy.hpp"
#include "gateway/core/clock.hpp"

namespace tollgate::policy {

/// Levels by number: 0 normal, 1 elevated, 2 high, 3 severe.
inline constexpr std::size_t attack_levels = 4;
/// "normal", "elevated", "high", "severe": the header's, the metric's and the admin API's word.
inline constexpr std::array<std::string_view, attack_levels> attack_level_names = {
    "normal", "elevated", "high", "severe"};
/// The level called `name`, or nullopt.
std::optional<std::uint8_t> attack_level_of(std::string_view name) noexcept;

/// One level, compiled.
struct attack_level_rules {
  bool on = false;             ///< configured
  double above = 0;            ///< entered above this many times the baseline
  double limits = 1;           ///< the limits' factor while it holds (a level without one: the
                               ///< tightest of those below it)
  bool pow = false;            ///< clients without a clearance show a proof
  bool admit_only = false;     ///< only the admitted pass; others 503 under_attack
  bool admit_allowed = false;  ///< the access allow list is admitted
  bool admit_cleared = false;  ///< clients with a clearance are admitted
};

/// A category's attack mode, compiled.
struct attack_rules {
  core::nanos window = 0;     ///< the baseline's averaging time
  double floor = 0;           ///< requests per second the baseline never goes below
  core::nanos sustain = 0;    ///< above a level this long enters it
  core::nanos cool_down = 0;  ///< below the level in force this long steps down
  double restore = 0.25;      ///< share of the way the limits come back per restore step
  std::array<attack_level_rules, attack_levels> levels;  ///< [0]: normal (no effect)

  /// Compiled from `c`.
  static attack_rules compile(const config::attack_mode_config& c);
  /// The time between restore steps: cool_down x restore.
  core::nanos restore_step() const noexcept;
};

/// What a request of a category meets: its level and the factor of its limits.
struct attack_status {
  std::uint8_t level = 0;  ///< 0..3
  bool forced = false;     ///< set by an operator
  float factor = 1;        ///< the limits' factor now (restoring: between levels)
};

/// The attack status of every category of a configuration, one word each, written by the
/// monitor's thread and read by every worker per request (one relaxed load).
/// Thread safety: any thread.
class attack_board {
 public:
  /// One word per category (category_limits::index).
  explicit attack_board(std::size_t categories);
  attack_status get(std::size_t category) const noexcept;
  void set(std::size_t category, attack_status s) noexcept;
  std::size_t size() const noexcept { return size_; }

 private:
  std::unique_ptr<std::atomic<std::uint64_t>[]> words_;
  std::size_t size_;
};

/// One category's attack mode.
/// Thread safety: none; one thread feeds it (the gateway's control thread, or the simulator).
class attack_monitor {
 public:
  /// A change of level, and why.
  struct transition {
    std::uint8_t from = 0;
    std::uint8_t to = 0;
    std::string why;  ///< "rate 512/s is 10.2x the baseline 50/s for 30s", "forced", ...
  };

  /// A tick at `now` with the category's requests counted so far (`total`, which only grows).
  /// The first tick only starts the count. Returns the transition it made, if any.
  std::optional<transition> tick(core::nanos now, std::uint64_t total, const attack_rules& r);
  /// Forces `level` from `now` until `until` (0: until released).
  std::optional<transition> force(std::uint8_t level, core::nanos now, core::nanos until,
                                  const attack_rules& r);
  /// Back to automatic at `now`: the level the rate has kept up for `sustain`, else normal.
  std::optional<transition> release(core::nanos now, const attack_rules& r);

  /// What requests meet at `now`.
  attack_status status(core::nanos now, const attack_rules& r) const noexcept;
  std::uint8_t level() const noexcept { return level_; }
  /// The baseline (requests per second), never below the floor.
  double baseline(const attack_rules& r) const noexcept;
  /// The rate measured by the last tick (requests per second).
  double rate() const noexcept { return rate_; }
  bool forced() const noexcept { return forced_; }
  /// The end of a forced level; 0: until released.
  core::nanos forced_until() const noexcept { return forced_until_; }

 private:
  /// Moves to `to` at `now` (the limits tighten at once, and come back in steps).
  transition move(std::uint8_t to, core::nanos now, const attack_rules& r, std::string why);
  /// The highest level the rate has stayed above for `sustain` at `now`; 0: none.
  std::uint8_t sustained(core::nanos now, const attack_rules& r) const noexcept;

  bool started_ = false;
  core::nanos last_ = 0;     ///< the last tick
  std::uint64_t total_ = 0;  ///< the count at the last tick
  double rate_ = 0;          ///< requests per second between the last two ticks
  double average_ = 0;       ///< the learnt rate (the baseline before the floor)
  bool learnt_ = false;      ///< average_ holds a measure
  std::uint8_t level_ = 0;
  std::array<core::nanos, attack_levels> above_since_{};  ///< per level, 0: not above now
  core::nanos calm_since_ = 0;  ///< below the level in force since; 0: not below
  core::nanos entered_ = 0;     ///< when the level in force was entered
  float from_factor_ = 1;       ///< the factor when the level was left (restore starts there)
  bool forced_ = false;
  core::nanos forced_until_ = 0;
};

}  // namespace tollgate::policy
