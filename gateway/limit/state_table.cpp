#include "gateway/limit/state_table.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <new>

namespace tollgate::limit {

namespace {

__extension__ typedef unsigned __int128 uint128;  // GCC/Clang; __extension__ silences -Wpedantic

/// 64x64 -> 128 multiply folded to 64 bits (the wyhash "mum" mixer).
inline std::uint64_t mum(std::uint64_t a, std::uint64_t b) noexcept {
  const uint128 r = static_cast<uint128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

bool idle(const state_entry& e, nanos now) noexcept {
  return e.tat[0] <= now && e.tat[1] <= now;
}

}  // namespace

state_table::state_table(std::size_t capacity, std::uint64_t seed) {
  capacity = std::max<std::size_t>(capacity, 1);
  // Enough shards that two threads rarely meet, few enough that each holds a useful run.
  shard_count_ = static_cast<std::uint32_t>(
      std::clamp<std::size_t>(std::bit_floor(capacity / 256 + 1), 1, 1u << 16));
  shard_mask_ = shard_count_ - 1;
  shard_capacity_ = static_cast<std::uint32_t>((capacity + shard_count_ - 1) / shard_count_);
  // Load factor at most 3/4 keeps linear probes short.
  slots_per_shard_ = shard_capacity_ + shard_capacity_ / 3 + 2;
  seed_[0] = seed ^ 0xa0761d6478bd642fULL;
  seed_[1] = mum(seed, 0xe7037ed1a0b428dbULL) | 1;

  shards_ = std::make_unique<state_shard[]>(shard_count_);
  const std::size_t bytes = std::size_t{slots_per_shard_} * shard_count_ * sizeof(state_entry);
  constexpr std::size_t huge = 2u << 20;
  mapped_bytes_ = (bytes + huge - 1) / huge * huge;
  // An anonymous mapping is zero-filled (scope 0 = empty) and costs memory only when touched.
  void* p = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  // Random access across tens of megabytes: huge pages spare a TLB miss per lookup.
  madvise(p, mapped_bytes_, MADV_HUGEPAGE);
  slots_ = static_cast<state_entry*>(p);
  for (std::uint32_t i = 0; i < shard_count_; ++i) {
    shards_[i].slots = slots_ + std::size_t{i} * slots_per_shard_;
  }
}

state_table::~state_table() {
  munmap(slots_, mapped_bytes_);
}

std::uint64_t state_table::hash(std::uint64_t key, std::uint32_t scope) const noexcept {
  const std::uint64_t h = mum(key ^ seed_[0], (std::uint64_t{scope} << 32 | scope) ^ seed_[1]);
  return mum(h ^ seed_[1], 0x9e3779b97f4a7c15ULL);
}

void state_table::prefetch(std::uint64_t h) const noexcept {
  const state_shard& s = shards_[shard_index(h)];
  __builtin_prefetch(&s, 1);
  __builtin_prefetch(s.slots + home(static_cast<std::uint32_t>(h)), 1);
}

state_entry* state_table::find(state_shard& s, std::uint64_t h, std::uint64_t key,
                               std::uint32_t scope) noexcept {
  for (std::uint32_t i = home(static_cast<std::uint32_t>(h));; i = next(i)) {
    state_entry& e = s.slots[i];
    if (e.scope == 0) return nullptr;
    if (e.key == key && e.scope == scope) return &e;
  }
}

std::uint32_t state_table::free_slot(state_shard& s, std::uint32_t hash, nanos now) const noexcept {
  // The first empty or idle slot on the probe path. An idle entry may be replaced in place:
  // the run of occupied slots stays unbroken, so every other key stays reachable.
  for (std::uint32_t i = home(hash);; i = next(i)) {
    const state_entry& e = s.slots[i];
    if (e.scope == 0 || idle(e, now)) return i;
  }
}

state_entry* state_table::insert(state_shard& s, std::uint64_t h, std::uint64_t key,
                                 std::uint32_t scope, nanos now) noexcept {
  const auto hash = static_cast<std::uint32_t>(h);
  std::uint32_t i = free_slot(s, hash, now);
  if (s.slots[i].scope == 0) {
    if (s.count.load(std::memory_order_relaxed) >= shard_capacity_) {
      evict_one(s, now);
      i = free_slot(s, hash, now);
    }
    if (s.slots[i].scope == 0) {
      s.count.store(s.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }
  state_entry& e = s.slots[i];
  e = state_entry{key, scope, hash, {0, 0}};
  return &e;
}

void state_table::evict_one(state_shard& s, nanos now) noexcept {
  // Drop the first idle entry after the cursor; failing that, the one whose latest tat is
  // earliest (its bucket is nearest to full again, so forgetting it costs the least). A shard
  // holds a few hundred slots, so even the full scan is a few kilobytes of sequential reads.
  std::uint32_t victim = slots_per_shard_;
  nanos victim_tat = 0;
  std::uint32_t i = s.cursor < slots_per_shard_ ? s.cursor : 0;
  for (std::uint32_t scanned = 0; scanned < slots_per_shard_; ++scanned, i = next(i)) {
    const state_entry& e = s.slots[i];
    if (e.scope == 0) continue;
    const nanos latest = std::max(e.tat[0], e.tat[1]);
    if (latest <= now) {
      victim = i;
      break;
    }
    if (victim == slots_per_shard_ || latest < victim_tat) {
      victim = i;
      victim_tat = latest;
    }
  }
  if (victim == slots_per_shard_) return;
  if (!idle(s.slots[victim], now)) s.evictions.fetch_add(1, std::memory_order_relaxed);
  s.cursor = next(victim);
  erase(s, victim);
}

void state_table::erase(state_shard& s, std::uint32_t i) noexcept {
  // Backward-shift deletion: pull later entries of the run into the hole unless their home
  // lies cyclically in (hole, position], which would put them before their home.
  for (std::uint32_t j = next(i);; j = next(j)) {
    const state_entry& e = s.slots[j];
    if (e.scope == 0) break;
    const std::uint32_t k = home(e.hash);
    const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    s.slots[i] = e;
    i = j;
  }
  s.slots[i] = state_entry{};
  s.count.store(s.count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

std::optional<state_entry> state_table::lookup(std::uint64_t key, std::uint32_t scope) noexcept {
  const std::uint64_t h = hash(key, scope);
  state_shard& s = shards_[shard_index(h)];
  std::lock_guard guard(s.lock);
  if (const state_entry* e = find(s, h, key, scope)) return *e;
  return std::nullopt;
}

std::size_t state_table::size() const noexcept {
  std::size_t n = 0;
  for (std::uint32_t i = 0; i < shard_count_; ++i) {
    n += shards_[i].count.load(std::memory_order_relaxed);
  }
  return n;
}

std::uint64_t state_table::evictions() const noexcept {
  std::uint64_t n = 0;
  for (std::uint32_t i = 0; i < shard_count_; ++i) {
    n += shards_[i].evictions.load(std::memory_order_relaxed);
  }
  return n;
}

std::size_t state_table::memory_bytes() const noexcept {
  return mapped_bytes_ + std::size_t{shard_count_} * sizeof(state_shard);
}

}  // namespace tollgate::limit
