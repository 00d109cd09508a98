#pragma once
/// A worker's memory of the tokens it verified (docs/design.md §15): a hot token costs a hash
/// and a lookup, not a signature check. Bounded (least recently used go first); an entry lives
/// until its token's "exp", and only while the verifier and its key set are the ones it was
/// verified against (a reload or a refreshed key set starts afresh). Tokens are remembered by a
/// keyed 64-bit SipHash and their length.

#include <cstdint>
#include <list>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "gateway/core/siphash.hpp"
#include "gateway/identity/jwt.hpp"

namespace tollgate::identity {

/// A token's fate: verified with its claims, or refused and why.
struct token_result {
  failure why = failure::none;             ///< none: verified
  std::shared_ptr<const claims> verified;  ///< its claims, when verified
  bool cached = false;                     ///< answered from memory, no signature checked
};

/// Thread safety: none; one per worker thread.
class token_cache {
 public:
  /// At most `capacity` tokens (0: none remembered, every token verified); `key` keys the hash
  /// tokens are remembered by (random per process).
  token_cache(std::size_t capacity, core::siphash_key key);

  /// `token` checked by `v` at `now` (seconds since the epoch): remembered, or verified now.
  /// A refusal that time cannot change (a bad signature, an unknown key) is remembered too, so
  /// a token sent again costs nothing; expired, not yet valid and issued-in-the-future are not.
  token_result check(const verifier& v, std::string_view token, std::int64_t now);

  /// Signature checks made (tokens not found here).
  std::uint64_t verifications() const noexcept { return verifications_; }
  /// Tokens found here.
  std::uint64_t hits() const noexcept { return hits_; }
  /// Tokens remembered.
  std::size_t size() const noexcept { return index_.size(); }

 private:
  struct entry {
    std::uint64_t hash = 0;        ///< the index's key
    std::uint64_t check = 0;       ///< the token's length: hash and length must match
    std::uint64_t generation = 0;  ///< verifier::generation() when verified
    token_result result;
  };
  std::size_t capacity_;
  core::siphash_key key_;
  std::list<entry> order_;  ///< most recently used first
  std::unordered_map<std::uint64_t, std::list<entry>::iterator> index_;
  std::uint64_t verifications_ = 0;
  std::uint64_t hits_ = 0;
};

}  // namespace tollgate::identity
