#include "gateway/core/address.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace tollgate::core {

namespace {

std::uint64_t load_be64(const unsigned char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v = (v << 8) | p[i];
  return v;
}

void store_be64(unsigned char* p, std::uint64_t v) noexcept {
  for (int i = 7; i >= 0; --i) {
    p[i] = static_cast<unsigned char>(v);
    v >>= 8;
  }
}

std::string v6_text(std::uint64_t high, std::uint64_t low) {
  unsigned char bytes[16];
  store_be64(bytes, high);
  store_be64(bytes + 8, low);
  char buf[INET6_ADDRSTRLEN];
  // inet_ntop writes RFC 5952 text (lower case, longest zero run compressed).
  if (inet_ntop(AF_INET6, bytes, buf, sizeof buf) == nullptr) return "::";
  return buf;
}

std::string v4_text(std::uint32_t bits) {
  const std::uint32_t be = htonl(bits);
  char buf[INET_ADDRSTRLEN];
  if (inet_ntop(AF_INET, &be, buf, sizeof buf) == nullptr) return "0.0.0.0";
  return buf;
}

}  // namespace

std::optional<address> address::parse(std::string_view text) noexcept {
  // The longest valid text is an IPv6 address with an embedded IPv4 tail (45 characters).
  char buf[INET6_ADDRSTRLEN];
  if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
  // A NUL inside would end the C string early and let trailing junk pass unseen.
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  // inet_pton is strict: dotted quad only for IPv4 (no octal, hex or short forms); no zones.
  if (text.find(':') == std::string_view::npos) {
    in_addr v4{};
    if (inet_pton(AF_INET, buf, &v4) != 1) return std::nullopt;
    return from_v4(ntohl(v4.s_addr));
  }
  unsigned char v6[16];
  if (inet_pton(AF_INET6, buf, v6) != 1) return std::nullopt;
  return from_v6(v6);
}

address address::from_v4(std::uint32_t bits) noexcept {
  address a;
  a.family_ = core::family::v4;
  a.low_ = bits;
  return a;
}

address address::from_v6(const unsigned char (&bytes)[16]) noexcept {
  return from_v6(load_be64(bytes), load_be64(bytes + 8));
}

address address::from_v6(std::uint64_t high, std::uint64_t low) noexcept {
  if (high == 0 && (low >> 32) == 0xffff) return from_v4(static_cast<std::uint32_t>(low));
  address a;
  a.family_ = core::family::v6;
  a.high_ = high;
  a.low_ = low;
  return a;
}

std::string address::to_string() const {
  return family_ == core::family::v4 ? v4_text(v4()) : v6_text(high_, low_);
}

std::optional<cidr> cidr::parse(std::string_view text) noexcept {
  const auto slash = text.find('/');
  const std::string_view address_text = text.substr(0, slash);
  const auto a = address::parse(address_text);
  if (!a) return std::nullopt;
  const bool v4 = a->family() == family::v4;
  unsigned prefix = v4 ? 32 : 128;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    prefix = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      prefix = prefix * 10 + static_cast<unsigned>(c - '0');
    }
    // ::ffff:10.0.0.0/104 is the IPv4 block 10.0.0.0/8.
    if (v4 && address_text.find(':') != std::string_view::npos) {
      if (prefix < 96) return std::nullopt;
      prefix -= 96;
    }
    if (prefix > (v4 ? 32u : 128u)) return std::nullopt;
  }
  cidr c;
  c.network_ = *a;
  c.prefix_ = static_cast<std::uint8_t>(prefix);
  // Host bits below the prefix (10.1.2.3/8) are almost always a typo: refuse them.
  if (!(c.masked(*a) == *a)) return std::nullopt;
  return c;
}

address cidr::masked(const address& a) const noexcept {
  if (a.family() == family::v4) return address::from_v4(a.v4() & mask32(prefix_));
  if (prefix_ <= 64) return address::from_v6(a.v6_high() & mask64(prefix_), 0);
  return address::from_v6(a.v6_high(), a.v6_low() & mask64(prefix_ - 64u));
}

bool cidr::contains(const address& a) const noexcept {
  return a.family() == network_.family() && masked(a) == network_;
}

std::string cidr::to_string() const {
  return network_.to_string() + "/" + std::to_string(prefix_);
}

}  // namespace tollgate::core
