#pragma once
/// A bounded map from a client key to a small value, split into shards with a lock each;
/// a full shard forgets its least recently updated entry. The tables of violation counters
/// and bans (docs/design.md §5: bounded, LRU).

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tollgate::pow {

/// A client key: an address level's key and the level it belongs to (so that an IPv4 key and
/// an IPv6 prefix with the same bits stay apart).
struct subject {
  std::uint64_t key = 0;   ///< the address masked to the level's prefix
  std::uint8_t level = 0;  ///< core::level of that prefix
  friend bool operator==(const subject&, const subject&) = default;
};

struct subject_hash {
  std::size_t operator()(const subject& s) const noexcept {
    std::uint64_t h = (s.key ^ (std::uint64_t{s.level} << 59)) * 0x9e3779b97f4a7c15ull;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

/// Thread safety: every member function may be called from any thread.
template <class Value>
class lru_map {
 public:
  /// At most `capacity` entries (at least one per shard).
  explicit lru_map(std::size_t capacity, std::size_t shards = 16)
      : shards_(shards), per_shard_(std::max<std::size_t>(1, capacity / shards)) {
    for (auto& s : shards_)
      s = std::make_unique<shard>();
  }

  /// Calls `f(value)` on the entry of `k`, made (default value) if absent; it becomes the most
  /// recently updated. Returns what `f` returns.
  template <class F>
  auto update(const subject& k, F&& f) {
    shard& s = shard_of(k);
    const std::lock_guard lock(s.mutex);
    auto it = s.index.find(k);
    if (it == s.index.end()) {
      if (s.order.size() >= per_shard_) {
        s.index.erase(s.order.back().first);
        s.order.pop_back();
        size_.fetch_sub(1, std::memory_order_relaxed);
        evictions_.fetch_add(1, std::memory_order_relaxed);
      }
      s.order.emplace_front(k, Value{});
      it = s.index.emplace(k, s.order.begin()).first;
      size_.fetch_add(1, std::memory_order_relaxed);
    } else if (it->second != s.order.begin()) {
      s.order.splice(s.order.begin(), s.order, it->second);
    }
    return f(it->second->second);
  }

  /// Calls `f(value)` on the entry of `k` if there is one, without changing its recency.
  /// Returns whether there was.
  template <class F>
  bool find(const subject& k, F&& f) const {
    if (size_.load(std::memory_order_relaxed) == 0) return false;  // the usual case: no lock
    const shard& s = shard_of(k);
    const std::lock_guard lock(s.mutex);
    const auto it = s.index.find(k);
    if (it == s.index.end()) return false;
    f(it->second->second);
    return true;
  }

  /// Removes the entry of `k`; returns whether there was one.
  bool erase(const subject& k) {
    shard& s = shard_of(k);
    const std::lock_guard lock(s.mutex);
    const auto it = s.index.find(k);
    if (it == s.index.end()) return false;
    s.order.erase(it->second);
    s.index.erase(it);
    size_.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }

  /// Removes every entry for which `pred(key, value)` holds, one shard locked at a time;
  /// returns how many went (the admin API's reset).
  template <class P>
  std::size_t erase_if(P&& pred) {
    std::size_t n = 0;
    for (auto& s : shards_) {
      const std::lock_guard lock(s->mutex);
      for (auto it = s->order.begin(); it != s->order.end();) {
        if (!pred(it->first, it->second)) {
          ++it;
          continue;
        }
        s->index.erase(it->first);
        it = s->order.erase(it);
        ++n;
      }
    }
    size_.fetch_sub(n, std::memory_order_relaxed);
    return n;
  }

  /// Calls `f(key, value)` on every entry, one shard locked at a time.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& s : shards_) {
      const std::lock_guard lock(s->mutex);
      for (const auto& [k, v] : s->order)
        f(k, v);
    }
  }

  /// Calls `f(key, value)` on every entry, least recently updated first within each shard
  /// (the order in which update() puts them back as they were: the state file).
  template <class F>
  void for_each_oldest_first(F&& f) const {
    for (const auto& s : shards_) {
      const std::lock_guard lock(s->mutex);
      for (auto it = s->order.rbegin(); it != s->order.rend(); ++it)
        f(it->first, it->second);
    }
  }
  /// Entries held.
  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }
  /// Most entries held.
  std::size_t capacity() const noexcept { return per_shard_ * shards_.size(); }
  /// Entries dropped to make room for others.
  std::uint64_t evictions() const noexcept { return evictions_.load(std::memory_order_relaxed); }

 private:
  struct shard {
    mutable std::mutex mutex;
    std::list<std::pair<subject, Value>> order;  ///< most recently updated first
    std::unordered_map<subject, typename std::list<std::pair<subject, Value>>::iterator,
                       subject_hash>
        index;
  };
  shard& shard_of(const subject& k) const { return *shards_[subject_hash{}(k) % shards_.size()]; }
  std::vector<std::unique_ptr<shard>> shards_;
  std::size_t per_shard_;
  std::atomic<std::size_t> size_{0};
  std::atomic<std::uint64_t> evictions_{0};  ///< see evictions()
};

}  // namespace tollgate::pow
