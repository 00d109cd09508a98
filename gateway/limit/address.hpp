#pragma once
/// Client addresses and their reduction to one key per address level.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/limit/levels.hpp"

namespace tollgate::limit {

/// IPv4 or IPv6.
enum class family : std::uint8_t { v4, v6 };

/// An IPv4 or IPv6 address. IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`) are stored as IPv4,
/// so they count against the same IPv4 limits as the plain address.
/// Thread safety: a value type.
class address {
 public:
  /// 0.0.0.0.
  address() = default;
  /// Parses dotted-quad IPv4 or RFC 4291 IPv6 text (no brackets, port or zone);
  /// nullopt when the text is anything else.
  static std::optional<address> parse(std::string_view text) noexcept;
  /// The IPv4 address whose 32 bits, most significant first, are `bits`.
  static address from_v4(std::uint32_t bits) noexcept;
  /// The IPv6 address of 16 network-order bytes; IPv4-mapped becomes IPv4.
  static address from_v6(const unsigned char (&bytes)[16]) noexcept;
  /// The IPv6 address with high and low 64-bit halves; IPv4-mapped becomes IPv4.
  static address from_v6(std::uint64_t high, std::uint64_t low) noexcept;

  /// The address family after IPv4-mapped normalisation.
  limit::family family() const noexcept { return family_; }
  /// The IPv4 bits (valid for family v4).
  std::uint32_t v4() const noexcept { return static_cast<std::uint32_t>(low_); }
  /// The first 64 bits of an IPv6 address (valid for family v6).
  std::uint64_t v6_high() const noexcept { return high_; }
  /// The last 64 bits of an IPv6 address (valid for family v6).
  std::uint64_t v6_low() const noexcept { return low_; }

  /// Canonical text: dotted quad, or RFC 5952 IPv6.
  std::string to_string() const;

  friend bool operator==(const address&, const address&) = default;

 private:
  limit::family family_ = limit::family::v4;  ///< v4 or v6
  std::uint64_t high_ = 0;                    ///< IPv6 high half; 0 for IPv4
  std::uint64_t low_ = 0;                     ///< IPv6 low half, or the IPv4 bits
};

/// Prefix lengths of the four address levels (DESIGN §3 defaults).
struct level_prefixes {
  std::uint8_t ipv4_individual = 32;  ///< 1..32
  std::uint8_t ipv4_network = 24;     ///< 1..32
  std::uint8_t ipv6_subnet = 64;      ///< 1..64
  std::uint8_t ipv6_provider = 48;    ///< 1..64
  friend bool operator==(const level_prefixes&, const level_prefixes&) = default;
};

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
