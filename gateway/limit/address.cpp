#include "gateway/limit/address.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace tollgate::limit {

namespace {

constexpr std::uint64_t mask64(unsigned bits) noexcept {
  return bits == 0 ? 0 : ~std::uint64_t{0} << (64 - bits);
}

constexpr std::uint32_t mask32(unsigned bits) noexcept {
  return bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
}

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
  a.family_ = limit::family::v4;
  a.low_ = bits;
  return a;
}

address address::from_v6(const unsigned char (&bytes)[16]) noexcept {
  return from_v6(load_be64(bytes), load_be64(bytes + 8));
}

address address::from_v6(std::uint64_t high, std::uint64_t low) noexcept {
  if (high == 0 && (low >> 32) == 0xffff) return from_v4(static_cast<std::uint32_t>(low));
  address a;
  a.family_ = limit::family::v6;
  a.high_ = high;
  a.low_ = low;
  return a;
}

std::string address::to_string() const {
  return family_ == limit::family::v4 ? v4_text(v4()) : v6_text(high_, low_);
}

address_keys keys_of(const address& a, const level_prefixes& p) noexcept {
  if (a.family() == family::v4) {
    return {level::ipv4_individual, level::ipv4_network, a.v4() & mask32(p.ipv4_individual),
            a.v4() & mask32(p.ipv4_network)};
  }
  return {level::ipv6_subnet, level::ipv6_provider, a.v6_high() & mask64(p.ipv6_subnet),
          a.v6_high() & mask64(p.ipv6_provider)};
}

std::uint8_t prefix_of(level l, const level_prefixes& p) noexcept {
  switch (l) {
    case level::ipv4_individual:
      return p.ipv4_individual;
    case level::ipv4_network:
      return p.ipv4_network;
    case level::ipv6_subnet:
      return p.ipv6_subnet;
    case level::ipv6_provider:
      return p.ipv6_provider;
    default:
      return 0;
  }
}

std::string key_to_string(level l, std::uint64_t key, const level_prefixes& p) {
  const auto bits = std::to_string(prefix_of(l, p));
  if (l == level::ipv4_individual || l == level::ipv4_network) {
    return v4_text(static_cast<std::uint32_t>(key)) + "/" + bits;
  }
  if (l == level::ipv6_subnet || l == level::ipv6_provider) return v6_text(key, 0) + "/" + bits;
  return std::string(level_name(l));
}

}  // namespace tollgate::limit
