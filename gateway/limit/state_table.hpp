#pragma once
/// A bounded, sharded open-addressing table of limiter state: one entry per (scope, key) with
/// the tats of both tiers. Memory is allocated once at construction; at capacity an insert
/// evicts, idle entries (every tat in the past) first, so memory stays flat under key rotation.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "gateway/core/clock.hpp"
#include "gateway/limit/spinlock.hpp"

namespace tollgate::limit {

using core::nanos;

/// One tracked key. Two fit in a cache line.
struct alignas(32) state_entry {
  std::uint64_t key = 0;    ///< address prefix or hashed identity
  std::uint32_t scope = 0;  ///< which limit the key belongs to; 0 marks an empty slot
  std::uint32_t hash = 0;   ///< low half of the key's hash: finds its home slot on deletion
  nanos tat[2] = {0, 0};    ///< theoretical arrival time of the short and the long tier
};
static_assert(sizeof(state_entry) == 32);

/// One lock and its slice of slots. Padded to a cache line so neighbours do not share one.
/// Thread safety: every field but `count` is read and written only under `lock`.
struct alignas(64) state_shard {
  spinlock lock;                            ///< guards the slots of this shard
  std::atomic<std::uint32_t> count{0};      ///< occupied slots, readable without the lock
  std::uint32_t cursor = 0;                 ///< where the next eviction sweep starts
  std::atomic<std::uint64_t> evictions{0};  ///< live entries dropped for room
  state_entry* slots = nullptr;             ///< this shard's slice of the table
};

/// The table. Callers hash a key, lock its shard, then find/insert under that lock; a request
/// touching several keys locks their shards in a global order (see memory_store).
/// Thread safety: hash/shard_of/size/capacity are safe anywhere; find/insert/erase require the
/// shard's lock to be held by the caller.
class state_table {
 public:
  /// A table holding at least `capacity` entries, hashing with the secret `seed`.
  state_table(std::size_t capacity, std::uint64_t seed);
  ~state_table();
  state_table(const state_table&) = delete;
  state_table& operator=(const state_table&) = delete;

  /// The keyed hash of (key, scope); attackers choosing keys cannot aim at one slot.
  std::uint64_t hash(std::uint64_t key, std::uint32_t scope) const noexcept;
  /// The shard that owns hash `h`.
  std::uint32_t shard_index(std::uint64_t h) const noexcept {
    return static_cast<std::uint32_t>(h >> 40) & shard_mask_;
  }
  /// The shard with index `i`.
  state_shard& shard(std::uint32_t i) noexcept { return shards_[i]; }
  /// Asks the CPU to start loading the home slot of `h` (before taking locks).
  void prefetch(std::uint64_t h) const noexcept;

  /// The entry of (key, scope), or nullptr. Caller holds the shard's lock.
  state_entry* find(state_shard& s, std::uint64_t h, std::uint64_t key,
                    std::uint32_t scope) noexcept;
  /// Adds (key, scope), known to be absent, with both tats 0 and returns it; reuses an idle
  /// slot on its probe path, or evicts when the shard is full. Caller holds the shard's lock.
  state_entry* insert(state_shard& s, std::uint64_t h, std::uint64_t key, std::uint32_t scope,
                      nanos now) noexcept;

  /// A copy of the entry of (key, scope), taking the lock itself (admin and tests).
  std::optional<state_entry> lookup(std::uint64_t key, std::uint32_t scope) noexcept;

  /// Occupied slots (idle ones included until reused), summed without locks.
  std::size_t size() const noexcept;
  /// Live entries dropped to make room, summed without locks.
  std::uint64_t evictions() const noexcept;
  /// Most entries the table holds.
  std::size_t capacity() const noexcept { return std::size_t{shard_capacity_} * shard_count_; }
  /// Bytes reserved for slots and shards.
  std::size_t memory_bytes() const noexcept;

 private:
  std::uint32_t home(std::uint32_t hash) const noexcept {
    return static_cast<std::uint32_t>((std::uint64_t{hash} * slots_per_shard_) >> 32);
  }
  std::uint32_t next(std::uint32_t i) const noexcept {
    return i + 1 == slots_per_shard_ ? 0 : i + 1;
  }
  std::uint32_t free_slot(state_shard& s, std::uint32_t hash, nanos now) const noexcept;
  void evict_one(state_shard& s, nanos now) noexcept;
  void erase(state_shard& s, std::uint32_t i) noexcept;

  std::uint32_t shard_count_;              ///< a power of two
  std::uint32_t shard_mask_;               ///< shard_count_ - 1
  std::uint32_t shard_capacity_;           ///< most occupied slots per shard
  std::uint32_t slots_per_shard_;          ///< > shard_capacity_, so a probe always ends
  std::uint64_t seed_[2];                  ///< hash secret
  std::unique_ptr<state_shard[]> shards_;  ///< the locks
  state_entry* slots_ = nullptr;           ///< one mapping for every shard's slots
  std::size_t mapped_bytes_ = 0;           ///< size of that mapping
};

}  // namespace tollgate::limit
