#pragma once
/// Verified identity (docs/design.md §15): JSON Web Tokens (RFC 7519) signed as JWS compact
/// serialisations (RFC 7515), checked against a JWK Set (RFC 7517) or a shared secret, with the
/// algorithms of RFC 7518 and RFC 8037 that an operator lists. Signatures and keys are OpenSSL's
/// (EVP): nothing here computes a signature by hand; the JSON is Boost.JSON's. No I/O: the JWK
/// Set arrives as text (a file read by the loader, a body fetched by app/).

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/core/token_failure.hpp"

namespace tollgate::identity {

/// The signature algorithms a configuration may list (`algorithms:`). `none` is not one.
enum class algorithm : std::uint8_t {
  RS256,
  RS384,
  RS512,
  PS256,
  PS384,
  PS512,
  ES256,
  ES384,
  ES512,
  EdDSA,
  HS256,
  HS384,
  HS512
};
inline constexpr std::size_t algorithm_count = 13;
/// Its name in a token's header ("RS256").
std::string_view algorithm_name(algorithm a) noexcept;
/// The algorithm called `name` (case-sensitive, as RFC 7518 spells them), if any.
bool algorithm_of(std::string_view name, algorithm& out) noexcept;
/// Whether `a` is an HMAC algorithm (HS*): verified only with the configured secret.
constexpr bool is_hmac(algorithm a) noexcept {
  return a == algorithm::HS256 || a == algorithm::HS384 || a == algorithm::HS512;
}

/// Why a token was refused: the `reason` of a 401's problem body.
using failure = core::token_failure;
/// The reason's word ("expired"; "verified" for none).
constexpr std::string_view failure_name(failure f) noexcept {
  return core::token_failure_name(f);
}

/// Tokens longer than this are refused unread (docs/design.md §15).
inline constexpr std::size_t max_token_bytes = 8192;

/// One verification key of a JWK Set.
struct jwk {
  std::string kid;            ///< "" when the key has none
  algorithm alg{};            ///< the algorithm it is used with (its "alg", or implied by kty/crv)
  bool alg_fixed = false;     ///< the key said its "alg": only that one
  std::shared_ptr<void> key;  ///< EVP_PKEY (opaque here)
  std::uint8_t family = 0;    ///< 0 RSA, 1 EC P-256, 2 EC P-384, 3 EC P-521, 4 Ed25519
};

/// A JWK Set's usable keys, immutable once read.
/// Thread safety: immutable; shared by every worker.
class key_set {
 public:
  /// Reads a JWK Set (`{"keys":[...]}`) or a single JWK. Keys it cannot use (an "oct" key,
  /// "use" other than "sig", an RSA key under 2048 bits, an unknown curve) are left out, each
  /// named in `skipped`. Throws std::runtime_error with the reason when the text is not a JWK
  /// Set or holds no usable key.
  static std::shared_ptr<const key_set> parse(std::string_view json,
                                              std::vector<std::string>* skipped = nullptr);
  /// The keys, in the set's order.
  const std::vector<jwk>& keys() const noexcept { return keys_; }

 private:
  std::vector<jwk> keys_;
};

/// What a verified token says that the configuration reads: its claims at the configured paths.
struct claims {
  /// The value of each configured claim path (claim_paths order), as text (a number in
  /// decimal); "" when absent or not a string, number or boolean.
  std::vector<std::string> values;
  std::int64_t expires = 0;  ///< its "exp" (seconds since the epoch), 0 when it has none
};

/// What the verifier is told.
struct verifier_options {
  std::vector<algorithm> algorithms;     ///< the allowed ones
  std::string secret;                    ///< the HS* secret ("" : HS* refused)
  std::string issuer;                    ///< "" : not checked
  std::vector<std::string> audiences;    ///< empty: not checked; else "aud" must name one
  std::int64_t leeway = 30;              ///< seconds, for exp, nbf, iat
  std::vector<std::string> claim_paths;  ///< dotted paths to read ("sub", "org.plan")
};

/// Verifies tokens against one configuration and a key set that may be replaced (a JWKS URL
/// refreshed): keys() is read once per verification.
/// Thread safety: verify may be called from any thread; set_keys from one at a time.
class verifier {
 public:
  explicit verifier(verifier_options o);

  /// Verifies `token` at `now` (seconds since the epoch); fills `out` when it verifies.
  failure verify(std::string_view token, std::int64_t now, claims& out) const;

  /// Replaces the key set (null: none yet, every asymmetric token is refused unknown_kid).
  void set_keys(std::shared_ptr<const key_set> keys);
  /// The key set in force.
  std::shared_ptr<const key_set> keys() const;
  /// Incremented by every set_keys: what caches of verified tokens compare.
  std::uint64_t generation() const noexcept;
  /// The options it was made with.
  const verifier_options& options() const noexcept { return options_; }

 private:
  struct state;
  verifier_options options_;
  std::array<bool, algorithm_count> allowed_{};
  std::shared_ptr<state> state_;  ///< the key set and its generation, under a lock
};

}  // namespace tollgate::identity
