#pragma once
/// Concurrency limits (docs/design.md §15, "Concurrency"): requests in flight per (limit, key),
/// counted across every worker, and the places one request holds until it ends.

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace tollgate::limit {

/// Places taken per key, in 64 shards with a lock each.
/// Thread safety: every member may be called from any thread.
class inflight_table {
 public:
  /// The key of `key` under the limit of state scope `scope`.
  static std::uint64_t key_of(std::uint32_t scope, std::uint64_t key) noexcept {
    std::uint64_t h = key ^ (std::uint64_t{scope} * 0x9E3779B97F4A7C15ULL);
    h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
  }
  /// Takes a place for `key` if fewer than `cap` are taken; false (nothing taken) otherwise.
  bool try_take(std::uint64_t key, std::uint32_t cap) {
    shard& s = shard_of(key);
    const std::lock_guard lock(s.mutex);
    std::uint32_t& n = s.counts[key];
    if (n >= cap) {
      if (n == 0) s.counts.erase(key);
      return false;
    }
    ++n;
    return true;
  }
  /// Gives back a place taken for `key`.
  void give_back(std::uint64_t key) noexcept {
    shard& s = shard_of(key);
    const std::lock_guard lock(s.mutex);
    const auto it = s.counts.find(key);
    if (it == s.counts.end()) return;
    if (--it->second == 0) s.counts.erase(it);
  }
  /// Places taken for `key` now.
  std::uint32_t taken(std::uint64_t key) {
    shard& s = shard_of(key);
    const std::lock_guard lock(s.mutex);
    const auto it = s.counts.find(key);
    return it == s.counts.end() ? 0 : it->second;
  }

 private:
  struct shard {
    std::mutex mutex;
    std::unordered_map<std::uint64_t, std::uint32_t> counts;  ///< only keys with a place taken
  };
  shard& shard_of(std::uint64_t key) noexcept { return shards_[key >> 58]; }
  std::array<shard, 64> shards_;
};

/// The places one request holds, given back when it ends (release) or when destroyed: however
/// the request ends, its places go back. Move-only.
class inflight_holds {
 public:
  inflight_holds() = default;
  inflight_holds(inflight_holds&& o) noexcept : table_(o.table_), keys_(o.keys_), n_(o.n_) {
    o.n_ = 0;
  }
  inflight_holds& operator=(inflight_holds&& o) noexcept {
    if (this != &o) {
      release();
      table_ = o.table_;
      keys_ = o.keys_;
      n_ = o.n_;
      o.n_ = 0;
    }
    return *this;
  }
  inflight_holds(const inflight_holds&) = delete;
  inflight_holds& operator=(const inflight_holds&) = delete;
  ~inflight_holds() { release(); }

  /// Takes a place for `key` under `cap` in `table` (every hold of one request in one table);
  /// false when the key has `cap` already (nothing taken then).
  bool take(inflight_table& table, std::uint64_t key, std::uint32_t cap) {
    if (n_ == keys_.size() || !table.try_take(key, cap)) return false;
    table_ = &table;
    keys_[n_++] = key;
    return true;
  }
  /// Gives every place back.
  void release() noexcept {
    for (std::uint8_t i = 0; i < n_; ++i)
      table_->give_back(keys_[i]);
    n_ = 0;
  }
  /// Whether it holds a place.
  bool empty() const noexcept { return n_ == 0; }

 private:
  inflight_table* table_ = nullptr;
  std::array<std::uint64_t, 8> keys_{};
  std::uint8_t n_ = 0;
};

}  // namespace tollgate::limit
