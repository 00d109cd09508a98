#include "gateway/bans/manual_bans.hpp"

#include <algorithm>
#include <tuple>

namespace tollgate::bans {

using pow::subject;

namespace {

/// The writers' order: family, then longest prefix first (a group per prefix), then key.
bool before(const manual_ban& a, const manual_ban& b) noexcept {
  return std::tuple(a.block.family, -int{a.block.prefix}, a.block.net) <
         std::tuple(b.block.family, -int{b.block.prefix}, b.block.net);
}

}  // namespace

manual_bans::placed manual_bans::place(const manual_ban& b, std::int64_t now) {
  const std::lock_guard lock(write_);
  prune(now);
  const auto it = std::lower_bound(bans_.begin(), bans_.end(), b, before);
  placed result = placed::added;
  if (it != bans_.end() && it->block == b.block) {
    *it = b;
    result = placed::replaced;
  } else if (bans_.size() >= capacity) {
    return placed::full;
  } else {
    bans_.insert(it, b);
  }
  publish();
  return result;
}

bool manual_bans::lift(const core::key_block& block, std::int64_t now) {
  const std::lock_guard lock(write_);
  prune(now);
  const auto it = std::find_if(bans_.begin(), bans_.end(),
                               [&](const manual_ban& b) { return b.block == block; });
  if (it == bans_.end()) return false;
  bans_.erase(it);
  publish();
  return true;
}

std::vector<manual_ban> manual_bans::list(std::int64_t now) const {
  const std::lock_guard lock(write_);
  std::vector<manual_ban> out;
  for (const auto& b : bans_) {
    if (b.until > now) out.push_back(b);
  }
  return out;
}

void manual_bans::prune(std::int64_t now) {
  std::erase_if(bans_, [&](const manual_ban& b) { return b.until <= now; });
}

void manual_bans::publish() {
  // Seqlock writer (Boehm, "Can seqlocks get along with programming language memory
  // models?", 2012): odd while the copy changes, the stores between fences.
  const std::uint64_t s = seq_.load(std::memory_order_relaxed);
  seq_.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  std::uint32_t groups = 0;
  for (std::size_t i = 0; i < bans_.size(); ++i) {
    const core::key_block& k = bans_[i].block;
    keys_[i].store(k.net, std::memory_order_relaxed);
    ends_[i].store(bans_[i].until, std::memory_order_relaxed);
    const bool first =
        i == 0 || k.family != bans_[i - 1].block.family || k.prefix != bans_[i - 1].block.prefix;
    if (first) ++groups;
    const std::uint64_t g =
        std::uint64_t{k.family == core::family::v6} << 40 | std::uint64_t{k.prefix} << 32;
    const std::uint64_t begin =
        first ? i : (groups_[groups - 1].load(std::memory_order_relaxed) >> 16) & 0xffff;
    groups_[groups - 1].store(g | begin << 16 | (i + 1), std::memory_order_relaxed);
  }
  group_count_.store(groups, std::memory_order_relaxed);
  seq_.store(s + 2, std::memory_order_release);
  count_.store(static_cast<std::uint32_t>(bans_.size()), std::memory_order_release);
}

std::optional<std::int64_t> manual_bans::scan(core::family f, std::uint64_t key,
                                              std::int64_t now) const noexcept {
  std::optional<std::int64_t> until;
  const std::uint32_t n =
      std::min<std::uint32_t>(group_count_.load(std::memory_order_relaxed), max_groups);
  for (std::uint32_t g = 0; g < n; ++g) {
    const std::uint64_t packed = groups_[g].load(std::memory_order_relaxed);
    if ((f == core::family::v6) != ((packed >> 40) & 1)) continue;
    const unsigned prefix = (packed >> 32) & 0xff;
    const std::uint64_t masked =
        key & (f == core::family::v4 ? core::mask32(prefix) : core::mask64(prefix));
    // A torn read (the writer was busy) is retried by the caller; the bounds keep it inside.
    std::size_t lo = std::min<std::size_t>((packed >> 16) & 0xffff, capacity);
    std::size_t hi = std::min<std::size_t>(packed & 0xffff, capacity);
    // The search may end at the group's end: that slot is another group's, or a ban lifted
    // since (slots past the last ban keep their old keys), never this group's.
    const std::size_t group_end = hi;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (keys_[mid].load(std::memory_order_relaxed) < masked) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo < group_end && keys_[lo].load(std::memory_order_relaxed) == masked) {
      const std::int64_t end = ends_[lo].load(std::memory_order_relaxed);
      if (end > now && (!until || end > *until)) until = end;
    }
  }
  return until;
}

std::optional<std::int64_t> manual_bans::banned_until(const subject& individual,
                                                      std::int64_t now) const noexcept {
  if (count_.load(std::memory_order_acquire) == 0) return std::nullopt;  // the usual case
  const core::family f =
      core::is_v4(static_cast<core::level>(individual.level)) ? core::family::v4 : core::family::v6;
  for (;;) {
    const std::uint64_t s = seq_.load(std::memory_order_acquire);
    if (s & 1) continue;  // a writer is between its two stores: a few microseconds at most
    const auto until = scan(f, individual.key, now);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq_.load(std::memory_order_relaxed) == s) return until;
  }
}

}  // namespace tollgate::bans
