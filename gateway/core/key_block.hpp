#pragma once
/// An address block in the space of address-level keys, which is where the limiter's tables,
/// the violation counters and the bans keep their clients: an IPv4 key is the 32 address bits,
/// an IPv6 key the first 64 (limit::keys_of). What an operator names in the admin API (an
/// address, or a network in CIDR notation) becomes one of these.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/core/address.hpp"
#include "gateway/core/levels.hpp"

namespace tollgate::core {

/// Whether address level `l` keys IPv4 addresses.
constexpr bool is_v4(level l) noexcept {
  return l == level::ipv4_individual || l == level::ipv4_network;
}

/// A block of level keys: `net` with its low bits below `prefix` clear.
/// Thread safety: a value type.
struct key_block {
  core::family family = core::family::v4;  ///< v4: 32-bit keys; v6: the first 64 bits
  std::uint64_t net = 0;                   ///< the block's first key
  std::uint8_t prefix = 0;                 ///< 0..32 (v4) or 0..64 (v6)

  /// Parses what an operator names: a bare address (the block of its individual level, /32
  /// or the IPv6 subnet, e.g. /64) or `address/prefix` with no host bits set, no narrower
  /// than the individual level (the gateway keeps nothing finer). On failure `error` says why.
  static std::optional<key_block> parse(std::string_view text, const level_prefixes& p,
                                        std::string& error);

  /// Whether a key of `key_family` masked to `key_prefix` bits shares an address with this
  /// block (one lies inside the other).
  bool overlaps(core::family key_family, std::uint64_t key, unsigned key_prefix) const noexcept;
  /// Whether the key of level `l` (masked to that level's prefix `key_prefix`) overlaps.
  bool overlaps(level l, std::uint64_t key, unsigned key_prefix) const noexcept {
    return overlaps(is_v4(l) ? core::family::v4 : core::family::v6, key, key_prefix);
  }
  /// Whether an individual key of `key_family` (a full individual-level key, at least as
  /// narrow as this block) lies inside it.
  bool contains(core::family key_family, std::uint64_t key) const noexcept {
    return key_family == family && (key & mask(prefix)) == net;
  }

  /// The block as text: "198.51.100.0/24", "2001:db8::/48".
  std::string to_string() const;

  /// The mask of the top `bits` bits of this block's family's keys.
  std::uint64_t mask(unsigned bits) const noexcept {
    return family == core::family::v4 ? core::mask32(bits) : core::mask64(bits);
  }

  friend bool operator==(const key_block&, const key_block&) = default;
};

}  // namespace tollgate::core
