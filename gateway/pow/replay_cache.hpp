#pragma once
/// Proofs already spent, remembered until their challenge expires (docs/design.md §5): a bounded
/// set keyed by the challenge's fingerprint (SipHash under a fixed key: the same in every
/// process and build, so that a state file's outlives a restart). When full, the oldest go
/// first.

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/core/state_codec.hpp"

namespace tollgate::pow {

/// Thread safety: every member function may be called from any thread.
class replay_cache {
 public:
  /// Remembers at most `capacity` challenges.
  explicit replay_cache(std::size_t capacity);
  /// Marks `challenge` (valid until `expires`, Unix seconds) as spent at `now`. False when it
  /// was spent before: a replay.
  bool spend(std::string_view challenge, std::int64_t expires, std::int64_t now);
  /// Whether `challenge` was spent already (and is remembered): what spend() would refuse now.
  bool spent(std::string_view challenge) const;
  /// Challenges remembered.
  std::size_t size() const;
  /// Writes every challenge remembered (its fingerprint and expiry: the state file,
  /// docs/design.md §18).
  void save(core::state_writer& w) const;
  /// Reads what save() wrote, dropping what expired before `now` (Unix seconds); false when
  /// it is malformed (what was read before stays).
  bool load(core::state_reader& r, std::int64_t now);

 private:
  /// Remembers fingerprint `f` until `expires` in its shard; false when it is there already.
  bool insert(std::uint64_t f, std::int64_t expires, std::int64_t now);
  struct shard {
    mutable std::mutex mutex;
    std::unordered_map<std::uint64_t, std::int64_t> expiry;      ///< fingerprint -> expires
    std::deque<std::pair<std::uint64_t, std::int64_t>> arrival;  ///< oldest first
  };
  std::vector<std::unique_ptr<shard>> shards_;
  std::size_t per_shard_;
};

}  // namespace tollgate::pow
