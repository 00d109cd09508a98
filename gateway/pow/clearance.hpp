#pragma once
/// Clearance (docs/design.md §16): what a client earns by a valid proof of work, so that it does
/// not pay again on every request. Stateless and signed (HMAC-SHA-256 under the PoW secret, apart
/// from challenges by a label of its own), bound to the client's individual address key and to
/// the categories of one policy, with the instant it was earned (a violation after it voids it,
/// which the caller judges) and the bits it was earned with.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/pow/crypto.hpp"

namespace tollgate::pow {

/// What a clearance says.
struct clearance_claims {
  std::int64_t issued = 0;   ///< when it was earned (unix ns)
  std::int64_t expires = 0;  ///< when it ends (unix ns)
  std::uint8_t bits = 0;     ///< the difficulty of the proof that earned it
  std::uint64_t client = 0;  ///< the client's tag (individual key and level)
  std::uint32_t scope = 0;   ///< the tag of its policy's categories
};

/// Length of every clearance.
inline constexpr std::size_t clearance_length = 60;

/// How long a proof of `bits` clears (ns): `base` x 2^(bits - base_bits), at most `max` (a
/// proof below base_bits, such as a cheaper pay-to-pass one, clears for less than `base`).
std::int64_t clearance_lifetime(unsigned bits, unsigned base_bits, std::int64_t base,
                                std::int64_t max) noexcept;

/// Signs and checks clearances under one secret.
/// Thread safety: const member functions from any number of threads.
class clearance_signer {
 public:
  explicit clearance_signer(std::string_view secret);

  /// `c` as a token of clearance_length URL-safe base64 characters.
  std::string issue(const clearance_claims& c) const;
  /// The claims of `token` when it is one this signer issued, for `client` and `scope`, not
  /// expired at `now` (unix ns); nothing otherwise.
  std::optional<clearance_claims> check(std::string_view token, std::int64_t now,
                                        std::uint64_t client, std::uint32_t scope) const;

 private:
  hmac_key key_;
};

}  // namespace tollgate::pow
