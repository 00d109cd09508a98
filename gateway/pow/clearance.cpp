#include "gateway/pow/clearance.hpp"

#include <algorithm>
#include <cmath>

namespace tollgate::pow {

namespace {

/// The signed part: a version byte, issued, expires, bits, client, scope.
constexpr std::size_t signed_length = 1 + 8 + 8 + 1 + 8 + 4;
/// The MAC kept: 15 bytes (120 bits), so that the token is whole base64 groups.
constexpr std::size_t mac_length = 15;
constexpr std::uint8_t version = 1;
static_assert((signed_length + mac_length) % 3 == 0 &&
              (signed_length + mac_length) * 4 / 3 == clearance_length);

/// The key of clearances: the PoW secret under a label of its own, so that no challenge's MAC
/// is ever a clearance's.
std::string labelled(std::string_view secret) {
  std::string k = "tollgate clearance v1:";
  k += secret;
  return k;
}

}  // namespace

std::int64_t clearance_lifetime(unsigned bits, unsigned base_bits, std::int64_t base,
                                std::int64_t max) noexcept {
  const int shift = std::clamp(static_cast<int>(bits) - static_cast<int>(base_bits), -30, 30);
  const double life = std::ldexp(static_cast<double>(base), shift);
  return static_cast<std::int64_t>(std::clamp(life, 1.0, static_cast<double>(max)));
}

clearance_signer::clearance_signer(std::string_view secret) : key_(labelled(secret)) {}

std::string clearance_signer::issue(const clearance_claims& c) const {
  std::string raw;
  raw.reserve(signed_length + mac_length);
  raw += static_cast<char>(version);
  append_be(raw, static_cast<std::uint64_t>(c.issued), 8);
  append_be(raw, static_cast<std::uint64_t>(c.expires), 8);
  raw += static_cast<char>(c.bits);
  append_be(raw, c.client, 8);
  append_be(raw, c.scope, 4);
  const digest mac = key_.mac(raw);
  raw.append(reinterpret_cast<const char*>(mac.data()), mac_length);
  return base64url_encode(raw);
}

std::optional<clearance_claims> clearance_signer::check(std::string_view token, std::int64_t now,
                                                        std::uint64_t client,
                                                        std::uint32_t scope) const {
  if (token.size() != clearance_length) return std::nullopt;
  const auto raw = base64url_decode(token);
  if (!raw || raw->size() != signed_length + mac_length ||
      static_cast<std::uint8_t>((*raw)[0]) != version) {
    return std::nullopt;
  }
  const digest mac = key_.mac(std::string_view(raw->data(), signed_length));
  if (!equal_secret(mac.data(), raw->data() + signed_length, mac_length)) return std::nullopt;
  clearance_claims c;
  c.issued = static_cast<std::int64_t>(read_be(*raw, 1, 8));
  c.expires = static_cast<std::int64_t>(read_be(*raw, 9, 8));
  c.bits = static_cast<std::uint8_t>((*raw)[17]);
  c.client = read_be(*raw, 18, 8);
  c.scope = static_cast<std::uint32_t>(read_be(*raw, 26, 4));
  if (now >= c.expires || c.client != client || c.scope != scope) return std::nullopt;
  return c;
}

}  // namespace tollgate::pow
