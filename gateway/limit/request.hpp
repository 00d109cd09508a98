#pragma once
/// What the limiter is asked (a request's set of limits) and what it answers.

#include <array>
#include <cstdint>

#include "gateway/limit/gcra.hpp"
#include "gateway/limit/levels.hpp"

namespace tollgate::limit {

/// The two tiers of one keyed limit; a tier with burst 0 is not configured.
struct group_params {
  std::array<gcra_params, 2> tiers;  ///< indexed by `tier`
  std::uint32_t scope = 0;           ///< stable id of (category, level, prefix); never 0
};

/// One key of a request and the limits on it. No default member values: requests are built
/// per request, and only the first `group_count` groups are ever read.
struct limit_group {
  level lvl;                   ///< names the limit in headers and picks the table
  std::uint64_t key;           ///< address prefix, hashed identity, or 0 (global)
  const group_params* params;  ///< owned by the configuration snapshot
};

/// Most keys one request carries: an address's two levels plus global and identity limits.
inline constexpr std::size_t max_groups = 4;
/// Most single limits one request carries (two tiers per key).
inline constexpr std::size_t max_limits = max_groups * 2;

/// A request's whole set of limits, in binding tie-break order: the fine address level, the
/// coarse one, then keyed extras; within each, short before long.
struct limit_request {
  std::array<limit_group, max_groups> groups;  ///< the first `group_count` are used
  std::uint8_t group_count = 0;                ///< how many groups
  std::uint32_t cost = 1;                      ///< 1..burst of every limit
  nanos now = 0;                               ///< the instant of the request
};

/// One limit's result within a decision. No default member values (see limit_group).
struct limit_outcome {
  nanos tat;           ///< admitted: the committed tat; rejected: the stored tat
  nanos wait;          ///< > 0 when this limit rejected the request
  std::uint8_t group;  ///< index into limit_request::groups
  limit::tier tier;    ///< which tier of that group
};

/// The answer: admitted or not, and every limit's outcome for the response headers.
struct decision {
  bool admitted = false;                         ///< every limit allowed and all were committed
  std::uint8_t count = 0;                        ///< used entries of `limits`
  std::uint8_t binding = 0;                      ///< index of the binding limit (DESIGN §4)
  std::array<limit_outcome, max_limits> limits;  ///< in request order
};

/// Picks the binding limit of `d` for `req` and stores its index: rejected, the rejecting limit
/// with the longest wait; admitted, the one with the fewest remaining; ties to the first.
void choose_binding(const limit_request& req, decision& d) noexcept;

}  // namespace tollgate::limit
