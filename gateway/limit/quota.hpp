#pragma once
/// Calendar quotas (docs/design.md §3, "Quotas"): a count of cost spent in a window fixed to
/// the UTC calendar. Like gcra.hpp, a pure function of the stored state and `now`.

#include <cstdint>

#include "gateway/core/calendar.hpp"
#include "gateway/limit/spec.hpp"

namespace tollgate::limit {

/// The outcome of one quota for one request.
struct quota_result {
  bool allowed;        ///< whether the quota admits the request
  std::uint32_t used;  ///< allowed: the count to store; rejected: the stored count
  nanos end;           ///< the end of the window the count belongs to
  nanos wait;          ///< rejected: time until that window ends; allowed: 0
};

/// Evaluates a request of `cost` against a stored count `used` of the window ending at `end`
/// (nothing stored: 0 and 0) at `now`. A window that has ended counts nothing. A stored window
/// that ends later than `now`'s is kept, count and all: under Redis a replica whose clock runs
/// ahead may open the next window first, and the others join it rather than go back (docs/
/// design.md §11). Precondition: 1 <= cost <= q.limit (validated at load).
constexpr quota_result quota_check(std::uint64_t used, nanos end, nanos now, std::uint32_t cost,
                                   const quota_params& q) noexcept {
  const core::calendar_window w = core::window_of(q.period, now);
  if (end < w.end) {
    used = 0;
    end = w.end;
  }
  if (used + cost > q.limit) {
    // The stored count may exceed a limit a reload lowered: tell it as spent, no more.
    const auto told = static_cast<std::uint32_t>(used < q.limit ? used : q.limit);
    return {false, told, end, end - now};
  }
  return {true, static_cast<std::uint32_t>(used + cost), end, 0};
}

}  // namespace tollgate::limit
