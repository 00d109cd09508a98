#include "gateway/limit/top_limited.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace tollgate::limit {

void space_saving::add(const level_key& k) noexcept {
  // One pass finds the key or, failing that, the smallest counter (Metwally et al.: the new
  // key takes it over, with its count as the possible overestimate).
  std::size_t smallest = 0;
  for (std::size_t i = 0; i < used_; ++i) {
    if (items_[i].who == k) {
      ++items_[i].count;
      return;
    }
    if (items_[i].count < items_[smallest].count) smallest = i;
  }
  if (used_ < size) {
    items_[used_++] = {k, 1, 0};
    return;
  }
  item& victim = items_[smallest];
  victim = {k, victim.count + 1, victim.count};
}

void rejection_tally::roll(core::nanos now) noexcept {
  const std::int64_t index = now / window_;
  if (index == current_index_) return;
  // The current window becomes the one before, or, after a quiet window, both start empty.
  current_ = 1 - current_;
  windows_[current_].addresses.clear();
  windows_[current_].networks.clear();
  if (index != current_index_ + 1) {
    windows_[1 - current_].addresses.clear();
    windows_[1 - current_].networks.clear();
  }
  current_index_ = index;
}

void rejection_tally::note(const level_key& individual, const level_key& network,
                           core::nanos now) noexcept {
  const std::lock_guard guard(lock_);
  roll(now);
  windows_[current_].addresses.add(individual);
  windows_[current_].networks.add(network);
}

void rejection_tally::add_to(merged& out, core::nanos now) const {
  const std::lock_guard guard(lock_);
  const std::int64_t index = now / window_;
  auto take = [&](const window_counts& w) {
    out.addresses.insert(out.addresses.end(), w.addresses.begin(), w.addresses.end());
    out.networks.insert(out.networks.end(), w.networks.begin(), w.networks.end());
  };
  // Windows are rolled by rejections: read as if rolled to `now`.
  if (index == current_index_) {
    take(windows_[current_]);
    take(windows_[1 - current_]);
  } else if (index == current_index_ + 1) {
    take(windows_[current_]);
  }
}

std::vector<space_saving::item> top_of(std::vector<space_saving::item> items, std::size_t top) {
  struct key_hash {
    std::size_t operator()(const level_key& k) const noexcept {
      return std::hash<std::uint64_t>{}(k.key * 0x9e3779b97f4a7c15ULL ^
                                        static_cast<std::uint64_t>(k.lvl));
    }
  };
  std::unordered_map<level_key, space_saving::item, key_hash> sums;
  for (const auto& i : items) {
    auto& s = sums.try_emplace(i.who, space_saving::item{i.who, 0, 0}).first->second;
    s.count += i.count;
    s.error += i.error;
  }
  std::vector<space_saving::item> out;
  out.reserve(sums.size());
  for (const auto& [k, i] : sums)
    out.push_back(i);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.count != b.count) return a.count > b.count;
    if (a.who.lvl != b.who.lvl) return a.who.lvl < b.who.lvl;
    return a.who.key < b.who.key;
  });
  if (out.size() > top) out.resize(top);
  return out;
}

}  // namespace tollgate::limit
