#pragma once
/// The names of limit levels and tiers: vocabulary shared by config, limiter, headers, metrics.

#include <cstdint>
#include <optional>
#include <string_view>

namespace tollgate::core {

/// Where a limit's key comes from. The four address levels first, in the order used to break
/// ties between binding limits (individual/subnet before network/provider), then keyed extras.
enum class level : std::uint8_t {
  ipv4_individual,  ///< IPv4 address masked to its individual prefix (default /32)
  ipv4_network,     ///< IPv4 address masked to its network prefix (default /24)
  ipv6_subnet,      ///< IPv6 address masked to its subnet prefix (default /64)
  ipv6_provider,    ///< IPv6 address masked to its provider prefix (default /48)
  global,           ///< one key for every client of a category
  identity,         ///< a key taken from a request header, hashed
};

/// Number of `level` values.
inline constexpr std::size_t level_count = 6;
/// Number of address levels (the first four `level` values).
inline constexpr std::size_t address_level_count = 4;

/// The two tiers every limit key carries.
enum class tier : std::uint8_t {
  short_term = 0,  ///< a per-second style rate with a small burst ("short")
  long_term = 1,   ///< a per-hour style rate with a large burst ("long")
};

/// Configuration and header name of a level, e.g. "ipv4_network".
constexpr std::string_view level_name(level l) noexcept {
  constexpr std::string_view names[level_count] = {"ipv4_individual", "ipv4_network", "ipv6_subnet",
                                                   "ipv6_provider",   "global",       "identity"};
  return names[static_cast<std::size_t>(l)];
}

/// The level called `name`, if any.
constexpr std::optional<level> level_from_name(std::string_view name) noexcept {
  for (std::size_t i = 0; i < level_count; ++i) {
    if (level_name(static_cast<level>(i)) == name) return static_cast<level>(i);
  }
  return std::nullopt;
}

/// Configuration and header name of a tier: "short" or "long".
constexpr std::string_view tier_name(tier t) noexcept {
  return t == tier::short_term ? "short" : "long";
}

}  // namespace tollgate::core
