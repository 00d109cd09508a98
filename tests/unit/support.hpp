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

/// An address limit of level `lvl` with both tiers (burst 0 leaves a tier out), its state
/// named by `scope`.
inline limit::limit_spec group(limit::gcra_params short_tier, limit::gcra_params long_tier,
                               std::uint32_t scope,
                               limit::level lvl = limit::level::ipv4_individual) {
  limit::limit_spec g;
  g.name = std::string(limit::level_name(lvl));
  g.address_level = lvl;
  g.tiers = {short_tier, long_tier};
  g.scope = scope;
  return g;
}

/// A limit on another key source (`global`, `header`, ...), named `name`.
inline limit::limit_spec keyed(const std::string& name, limit::key_source source,
                               limit::gcra_params short_tier, std::uint32_t scope,
                               bool shadow = false) {
  limit::limit_spec g;
  g.name = name;
  g.source = source;
  g.tiers = {short_tier, {}};
  g.scope = scope;
  g.shadow = shadow;
  return g;
}

/// An IPv4 request with individual and network groups.
inline limit::limit_request ipv4_request(const std::string& addr, const limit::limit_spec* fine,
                                         const limit::limit_spec* coarse, nanos now,
                                         std::uint32_t cost = 1) {
  const auto a = limit::address::parse(addr).value();
  const auto k = limit::keys_of(a, {});
  limit::limit_request r;
  r.now = now;
  r.cost = cost;
  r.network = k.coarse_key;
  r.network_bits = 24;
  if (fine != nullptr) r.groups[r.group_count++] = {fine, k.fine_key};
  if (coarse != nullptr) r.groups[r.group_count++] = {coarse, k.coarse_key};
  return r;
}

}  // namespace tollgate::test
