#pragma once
// Helpers shared by the unit tests: limit sets built by hand, without a policy file.

#include <string>

#include "gateway/core/clock.hpp"
#include "gateway/limit/address.hpp"
#include "gateway/limit/request.hpp"

namespace tollgate::test {

using core::nanos;
constexpr nanos ms = core::ns_per_ms;
constexpr nanos sec = core::ns_per_s;

/// Params for `count` per `period` with `burst`.
inline limit::gcra_params params(std::int64_t count, nanos period, std::uint32_t burst) {
  return limit::make_params(core::rate{count, period}, burst);
}

/// Both tiers of a group; burst 0 leaves a tier out.
inline limit::group_params group(limit::gcra_params short_tier, limit::gcra_params long_tier,
                                 std::uint32_t scope) {
  limit::group_params g;
  g.tiers = {short_tier, long_tier};
  g.scope = scope;
  return g;
}

/// An IPv4 request with individual and network groups.
inline limit::limit_request ipv4_request(const std::string& addr, const limit::group_params* fine,
                                         const limit::group_params* coarse, nanos now,
                                         std::uint32_t cost = 1) {
  const auto a = limit::address::parse(addr).value();
  const auto k = limit::keys_of(a, {});
  limit::limit_request r;
  r.now = now;
  r.cost = cost;
  if (fine != nullptr) r.groups[r.group_count++] = {k.fine, k.fine_key, fine};
  if (coarse != nullptr) r.groups[r.group_count++] = {k.coarse, k.coarse_key, coarse};
  return r;
}

}  // namespace tollgate::test
