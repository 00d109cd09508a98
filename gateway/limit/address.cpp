#include "gateway/limit/address.hpp"

namespace tollgate::limit {

using core::mask32;
using core::mask64;

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
  }
  return 0;
}

std::string key_to_string(level l, std::uint64_t key, const level_prefixes& p) {
  const auto bits = std::to_string(prefix_of(l, p));
  if (l == level::ipv4_individual || l == level::ipv4_network) {
    return address::from_v4(static_cast<std::uint32_t>(key)).to_string() + "/" + bits;
  }
  return address::from_v6(key, 0).to_string() + "/" + bits;
}

}  // namespace tollgate::limit
