#pragma once
/// Stateless proof-of-work challenges (docs/design.md §5): signed with HMAC-SHA-256, bound to a
/// client and a category, expiring; and the check of a client's proof against them.

#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/core/proof_failure.hpp"
#include "gateway/pow/crypto.hpp"

namespace tollgate::pow {

/// What a challenge binds. The tags are chosen by the caller: `client` identifies the
/// client's individual address key, `category` the category (category_tag).
struct challenge_claims {
  std::int64_t expires = 0;    ///< Unix seconds after which it is refused
  std::uint8_t bits = 0;       ///< leading zero bits a solution must have
  std::uint32_t category = 0;  ///< category_tag of the category it was issued for
  std::uint64_t client = 0;    ///< tag of the client it was issued to
};

/// Why a proof was refused (the `reason` of the 428 that answers it).
using core::proof_failure;

/// The reason as the 428 body and the metrics name it.
constexpr std::string_view failure_name(proof_failure f) noexcept {
  return core::proof_failure_name(f);
}

/// A stable 32-bit tag of a category name.
std::uint32_t category_tag(std::string_view name) noexcept;

/// Difficulty for a client with violation counter `n` (0: none required).
unsigned required_bits(unsigned n, unsigned base_bits, unsigned step_bits,
                       unsigned max_bits) noexcept;

/// Whether `nonce` is 1-64 characters of [A-Za-z0-9_-].
bool valid_nonce(std::string_view nonce) noexcept;

/// Length of every challenge string.
inline constexpr std::size_t challenge_length = 94;

/// Issues and checks challenges under one secret.
/// Thread safety: const member functions may be called from any number of threads.
class challenger {
 public:
  explicit challenger(std::string_view secret) : key_(secret) {}

  /// A new challenge for `c`, with 16 fresh random bytes.
  std::string issue(const challenge_claims& c) const;

  /// Checks the X-PoW-Solution value `solution` ("<challenge>:<nonce>") for a request of
  /// client `client` in category `category` at `now` (Unix seconds) that requires
  /// `required_bits`. Everything but replay: that needs the caller's replay_cache, keyed by
  /// the returned `challenge`. On success `claims` holds what the challenge said.
  proof_failure check(std::string_view solution, std::int64_t now, std::uint64_t client,
                      std::uint32_t category, unsigned required_bits, challenge_claims& claims,
                      std::string_view& challenge) const;

 private:
  hmac_key key_;  ///< the secret
};

/// A nonce that solves `challenge` at `bits`, found with `threads` threads (for client
/// authors and tests: `tollgate pow solve`).
std::string solve(std::string_view challenge, unsigned bits, unsigned threads);

}  // namespace tollgate::pow
