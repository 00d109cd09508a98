#pragma once
/// Policy limits compiled for the request path: per category, the GCRA constants of every
/// level with stable scope ids, and the RateLimit-Policy field of each address family.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/config/policy.hpp"
#include "gateway/core/siphash.hpp"
#include "gateway/limit/address.hpp"
#include "gateway/limit/request.hpp"
#include "gateway/limit/scope_registry.hpp"
#include "gateway/policy/pow_gate.hpp"

namespace tollgate::policy {

/// One category's limits, immutable once compiled.
struct category_limits {
  std::string name;                                                           ///< category name
  std::uint32_t cost = 1;                                                     ///< per request
  std::array<std::optional<limit::group_params>, limit::level_count> groups;  ///< by level
  std::string identity_header;              ///< identity level's header
  std::array<std::string, 2> policy_field;  ///< RateLimit-Policy for IPv4 [0] and IPv6 [1]
  category_pow pow;                         ///< proof of work, status violations
};

/// Every category of a policy, compiled.
/// Thread safety: immutable after construction; shared by all workers through a snapshot.
class compiled_policy {
 public:
  /// Compiles `policy`, taking scope ids from `scopes` (which outlives every snapshot) and
  /// hashing identity values under `identity_key`.
  compiled_policy(const config::policy_config& policy, limit::scope_registry& scopes,
                  core::siphash_key identity_key);

  /// The category called `name`, or nullptr.
  const category_limits* find(std::string_view name) const noexcept;
  /// All categories in policy order.
  const std::vector<category_limits>& categories() const noexcept { return categories_; }
  /// The violation reasons.
  const violation_rules& violations() const noexcept { return violations_; }
  /// The configured address level prefixes.
  const limit::level_prefixes& prefixes() const noexcept { return prefixes_; }

  /// The limit set of one request of category `c` from `client` at `now`; `identity` is the
  /// value of the category's identity header (empty: absent, the identity limit is skipped).
  limit::limit_request request(const category_limits& c, const limit::address& client,
                               std::string_view identity, core::nanos now) const noexcept;

 private:
  std::vector<category_limits> categories_;  ///< in policy order
  limit::level_prefixes prefixes_;           ///< address level prefixes
  violation_rules violations_;               ///< reasons by index
  core::siphash_key identity_key_;           ///< keys identity hashing
};

}  // namespace tollgate::policy
