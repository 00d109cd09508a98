#include "gateway/net/address_slots.hpp"

namespace tollgate::net {

std::uint64_t address_slots::key_of(const core::address& a) noexcept {
  // IPv4 keys sit below 2^32 with a marker bit; an IPv6 /64 is its high half, which a real
  // /64 never makes equal to a marked IPv4 key in practice (the marker lies in 0::/32's space,
  // which is reserved).
  if (a.family() == core::family::v4) return (std::uint64_t{1} << 32) | a.v4();
  return a.v6_high();
}

std::uint64_t address_slots::network_key_of(const core::address& a) noexcept {
  if (a.family() == core::family::v4) return (std::uint64_t{1} << 32) | (a.v4() & 0xffffff00u);
  return a.v6_high() & ~std::uint64_t{0xffff};
}

bool address_slots::try_take(std::uint64_t key, std::uint32_t cap) {
  shard& s = shard_of(key);
  const std::lock_guard lock(s.mutex);
  auto& n = s.counts[key];
  if (n >= cap) {
    if (n == 0) s.counts.erase(key);
    return false;
  }
  ++n;
  return true;
}

void address_slots::give_back(std::uint64_t key) noexcept {
  shard& s = shard_of(key);
  const std::lock_guard lock(s.mutex);
  const auto it = s.counts.find(key);
  if (it == s.counts.end()) return;
  if (--it->second == 0) s.counts.erase(it);
}

std::uint32_t address_slots::taken(std::uint64_t key) {
  shard& s = shard_of(key);
  const std::lock_guard lock(s.mutex);
  const auto it = s.counts.find(key);
  return it == s.counts.end() ? 0 : it->second;
}

}  // namespace tollgate::net
