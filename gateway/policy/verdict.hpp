#pragma once
/// A limit decision turned into the values the client is told: the rate-limit header values of
/// docs/design.md §4, and for a rejection what the 429 says. No HTTP library types, no wire text.

#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/limit/request.hpp"
#include "gateway/policy/compiled_policy.hpp"

namespace tollgate::policy {

/// Header values of one checked response. Reused per connection: assigning into the strings
/// keeps their capacity, so steady traffic allocates nothing.
struct rate_limit_fields {
  bool present = false;            ///< false when no enforced limit applied to the request
  std::string limit;               ///< X-RateLimit-Limit
  std::string remaining;           ///< X-RateLimit-Remaining
  std::string reset;               ///< X-RateLimit-Reset
  std::string_view level;          ///< X-RateLimit-Level: the binding limit's name
  std::string_view tier;           ///< its tier: "short" or "long"; "quota" for a quota
  bool quota = false;              ///< the binding limit is a calendar quota
  std::string_view period;         ///< a quota's period: "day", "week" or "month"
  std::string_view policy;         ///< RateLimit-Policy (the compiled policy's, or `policy_text`)
  std::string policy_text;         ///< RateLimit-Policy of a request that lacks some limit's key
  std::string ratelimit;           ///< RateLimit
  std::string retry_after;         ///< Retry-After (rejections only)
  std::int64_t retry_seconds = 0;  ///< the same as a number
  std::string_view reason;         ///< X-RateLimit-Reason (rejections only)
  std::string shadow;              ///< X-Tollgate-Shadow to the upstream: "<limit>.<tier>", or ""
  std::string_view consumer_tier;  ///< the consumer tier whose numbers applied (§15), or ""
};

/// Fills `out` for decision `d` of request `req` in category `c` for a client of `fam`.
/// `scaled`: the scaled set (attack mode, docs/design.md §16) req's limits point at, if any.
void describe(const limit::limit_request& req, const limit::decision& d, const category_limits& c,
              core::family fam, rate_limit_fields& out, const scaled_set* scaled = nullptr);

}  // namespace tollgate::policy
