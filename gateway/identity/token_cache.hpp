#pragma once
/// A worker's memory of the tokens it verified (docs/design.md §15): a hot token costs a hash
/// and a lookup, not a signature check. Bounded (least recently used go first); an entry lives
/// until its token's "exp", and only while the verifier and its key set are the ones it was
/// verified against (a reload or a refreshed key set starts afresh). A token is found by its
/// last 16 bytes (the end of its signature) and its length, mixed under a random key; a verified
/// token is kept whole and compared whole (so a token that copies another's signature over
/// other claims is never taken for it), a refused one by a keyed 64-bit SipHash. Hashing the
/// whole token on every request cost 760 instructions for a 560-byte token; comparing it costs
/// about 60 (bench/README.md §10). Memory: the verified tokens themselves, at most
/// `capacity` of them per worker.

#include <cstdint>
#include <list>
#include <memory>
#include <string>
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
  /// check() in two steps: `token` as remembered for `v` at `now` into `out`, if it is...
  bool find(const verifier& v, std::string_view token, std::int64_t now, token_result& out);
  /// ... else verified now by `v` (and remembered).
  token_result verify(const verifier& v, std::string_view token, std::int64_t now);

  /// Signature checks made (tokens not found here).
  std::uint64_t verifications() const noexcept { return verifications_; }
  /// Tokens found here.
  std::uint64_t hits() const noexcept { return hits_; }
  /// Tokens remembered.
  std::size_t size() const noexcept { return index_.size(); }

 private:
  struct entry {
    std::uint64_t hash = 0;        ///< the index's key (quick_key)
    std::uint64_t generation = 0;  ///< verifier::generation() when verified
    std::string token;             ///< verified: the token, compared whole
    std::uint64_t digest = 0;      ///< refused: the token's keyed SipHash
    std::size_t length = 0;        ///< the token's length
    token_result result;
  };
  /// The index's key of `token`: its last 16 bytes and its length, mixed under key_.
  std::uint64_t quick_key(std::string_view token) const noexcept;
  /// Whether `e` remembers `token`.
  bool remembers(const entry& e, std::string_view token) const;
  std::size_t capacity_;
  core::siphash_key key_;
  std::list<entry> order_;  ///< most recently used first
  std::unordered_map<std::uint64_t, std::list<entry>::iterator> index_;
  std::uint64_t verifications_ = 0;
  std::uint64_t hits_ = 0;
};

}  // namespace tollgate::identity
