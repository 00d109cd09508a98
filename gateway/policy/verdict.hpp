#pragma once
/// A limit decision turned into what the client is told: the rate-limit header values of
/// DESIGN §4 and, for a rejection, the 429 problem+json body. No HTTP library types.

#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/limit/request.hpp"
#include "gateway/policy/compiled_policy.hpp"

namespace tollgate::policy {

/// Header values of one checked response. Reused per connection: assigning into the strings
/// keeps their capacity, so steady traffic allocates nothing.
struct rate_limit_fields {
  bool present = false;     ///< false when the request carried no limits
  std::string limit;        ///< X-RateLimit-Limit
  std::string remaining;    ///< X-RateLimit-Remaining
  std::string reset;        ///< X-RateLimit-Reset
  std::string_view level;   ///< X-RateLimit-Level
  std::string_view policy;  ///< RateLimit-Policy (owned by the compiled policy)
  std::string ratelimit;    ///< RateLimit
  std::string retry_after;  ///< Retry-After (rejections only)
  std::string_view reason;  ///< X-RateLimit-Reason (rejections only)
  std::string body;         ///< the 429 problem+json body (rejections only)
};

/// Fills `out` for decision `d` of request `req` in category `c` for a client of `fam`.
void describe(const limit::limit_request& req, const limit::decision& d, const category_limits& c,
              core::family fam, rate_limit_fields& out);

}  // namespace tollgate::policy
