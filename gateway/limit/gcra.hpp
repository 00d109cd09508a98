#pragma once
/// The generic cell rate algorithm in the governor formulation (docs/design.md §3): the whole state
/// of one limit is one theoretical arrival time (`tat`), and every function takes `now`.

#include <algorithm>
#include <cstdint>

#include "gateway/core/clock.hpp"
#include "gateway/core/levels.hpp"
#include "gateway/core/units.hpp"

namespace tollgate::limit {

using core::nanos;

using core::max_burst;

/// The derived constants of one limit.
struct gcra_params {
  nanos emission = 0;       ///< T = period / rate: the spacing of requests at the steady rate
  nanos tolerance = 0;      ///< tau = T * (burst - 1)
  std::uint32_t burst = 0;  ///< requests admitted at once from a fresh state; 0: no such limit
  friend bool operator==(const gcra_params&, const gcra_params&) = default;
};

/// Constants for `r` with `burst` (1..max_burst); T is at least one nanosecond.
constexpr gcra_params make_params(core::rate r, std::uint32_t burst) noexcept {
  const nanos t = std::max<nanos>(1, r.period / r.count);
  return {t, t * static_cast<nanos>(burst - 1), burst};
}

/// The outcome of one limit for one request.
struct gcra_result {
  bool allowed;  ///< whether this limit admits the request (at once, or after `wait`)
  nanos tat;     ///< allowed: the new tat; rejected: the stored tat (nothing is committed)
  /// Rejected: time until the request would be admitted at once. Allowed: 0, or within a
  /// `delay` the time the request is held before it passes (docs/design.md §16 "Delay
  /// instead of reject").
  nanos wait;
};

/// Evaluates a request of `cost` against stored `tat` at `now`. An absent or idle entry is
/// passed as any `tat <= now`. Precondition: 1 <= cost <= burst (validated at load).
///
/// With a `delay` (on_excess), a request that would pass within it is admitted now and told its
/// wait: holding it that long and then committing would store the same tat as committing now,
/// max(tat, now) + cost * T, so the caller commits at once and holds the request afterwards.
constexpr gcra_result gcra_check(nanos tat, nanos now, std::uint32_t cost, const gcra_params& p,
                                 nanos delay = 0) noexcept {
  // An idle entry (tat in the past) is the same as an absent one (tat = now). The upper clamp
  // never binds under fixed constants (tat' <= now + tau + T + delay); it only bounds state
  // carried over from a reload that lowered the limit to "empty bucket" under the new
  // constants. It is wider by the delay: held requests' debt lies beyond tau + T, and a
  // narrower clamp would forgive it to the next request.
  tat = std::clamp(tat, now, now + p.tolerance + p.emission + delay);
  const nanos allow_at = tat + static_cast<nanos>(cost - 1) * p.emission - p.tolerance;
  if (now + delay < allow_at) return {false, tat, allow_at - now};
  return {true, tat + static_cast<nanos>(cost) * p.emission, allow_at > now ? allow_at - now : 0};
}

/// Requests of cost 1 that would pass now given `tat` (the new tat of an admitted request, the
/// stored one of a rejected request), clamped to [0, burst].
constexpr std::int64_t gcra_remaining(nanos tat, nanos now, const gcra_params& p) noexcept {
  const nanos headroom = now + p.tolerance + p.emission - tat;
  if (headroom <= 0) return 0;
  return std::min<std::int64_t>(headroom / p.emission, p.burst);
}

/// Seconds for an empty bucket to refill completely (burst * T), rounded up: the `w` of
/// RateLimit-Policy.
constexpr std::int64_t gcra_window_seconds(const gcra_params& p) noexcept {
  return core::ceil_seconds(p.emission * static_cast<nanos>(p.burst));
}

}  // namespace tollgate::limit
