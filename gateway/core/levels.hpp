#pragma once
/// The names of address levels and tiers: vocabulary shared by config, limiter, headers, metrics.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tollgate::core {

/// The four address levels (docs/design.md §3), in the order used to break ties between binding
/// limits (individual/subnet before network/provider). Limits keyed on anything else are data (see
/// limit::limit_spec), not levels.
enum class level : std::uint8_t {
  ipv4_individual,  ///< IPv4 address masked to its individual prefix (default /32)
  ipv4_network,     ///< IPv4 address masked to its network prefix (default /24)
  ipv6_subnet,      ///< IPv6 address masked to its subnet prefix (default /64)
  ipv6_provider,    ///< IPv6 address masked to its provider prefix (default /48)
};

/// Number of address levels.
inline constexpr std::size_t level_count = 4;
/// The same, under the name older code uses.
inline constexpr std::size_t address_level_count = level_count;

/// Where a limit's key comes from (docs/design.md §3, "keys as data"): read from configuration,
/// used by the limiter.
enum class key_source : std::uint8_t {
  address,     ///< the client address masked to an address level's prefix
  header,      ///< a request header's value, hashed
  query,       ///< a query parameter's value (percent-decoded), hashed
  cookie,      ///< a cookie's value, hashed
  bearer,      ///< the token of `Authorization: Bearer`, hashed
  global,      ///< one key for every request of the category
  claim,       ///< a claim of the request's verified token (docs/design.md §15), hashed
  individual,  ///< the client's individual address level (/32 or /64), whichever its family
  network,     ///< the client's network address level (/24 or /48), whichever its family
  composite,   ///< several of the above together: one key per combination
  /// A fact of the client's verified TLS certificate (docs/design.md §17), hashed.
  client_cert,
};

/// Configuration name of a key source ("header", "global", ...).
constexpr std::string_view source_name(key_source s) noexcept {
  constexpr std::string_view names[] = {"address", "header",    "query",      "cookie",
                                        "bearer",  "global",    "claim",      "individual",
                                        "network", "composite", "client_cert"};
  return names[static_cast<std::size_t>(s)];
}

/// Prefix lengths of the four address levels (docs/design.md §3 defaults): what a policy file's
/// `levels` sets and what the limiter and the PoW tables key addresses by.
struct level_prefixes {
  std::uint8_t ipv4_individual = 32;  ///< 1..32
  std::uint8_t ipv4_network = 24;     ///< 1..32, at most ipv4_individual
  std::uint8_t ipv6_subnet = 64;      ///< 1..64
  std::uint8_t ipv6_provider = 48;    ///< 1..64, at most ipv6_subnet
  friend bool operator==(const level_prefixes&, const level_prefixes&) = default;
};

/// Largest burst (and cost) a limit may have; keeps every GCRA product in int64 range.
inline constexpr std::uint32_t max_burst = 1'000'000;
/// Most limits per category not keyed on the address.
inline constexpr std::size_t max_keyed_limits = 6;

/// The two tiers every limit carries.
enum class tier : std::uint8_t {
  short_term = 0,  ///< a per-second style rate with a small burst ("short")
  long_term = 1,   ///< a per-hour style rate with a large burst ("long")
};

/// Configuration and header name of a level, e.g. "ipv4_network".
constexpr std::string_view level_name(level l) noexcept {
  constexpr std::string_view names[level_count] = {"ipv4_individual", "ipv4_network", "ipv6_subnet",
                                                   "ipv6_provider"};
  return names[static_cast<std::size_t>(l)];
}

/// The address level called `name`, if any.
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

/// Which address key a limit keyed on the address takes.
enum class address_part : std::uint8_t {
  level,       ///< the limit's own address level (a limit named after the level)
  individual,  ///< `key: individual`: the fine level of the client's family (ipv4_individual or
               ///< ipv6_subnet)
  network,     ///< `key: network`: the coarse level (ipv4_network or ipv6_provider)
};

}  // namespace tollgate::core
