#pragma once
/// The penalty ladder (docs/design.md §16): points per client for what it does wrong (the
/// gateway's 429s, failed proofs, refused tokens, violations its upstreams report), decaying
/// lazily, and the step its score puts it on: warn, throttle, read only, proof of work, ban.
/// A timed step lasts its `for` once entered, however fast the points go. The table is bounded
/// like the violation counters (LRU), and costs nothing while no client has points.

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gateway/core/state_codec.hpp"
#include "gateway/pow/lru_map.hpp"

namespace tollgate::pow {

/// What a step does, in rising severity.
enum class penalty_action : std::uint8_t { none, warn, throttle, read_only, pow, ban };
inline constexpr std::size_t penalty_action_count = 6;

/// "none", "warn", "throttle", "read_only", "pow", "ban": the header's and the metric's word.
std::string_view penalty_action_name(penalty_action a) noexcept;

/// One step, compiled.
struct penalty_step {
  std::uint32_t at = 0;                          ///< the score that reaches it
  penalty_action action = penalty_action::warn;  ///< what it does
  double factor = 1;                             ///< throttle: the client's limits times this
  std::int64_t hold = 0;     ///< how long it lasts once entered (ns); 0: while the score holds
  std::uint8_t variant = 0;  ///< throttle: the index of `factor` in penalty_rules::factors
};

/// The ladder, compiled.
struct penalty_rules {
  std::vector<std::uint32_t> points;  ///< per violation reason (the policy's indices)
  std::uint32_t rate_limited = 0;     ///< per 429 of the gateway's own
  std::int64_t decay_interval = 0;    ///< ns for `decay_points` points to go
  std::uint32_t decay_points = 1;     ///< see decay_interval
  std::vector<penalty_step> steps;    ///< by ascending `at`
  std::vector<double> factors;        ///< the throttle steps' distinct factors

  /// The highest step a score of `score` reaches; -1: none.
  int step_for(std::uint32_t score) const noexcept;
};

/// A client's place on the ladder at one instant.
struct standing {
  std::uint32_t score = 0;  ///< its points now
  int step = -1;            ///< index of its step in penalty_rules::steps; -1: none
  std::int64_t until = 0;   ///< a timed step entered: when it ends (ns); 0: while the score holds

  /// Its step's action under `r`.
  penalty_action action(const penalty_rules& r) const noexcept {
    return step < 0 ? penalty_action::none : r.steps[static_cast<std::size_t>(step)].action;
  }
};

/// Every client's points and step.
/// Thread safety: every member function may be called from any thread.
class penalty_table {
 public:
  /// At most `capacity` clients.
  explicit penalty_table(std::size_t capacity) : map_(capacity) {}

  /// A change of standing.
  struct change {
    standing before;  ///< before the points
    standing after;   ///< after them
    /// Whether the points put the client on a higher step.
    bool entered() const noexcept { return after.step > before.step; }
  };
  /// Adds `points` to `who` at `now` under `r`. A step entered that is timed lasts its `for`
  /// from now.
  change add(const subject& who, std::uint32_t points, std::int64_t now, const penalty_rules& r);

  /// Where `who` stands at `now` under `r`.
  standing at(const subject& who, std::int64_t now, const penalty_rules& r) const;

  /// Forgets `who`: its score and step; whether there was anything.
  bool reset(const subject& who) { return map_.erase(who); }

  /// Clients per action at `now` under `r` (index: penalty_action), for metrics.
  std::array<std::size_t, penalty_action_count> census(std::int64_t now,
                                                       const penalty_rules& r) const;

  /// Writes every client's score and step (the state file, docs/design.md §18).
  void save(core::state_writer& w) const;
  /// Reads what save() wrote; false when it is malformed (what was read before stays).
  bool load(core::state_reader& r);

  /// Clients held.
  std::size_t size() const noexcept { return map_.size(); }
  /// The table: name, entries, capacity, evictions.
  template <class F>
  void for_each_table(F&& f) const {
    f("penalties", map_.size(), map_.capacity(), map_.evictions());
  }

 private:
  struct entry {
    std::uint32_t score = 0;      ///< points at `last`
    std::int64_t last = 0;        ///< when points last came (ns)
    std::int8_t held = -1;        ///< the timed step last entered; -1: none
    std::int64_t held_until = 0;  ///< when it ends (ns)
  };
  static standing standing_of(const entry& e, std::int64_t now, const penalty_rules& r) noexcept;
  lru_map<entry> map_;
};

}  // namespace tollgate::pow
