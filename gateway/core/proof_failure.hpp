#pragma once
/// Why a proof of work was refused (docs/design.md §5): the `reason` of a 428 and the `result`
/// label of tollgate_pow_verifications_total, named once for both.

#include <array>
#include <cstddef>
#include <string_view>

namespace tollgate::core {

/// Why a proof was refused, `none` when it is valid.
enum class proof_failure {
  none,               ///< valid
  malformed,          ///< not "<challenge>:<nonce>", or not a challenge of ours in form
  bad_signature,      ///< the MAC does not match: forged or altered
  expired,            ///< past its expiry
  wrong_client,       ///< issued to another client or for another category
  insufficient_work,  ///< too few zero bits, or less than is required now
  replayed,           ///< a valid proof already spent
};

/// Number of proof_failure values.
inline constexpr std::size_t proof_failure_count = 7;

/// The names, by proof_failure ("valid" for none).
inline constexpr std::array<std::string_view, proof_failure_count> proof_failure_names = {
    "valid",        "malformed",         "bad_signature", "expired",
    "wrong_client", "insufficient_work", "replayed"};

/// The name of `f`.
constexpr std::string_view proof_failure_name(proof_failure f) noexcept {
  return proof_failure_names[static_cast<std::size_t>(f)];
}

}  // namespace tollgate::core
