#pragma once
/// What the limiter is asked (a request's set of limits) and what it answers.

#include <array>
#include <cstdint>

#include "gateway/limit/gcra.hpp"
#include "gateway/limit/spec.hpp"

namespace tollgate::limit {

/// One key of a request and the limit on it. No default member values: requests are built
/// per request, and only the first `group_count` groups are ever read.
struct limit_group {
  const limit_spec* spec;  ///< the limit (owned by the configuration snapshot)
  std::uint64_t key;       ///< address prefix, hashed key value, or 0 (global)
};

/// Most limits on keys other than the address, per category (validated at load).
using core::max_keyed_limits;
/// Most limits one request carries: an address's two levels and the others.
inline constexpr std::size_t max_groups = 2 + max_keyed_limits;
/// Most single tiers one request carries.
inline constexpr std::size_t max_limits = max_groups * 2;

/// A request's whole set of limits, in binding tie-break order: the fine address level, the
/// coarse one, then the others in configuration order; within each, short before long.
struct limit_request {
  std::array<limit_group, max_groups> groups;  ///< the first `group_count` are used
  std::uint8_t group_count = 0;                ///< how many groups
  std::uint32_t cost = 1;                      ///< 1..burst of every limit
  nanos now = 0;                               ///< the instant of the request
  std::uint32_t home = 0;  ///< the slice of a global limit tried first: the worker's index
  /// The client's coarse network (its address masked to the network or provider prefix):
  /// the Redis hash tag of its address keys (docs/design.md §11).
  std::uint64_t network = 0;
  std::uint8_t network_bits = 0;  ///< that prefix's length
  bool v6 = false;                ///< an IPv6 client
  /// The consumer tier whose scaled limits `groups` point at (docs/design.md §15); 0xff: none.
  std::uint8_t consumer_tier = 0xff;
  /// Its concurrency limits (docs/design.md §15) and keys: not decided by the store, but by
  /// the places in flight the caller takes. Only the first `inflight_count` are used.
  std::array<limit_group, max_keyed_limits> inflight;
  std::uint8_t inflight_count = 0;  ///< how many
  /// Some group's limit is an override's (docs/design.md §15), not the category's.
  bool overridden = false;
  /// Bit g: group g's on_excess is not applied to this request (its worker holds max_delayed
  /// requests under that limit already), so a wait there refuses it (docs/design.md §16).
  std::uint16_t no_delay = 0;
};

/// The delay group `g` of `req` may be held for (0: none).
inline nanos delay_of(const limit_request& req, std::uint8_t g) noexcept {
  return (req.no_delay >> g & 1) != 0 ? 0 : req.groups[g].spec->delay;
}

/// One tier's result within a decision. No default member values (see limit_group). A tier
/// that admitted has no wait, even when it holds the request (decision::hold tells that).
/// A quota has one outcome, told in the same fields: `tat` is the end of its window (when it
/// is whole again), `wait` the time until then when it rejected, `used` the cost spent in the
/// window (committed: with this request's; otherwise as stored), and `tier` short_term.
struct limit_outcome {
  nanos tat;           ///< committed: the new tat; otherwise the stored tat (quota: window end)
  nanos wait;          ///< > 0 when this tier rejected the request
  std::uint8_t group;  ///< index into limit_request::groups
  limit::tier tier;    ///< which tier of that group
  std::uint32_t used;  ///< a quota's spent cost; 0 for a GCRA tier
};
static_assert(sizeof(limit_outcome) == 24);

/// Requests of cost 1 that `o` (an outcome of `spec`) would still let through at `now`.
inline std::int64_t remaining_of(const limit_spec& spec, const limit_outcome& o,
                                 nanos now) noexcept {
  if (spec.is_quota()) return o.used >= spec.quota.limit ? 0 : spec.quota.limit - o.used;
  return gcra_remaining(o.tat, now, spec.tiers[static_cast<int>(o.tier)]);
}

/// No binding limit (every limit of the request is shadowed, or it has none).
inline constexpr std::uint8_t no_binding = 0xff;

/// The answer: admitted or not, and every tier's outcome for the response headers.
/// Limits in shadow mode (docs/design.md §12) never decide `admitted`: when only they reject,
/// the request is admitted with `shadow_limited`, and their state is not committed.
struct decision {
  bool admitted = false;              ///< every enforced limit allowed; those were committed
  bool shadow_limited = false;        ///< admitted, but a shadowed limit would have rejected it
  std::uint8_t count = 0;             ///< used entries of `limits`
  std::uint8_t binding = no_binding;  ///< the binding enforced tier (docs/design.md §4)
  std::uint8_t shadow_binding = no_binding;  ///< the rejecting shadowed tier with longest wait
  /// Admitted: how long the caller holds the request before it goes on, the longest wait of its
  /// enforced tiers within their limits' delay (docs/design.md §16); 0: at once.
  nanos hold = 0;
  /// Bit g: group g's limit is one that holds it (a wait > 0 within its delay).
  std::uint16_t held = 0;
  std::array<limit_outcome, max_limits> limits;  ///< in request order
};

/// Picks the binding tiers of `d` for `req`: among enforced limits, when rejected the
/// rejecting tier with the longest wait, when admitted the one with the fewest remaining,
/// ties to the first; among shadowed ones, the rejecting tier with the longest wait.
void choose_binding(const limit_request& req, decision& d) noexcept;

}  // namespace tollgate::limit
