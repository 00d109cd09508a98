#pragma once
/// The most limited clients (admin API `GET /admin/limited`): each worker counts its
/// rejections (429, and 428 pay to pass) per individual address and per network in a
/// space-saving summary of fixed size (Metwally, Agrawal, El Abbadi, "Efficient computation of
/// frequent and top-k elements in data streams", 2005), over two windows of wall time; the
/// admin thread merges every worker's when asked. Only the rejection path writes; an admitted
/// request never touches it.

#include <array>
#include <cstdint>
#include <vector>

#include "gateway/core/clock.hpp"
#include "gateway/limit/levels.hpp"
#include "gateway/limit/spinlock.hpp"

namespace tollgate::limit {

/// A client as an address level keys it.
struct level_key {
  std::uint64_t key = 0;               ///< the address masked to the level's prefix
  level lvl = level::ipv4_individual;  ///< which level
  friend bool operator==(const level_key&, const level_key&) = default;
};

/// A space-saving summary of `size` counters: a key counted n times is reported with a count
/// in [n, n + error]; every key counted more than total/size times is in it.
/// Thread safety: a value type.
class space_saving {
 public:
  /// Counters a summary keeps (a linear scan of them per rejection: about 1.5 KiB).
  static constexpr std::size_t size = 64;

  /// One key's count.
  struct item {
    level_key who;            ///< the client
    std::uint64_t count = 0;  ///< its count, at most `error` above the truth
    std::uint64_t error = 0;  ///< overestimate: the count of the key it replaced
  };

  /// Counts `k` once more.
  void add(const level_key& k) noexcept;
  /// The counters in use.
  const item* begin() const noexcept { return items_.data(); }
  const item* end() const noexcept { return items_.data() + used_; }
  /// Forgets everything.
  void clear() noexcept { used_ = 0; }

 private:
  std::array<item, size> items_{};  ///< [0, used_) in use
  std::size_t used_ = 0;
};

/// One worker's rejections per client in the current window of `window` and the one before.
/// Thread safety: note() from the worker, add_to() from any thread; a lock of this worker's
/// own, which the worker takes only on a rejection and the admin thread only when asked.
class rejection_tally {
 public:
  /// Windows of `window` nanoseconds of wall time (aligned to multiples of it).
  explicit rejection_tally(core::nanos window) noexcept : window_(window) {}

  /// A rejection of the client whose keys are `individual` and `network`, at `now`.
  void note(const level_key& individual, const level_key& network, core::nanos now) noexcept;

  /// A merged count: addresses and networks with their counts summed over workers and windows.
  struct merged {
    std::vector<space_saving::item> addresses;  ///< individual keys
    std::vector<space_saving::item> networks;   ///< network keys
  };
  /// Adds this worker's counts of the windows that are recent at `now` (the current one and
  /// the one before) into `out`.
  void add_to(merged& out, core::nanos now) const;

  /// Where the recent windows begin at `now`: the start of the one before the current.
  core::nanos since(core::nanos now) const noexcept { return (now / window_ - 1) * window_; }
  /// The window's length.
  core::nanos window() const noexcept { return window_; }

 private:
  struct window_counts {
    space_saving addresses;
    space_saving networks;
  };
  void roll(core::nanos now) noexcept;

  core::nanos window_;
  mutable spinlock lock_;                 ///< guards what follows
  std::int64_t current_index_ = 0;        ///< now / window_ of `windows_[current_]`
  std::array<window_counts, 2> windows_;  ///< current and previous
  std::size_t current_ = 0;               ///< index of the current window
};

/// The `top` items of `items` by count, highest first (ties by key), each key once with its
/// counts summed.
std::vector<space_saving::item> top_of(std::vector<space_saving::item> items, std::size_t top);

}  // namespace tollgate::limit
