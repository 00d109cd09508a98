#pragma once
/// Client addresses reduced to one key per address level.

#include <cstdint>
#include <string>

#include "gateway/core/address.hpp"
#include "gateway/limit/levels.hpp"

namespace tollgate::limit {

using core::address;
using core::family;

using core::level_prefixes;

/// The keys of one address: the finer level first (individual or subnet), then the coarser.
struct address_keys {
  level fine;                ///< ipv4_individual or ipv6_subnet
  level coarse;              ///< ipv4_network or ipv6_provider
  std::uint64_t fine_key;    ///< the address masked to the fine prefix
  std::uint64_t coarse_key;  ///< the address masked to the coarse prefix
};

/// Reduces `a` to its two level keys under `prefixes`.
address_keys keys_of(const address& a, const level_prefixes& prefixes) noexcept;

/// The prefix length configured for an address level.
std::uint8_t prefix_of(level l, const level_prefixes& prefixes) noexcept;

/// Text of a level key as a CIDR, e.g. "192.0.2.0/24" or "2001:db8::/48" (for logs and admin).
std::string key_to_string(level l, std::uint64_t key, const level_prefixes& prefixes);

}  // namespace tollgate::limit
