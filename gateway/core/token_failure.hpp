#pragma once
/// Why a token was refused (docs/design.md §15): the `reason` of a 401 and the `result` label of
/// tollgate_token_checks_total, named once for both.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tollgate::core {

/// Why a token was refused, `none` when it verified.
enum class token_failure : std::uint8_t {
  none,              ///< verified
  too_long,          ///< over 8 KiB
  malformed,         ///< not three base64url parts, or a part that is not a JSON object
  alg_none,          ///< "alg": "none" (always refused)
  alg_not_allowed,   ///< an algorithm not listed, or HS* without a secret
  unknown_kid,       ///< no key of the set has its "kid" (or, without one, no single key fits)
  key_mismatch,      ///< the key named is not a key of its algorithm (algorithm confusion)
  bad_signature,     ///< the signature does not verify
  expired,           ///< past "exp" (with leeway)
  not_yet_valid,     ///< before "nbf" (with leeway)
  issued_in_future,  ///< "iat" after now (with leeway)
  issuer,            ///< "iss" is not the configured issuer
  audience,          ///< "aud" names none of the configured audiences
  bad_claim          ///< a registered claim of the wrong type ("exp": "soon")
};

/// Number of token_failure values.
inline constexpr std::size_t token_failure_count = 14;

/// The names, by token_failure ("verified" for none).
inline constexpr std::array<std::string_view, token_failure_count> token_failure_names = {
    "verified",         "too_long",     "malformed",     "alg_none", "alg_not_allowed",
    "unknown_kid",      "key_mismatch", "bad_signature", "expired",  "not_yet_valid",
    "issued_in_future", "issuer",       "audience",      "bad_claim"};

/// The name of `f`.
constexpr std::string_view token_failure_name(token_failure f) noexcept {
  return token_failure_names[static_cast<std::size_t>(f)];
}

}  // namespace tollgate::core
