#pragma once
/// Bans an operator places through the admin API (docs/design.md §10): an address or a whole
/// network for a given time, in every category, beside the automatic bans of violation_tables. A
/// bounded set of blocks; every request asks whether its client is inside one of them, so the
/// lookup takes no lock: readers follow a sequence counter (a seqlock) that only the admin
/// thread writes, and pay one load when there are no manual bans at all.

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gateway/core/key_block.hpp"
#include "gateway/pow/lru_map.hpp"

namespace tollgate::bans {

/// A client as the violation tables key it (its individual key and level).
using pow::subject;

/// One manual ban.
struct manual_ban {
  core::key_block block;   ///< the address or network banned
  std::int64_t since = 0;  ///< when it was placed (ns)
  std::int64_t until = 0;  ///< when it ends (ns)
  std::string reason;      ///< the operator's note, may be empty
};

/// The manual bans in force.
/// Thread safety: banned_until from any thread without a lock; the rest from any thread,
/// serialised by a mutex of their own (the admin API's, never the request path's).
class manual_bans {
 public:
  /// Most manual bans held at once (addresses and networks together).
  static constexpr std::size_t capacity = 1024;

  /// What place() did.
  enum class placed : std::uint8_t { added, replaced, full };
  /// Bans `b.block` until `b.until` (replacing a ban on the same block); expired bans are
  /// dropped first. `full` when `capacity` bans are in force.
  placed place(const manual_ban& b, std::int64_t now);
  /// Lifts the ban on exactly `block`; whether there was one in force at `now`.
  bool lift(const core::key_block& block, std::int64_t now);

  /// The latest end of the bans in force at `now` whose block holds the individual key
  /// `individual` (the request path).
  std::optional<std::int64_t> banned_until(const subject& individual,
                                           std::int64_t now) const noexcept;

  /// The bans in force at `now`, in block order.
  std::vector<manual_ban> list(std::int64_t now) const;

 private:
  /// A group of bans of one family and prefix length: slots [begin, end), sorted by key.
  static constexpr std::size_t max_groups = 33 + 65;
  void prune(std::int64_t now);
  void publish();
  std::optional<std::int64_t> scan(core::family f, std::uint64_t key,
                                   std::int64_t now) const noexcept;

  mutable std::mutex write_;      ///< serialises writers; guards bans_
  std::vector<manual_ban> bans_;  ///< the writers' copy, sorted (family, prefix desc, net)
  /// The readers' copy: keys and ends by slot, groups packed as
  /// family << 40 | prefix << 32 | begin << 16 | end. Read between two equal even values
  /// of seq_; written only between an odd and the next even one.
  std::array<std::atomic<std::uint64_t>, capacity> keys_{};
  std::array<std::atomic<std::int64_t>, capacity> ends_{};
  std::array<std::atomic<std::uint64_t>, max_groups> groups_{};
  std::atomic<std::uint32_t> group_count_{0};
  std::atomic<std::uint64_t> seq_{0};
  std::atomic<std::uint32_t> count_{0};  ///< bans published: 0 spares the request path a scan
};

}  // namespace tollgate::bans
