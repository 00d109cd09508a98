#pragma once
/// IP addresses and CIDR blocks: the client identity every limit, violation and ban is keyed on.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tollgate::core {

/// The top `bits` of 64 set (0 for bits == 0).
constexpr std::uint64_t mask64(unsigned bits) noexcept {
  return bits == 0 ? 0 : ~std::uint64_t{0} << (64 - bits);
}

/// The top `bits` of 32 set (0 for bits == 0).
constexpr std::uint32_t mask32(unsigned bits) noexcept {
  return bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
}

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
  core::family family() const noexcept { return family_; }
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
  core::family family_ = core::family::v4;  ///< v4 or v6
  std::uint64_t high_ = 0;                  ///< IPv6 high half; 0 for IPv4
  std::uint64_t low_ = 0;                   ///< IPv6 low half, or the IPv4 bits
};

/// An address block such as `10.0.0.0/8` or `2001:db8::/32`.
/// Thread safety: a value type.
class cidr {
 public:
  /// Parses `address/prefix`, or a bare address (a block of one); nullopt when malformed,
  /// when the prefix is out of range, or when host bits are set below the prefix.
  static std::optional<cidr> parse(std::string_view text) noexcept;
  /// Whether `a` lies inside this block (IPv4-mapped addresses match IPv4 blocks).
  bool contains(const address& a) const noexcept;
  /// The block as text, e.g. "10.0.0.0/8".
  std::string to_string() const;
  /// Its prefix length.
  std::uint8_t prefix() const noexcept { return prefix_; }
  friend bool operator==(const cidr&, const cidr&) = default;

 private:
  /// `a` with the bits below the prefix cleared.
  address masked(const address& a) const noexcept;

  address network_;          ///< the first address of the block
  std::uint8_t prefix_ = 0;  ///< 0..32 or 0..128
};

/// Whether `a` lies in one of `blocks` (trusted proxies, access lists: short, scanned in order).
inline bool in_any(std::span<const cidr> blocks, const address& a) noexcept {
  return std::any_of(blocks.begin(), blocks.end(), [&](const cidr& c) { return c.contains(a); });
}

}  // namespace tollgate::core
