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

namespace detail {
__extension__ typedef unsigned __int128 uint128;  // GCC/Clang; __extension__ for -Wpedantic

/// 64x64 -> 128 multiply folded to 64 bits (the wyhash "mum" mixer).
inline std::uint64_t mum(std::uint64_t a, std::uint64_t b) noexcept {
  const uint128 r = static_cast<uint128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}
}  // namespace detail

/// One tracked key. Two fit in a cache line.
struct alignas(32) state_entry {
  std::uint64_t key = 0;    ///< address prefix or hashed identity
  std::uint32_t scope = 0;  ///< which limit the key belongs to; 0 marks an empty slot
  std::uint32_t hash = 0;   ///< low half of the key's hash: finds its home slot on deletion
  nanos tat[2] = {0, 0};    ///< theoretical arrival time of the short and the long tier
};
static_assert(sizeof(state_entry) == 32);

/// The bookkeeping of one shard's slice of slots, touched only when an entry is added.
/// Thread safety: `cursor` is read and written only under the shard's lock; counters atomic.
struct alignas(64) state_shard {
  std::atomic<std::uint32_t> count{0};      ///< occupied slots, readable without the lock
  std::uint32_t cursor = 0;                 ///< where the next eviction sweep starts
  std::atomic<std::uint64_t> evictions{0};  ///< live entries dropped for room
};

/// One lock on its own cache line. A table has few of them (each guards every shard whose
/// index is congruent to its own), so the lock array stays in the core's cache while the
/// slots do not: a cold lookup then costs one miss, the slot's.
struct alignas(64) lock_stripe {
  spinlock lock;  ///< guards the shards of this stripe
};

/// Where one key lives: the lock that guards it, its shard and the shard's slots. Computed
/// from the hash alone, without reading the table's memory.
struct state_location {
  spinlock* lock;      ///< take before find/insert
  state_shard* shard;  ///< bookkeeping
  state_entry* slots;  ///< the shard's slice of the table
  std::uint64_t hash;  ///< the key's keyed hash
  std::uint32_t rank;  ///< the lock's index: a request takes its locks in rank order
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
  std::uint64_t hash(std::uint64_t key, std::uint32_t scope) const noexcept {
    const std::uint64_t h =
        detail::mum(key ^ seed_[0], (std::uint64_t{scope} << 32 | scope) ^ seed_[1]);
    return detail::mum(h ^ seed_[1], 0x9e3779b97f4a7c15ULL);
  }
  /// Where (key, scope) lives; arithmetic only, no memory of the table is read.
  state_location locate(std::uint64_t key, std::uint32_t scope) noexcept {
    const std::uint64_t h = hash(key, scope);
    const std::uint32_t i = static_cast<std::uint32_t>(h >> 40) & shard_mask_;
    const std::uint32_t l = i & lock_mask_;
    return {&locks_[l].lock, &shards_[i], slots_ + std::size_t{i} * slots_per_shard_, h, l};
  }
  /// Asks the CPU to start loading the lock and the home slots of `at` (before taking locks).
  void prefetch(const state_location& at) const noexcept {
    // Read prefetches of the lock and the home slot's line only. Measured on the reference
    // machine (AMD EPYC under KVM, bench/limiter.sh): write-intent prefetches did not shorten
    // the later miss, and adding the next line as well made cold decisions slower, not faster.
    __builtin_prefetch(at.lock, 0);
    __builtin_prefetch(at.slots + home(static_cast<std::uint32_t>(at.hash)), 0);
  }

  /// The entry of (key, scope) at `at`, or nullptr. Caller holds `*at.lock`.
  state_entry* find(const state_location& at, std::uint64_t key,
                    std::uint32_t scope) const noexcept {
    for (std::uint32_t i = home(static_cast<std::uint32_t>(at.hash));; i = next(i)) {
      state_entry& e = at.slots[i];
      if (e.scope == 0) return nullptr;
      if (e.key == key && e.scope == scope) return &e;
    }
  }
  /// Adds (key, scope), known to be absent, with both tats 0 and returns it; reuses an idle
  /// slot on its probe path, or evicts when the shard is full. Caller holds the lock.
  state_entry* insert(const state_location& at, std::uint64_t key, std::uint32_t scope,
                      nanos now) noexcept;

  /// Removes every entry whose key satisfies `pred`, taking each shard's lock in turn; returns
  /// how many went (the admin API's reset: a whole sweep, off the request path).
  template <class P>
  std::size_t erase_if(P&& pred) noexcept {
    std::size_t n = 0;
    for (std::uint32_t s = 0; s < shard_count_; ++s) {
      const state_location at{&locks_[s & lock_mask_].lock, &shards_[s],
                              slots_ + std::size_t{s} * slots_per_shard_, 0, s & lock_mask_};
      std::lock_guard guard(*at.lock);
      for (std::uint32_t i = 0; i < slots_per_shard_; ++i) {
        // Deletion shifts later entries of the run back: look at this slot again. An entry
        // shifted from the start of the shard to its end was looked at already and stays.
        while (at.slots[i].scope != 0 && pred(at.slots[i].key)) {
          erase(at, i);
          ++n;
        }
      }
    }
    return n;
  }

  /// Calls `f(entry)` for every occupied slot, taking each shard's lock in turn (the state
  /// file's save: a whole sweep, off the request path). `f` must not touch the table.
  template <class F>
  void for_each(F&& f) const noexcept {
    for (std::uint32_t s = 0; s < shard_count_; ++s) {
      std::lock_guard guard(locks_[s & lock_mask_].lock);
      const state_entry* slots = slots_ + std::size_t{s} * slots_per_shard_;
      for (std::uint32_t i = 0; i < slots_per_shard_; ++i) {
        if (slots[i].scope != 0) f(slots[i]);
      }
    }
  }
  /// Sets the entry of (key, scope) to `tat`, adding it when absent (the state file's load).
  void restore(std::uint64_t key, std::uint32_t scope, const nanos (&tat)[2], nanos now) noexcept;

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
  std::uint32_t free_slot(const state_entry* slots, std::uint32_t hash, nanos now) const noexcept;
  void evict_one(const state_location& at, nanos now) noexcept;
  void erase(const state_location& at, std::uint32_t i) noexcept;

  std::uint32_t shard_count_;              ///< a power of two
  std::uint32_t shard_mask_;               ///< shard_count_ - 1
  std::uint32_t shard_capacity_;           ///< most occupied slots per shard
  std::uint32_t slots_per_shard_;          ///< > shard_capacity_, so a probe always ends
  std::uint64_t seed_[2];                  ///< hash secret
  std::uint32_t lock_mask_;                ///< lock stripes - 1 (a power of two)
  std::unique_ptr<state_shard[]> shards_;  ///< per-shard bookkeeping
  std::unique_ptr<lock_stripe[]> locks_;   ///< the locks
  state_entry* slots_ = nullptr;           ///< one mapping for every shard's slots
  std::size_t mapped_bytes_ = 0;           ///< size of that mapping
};

}  // namespace tollgate::limit
