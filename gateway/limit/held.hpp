#pragma once
/// The requests one worker holds under its limits' on_excess (docs/design.md §16 "Delay instead
/// of reject"), counted per limit against that limit's max_delayed. A request takes its places
/// before the store is asked and keeps those of the limits that hold it until it goes on, so a
/// worker never holds more than max_delayed under a limit, however many decisions are pending.

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "gateway/limit/request.hpp"

namespace tollgate::limit {

/// Held requests per limit, by the limit's scope (stable across reloads): few limits have
/// on_excess, so a short list searched in order.
/// Thread safety: one worker's, no lock.
class hold_counts {
 public:
  /// Takes a place under the limit of `scope` if fewer than `most` are taken.
  bool take(std::uint32_t scope, std::uint32_t most) {
    for (auto& [s, n] : counts_) {
      if (s != scope) continue;
      if (n >= most) return false;
      ++n;
      return true;
    }
    if (most == 0) return false;
    counts_.emplace_back(scope, 1);
    return true;
  }
  /// Gives back a place taken under the limit of `scope`.
  void give_back(std::uint32_t scope) noexcept {
    for (auto& [s, n] : counts_) {
      if (s == scope && n > 0) {
        --n;
        return;
      }
    }
  }
  /// Places taken under the limit of `scope`.
  std::uint32_t taken(std::uint32_t scope) const noexcept {
    for (const auto& [s, n] : counts_) {
      if (s == scope) return n;
    }
    return 0;
  }

 private:
  std::vector<std::pair<std::uint32_t, std::uint32_t>> counts_;  ///< (scope, places taken)
};

/// One request's places in a worker's hold_counts, given back when it goes (or sooner).
/// Thread safety: its worker's.
class held_places {
 public:
  held_places() = default;
  held_places(const held_places&) = delete;
  held_places& operator=(const held_places&) = delete;
  ~held_places() { release(); }

  /// Takes a place for every group of `req` whose limit has on_excess; a group whose limit
  /// has max_delayed requests held already is marked in req.no_delay instead, so that a wait
  /// there refuses the request.
  void take(hold_counts& counts, limit_request& req) {
    for (std::uint8_t g = 0; g < req.group_count; ++g) {
      const limit_spec& spec = *req.groups[g].spec;
      if (spec.delay == 0) continue;
      if (!counts.take(spec.scope, spec.max_delayed)) {
        req.no_delay |= static_cast<std::uint16_t>(1u << g);
        continue;
      }
      counts_ = &counts;
      scopes_[g] = spec.scope;
      groups_ |= static_cast<std::uint16_t>(1u << g);
    }
  }
  /// Keeps the places of the groups `held` (decision::held), gives back the others.
  void keep(std::uint16_t held) noexcept { give_back(static_cast<std::uint16_t>(groups_ & ~held)); }
  /// Gives back every place.
  void release() noexcept { give_back(groups_); }
  /// Whether it holds no place.
  bool empty() const noexcept { return groups_ == 0; }

 private:
  void give_back(std::uint16_t groups) noexcept {
    for (std::uint8_t g = 0; groups != 0 && g < max_groups; ++g) {
      if ((groups >> g & 1) == 0) continue;
      counts_->give_back(scopes_[g]);
      groups &= static_cast<std::uint16_t>(~(1u << g));
      groups_ &= static_cast<std::uint16_t>(~(1u << g));
    }
  }

  hold_counts* counts_ = nullptr;                   ///< where its places are
  std::array<std::uint32_t, max_groups> scopes_{};  ///< per group with a place: its limit's
  std::uint16_t groups_ = 0;                        ///< bit g: group g holds a place
};

}  // namespace tollgate::limit
