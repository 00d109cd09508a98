#pragma once
/// SipHash-1-3: a keyed hash for strings chosen by clients (identity keys), so that nobody
/// without the key can make two values collide on purpose.

#include <cstdint>
#include <string_view>

namespace tollgate::core {

/// A 128-bit SipHash key.
struct siphash_key {
  std::uint64_t k0 = 0;  ///< first half
  std::uint64_t k1 = 0;  ///< second half
};

/// SipHash-1-3 of `data` under `key`.
std::uint64_t siphash13(std::string_view data, const siphash_key& key) noexcept;

}  // namespace tollgate::core
