#pragma once
/// One complete, immutable configuration as the request path uses it. A reload builds a new
/// snapshot off the hot path and swaps it in whole.

#include <memory>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/net/asio.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/policy/router.hpp"

namespace tollgate::net {

/// The gateway configuration, compiled.
/// Thread safety: immutable; shared by every worker.
struct snapshot {
  config::gateway_config config;                               ///< as loaded
  policy::compiled_policy policy;                              ///< limits per category
  policy::router router;                                       ///< routes
  std::vector<std::vector<tcp::endpoint>> upstream_endpoints;  ///< per upstream, resolved

  /// Compiles `c`; resolves every upstream endpoint now (throws config::error when a name
  /// does not resolve).
  snapshot(config::gateway_config c, limit::scope_registry& scopes, core::siphash_key key);
};

}  // namespace tollgate::net
