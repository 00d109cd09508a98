#include "gateway/limit/state_table.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <new>

namespace tollgate::limit {

namespace {

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
  seed_[1] = detail::mum(seed, 0xe7037ed1a0b428dbULL) | 1;

  shards_ = std::make_unique<state_shard[]>(shard_count_);
  // 256 stripes: two threads rarely meet on one, and 16 KiB of locks stay in cache.
  const std::uint32_t stripes = std::min<std::uint32_t>(shard_count_, 256);
  lock_mask_ = stripes - 1;
  locks_ = std::make_unique<lock_stripe[]>(stripes);
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
}

state_table::~state_table() {
  munmap(slots_, mapped_bytes_);
}

std::uint32_t state_table::free_slot(const state_entry* slots, std::uint32_t hash,
                                     nanos now) const noexcept {
  // The first empty or idle slot on the probe path. An idle entry may be replaced in place:
  // the run of occupied slots stays unbroken, so every other key stays reachable.
  for (std::uint32_t i = home(hash);; i = next(i)) {
    const state_entry& e = slots[i];
    if (e.scope == 0 || idle(e, now)) return i;
  }
}

state_entry* state_table::insert(const state_location& at, std::uint64_t key, std::uint32_t scope,
                                 nanos now) noexcept {
  const auto hash = static_cast<std::uint32_t>(at.hash);
  state_shard& s = *at.shard;
  std::uint32_t i = free_slot(at.slots, hash, now);
  if (at.slots[i].scope == 0) {
    if (s.count.load(std::memory_order_relaxed) >= shard_capacity_) {
      evict_one(at, now);
      i = free_slot(at.slots, hash, now);
    }
    if (at.slots[i].scope == 0) {
      s.count.store(s.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }
  state_entry& e = at.slots[i];
  e = state_entry{key, scope, hash, {0, 0}};
  return &e;
}

void state_table::evict_one(const state_location& at, nanos now) noexcept {
  // Drop the first idle entry after the cursor; failing that, the one whose latest tat is
  // earliest (its bucket is nearest to full again, so forgetting it costs the least). A shard
  // holds a few hundred slots, so even the full scan is a few kilobytes of sequential reads.
  state_shard& s = *at.shard;
  std::uint32_t victim = slots_per_shard_;
  nanos victim_tat = 0;
  std::uint32_t i = s.cursor < slots_per_shard_ ? s.cursor : 0;
  for (std::uint32_t scanned = 0; scanned < slots_per_shard_; ++scanned, i = next(i)) {
    const state_entry& e = at.slots[i];
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
  if (!idle(at.slots[victim], now)) s.evictions.fetch_add(1, std::memory_order_relaxed);
  s.cursor = next(victim);
  erase(at, victim);
}

void state_table::erase(const state_location& at, std::uint32_t i) noexcept {
  // Backward-shift deletion: pull later entries of the run into the hole unless their home
  // lies cyclically in (hole, position], which would put them before their home.
  state_entry* slots = at.slots;
  for (std::uint32_t j = next(i);; j = next(j)) {
    const state_entry& e = slots[j];
    if (e.scope == 0) break;
    const std::uint32_t k = home(e.hash);
    const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    slots[i] = e;
    i = j;
  }
  slots[i] = state_entry{};
  at.shard->count.store(at.shard->count.load(std::memory_order_relaxed) - 1,
                        std::memory_order_relaxed);
}

void state_table::restore(std::uint64_t key, std::uint32_t scope, const nanos (&tat)[2],
                          nanos now) noexcept {
  const state_location at = locate(key, scope);
  std::lock_guard guard(*at.lock);
  state_entry* e = find(at, key, scope);
  if (e == nullptr) e = insert(at, key, scope, now);
  e->tat[0] = tat[0];
  e->tat[1] = tat[1];
}

std::optional<state_entry> state_table::lookup(std::uint64_t key, std::uint32_t scope) noexcept {
  const state_location at = locate(key, scope);
  std::lock_guard guard(*at.lock);
  if (const state_entry* e = find(at, key, scope)) return *e;
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
  return mapped_bytes_ + std::size_t{shard_count_} * sizeof(state_shard) +
         std::size_t{lock_mask_ + 1} * sizeof(lock_stripe);
}

}  // namespace tollgate::limit
