#pragma once
/// Floods stay local (docs/design.md §11): a worker remembers the keys Redis last found over a
/// limit, with the tat Redis reported, and answers their next requests 429 itself until that tat
/// lets one through, so an attack does not become Redis load (envoyproxy/ratelimit's local
/// cache, with the exact GCRA instead of a window). One table per worker: no lock.
///
/// It never rejects what Redis would admit: a rejection commits nothing, and Redis's tat of a
/// key only grows with time's passing accounted for (admissions push it forward), so the tat
/// remembered is at most Redis's. The remembered tat is on the gateway's clock (the request's
/// now plus the tat − now Redis returned), so clocks that differ do not matter either.

#include <array>
#include <cstdint>
#include <memory>

#include "gateway/limit/request.hpp"

namespace tollgate::store {

/// Thread safety: one thread (a worker's).
class over_limit_cache {
 public:
  /// Most entries held (a power of two): direct-mapped, a new key takes an old one's place.
  static constexpr std::size_t capacity = 8192;

  over_limit_cache() : slots_(std::make_unique<std::array<entry, capacity>>()) {}

  /// Answers `req` into `out` when a remembered tat of one of its enforced limits rejects it
  /// now; false when the request must go to Redis.
  bool reject(const limit::limit_request& req, limit::decision& out) const noexcept {
    std::array<const entry*, limit::max_groups> found{};
    bool rejects = false;
    for (std::uint8_t g = 0; g < req.group_count; ++g) {
      const limit::limit_spec& spec = *req.groups[g].spec;
      if (spec.shadow) continue;
      const entry& e = slot(spec.scope, req.groups[g].key);
      if (e.scope != spec.scope || e.key != req.groups[g].key) continue;
      for (std::size_t t = 0; t < 2; ++t) {
        const limit::gcra_params& p = spec.tiers[t];
        if (p.burst == 0 || e.tat[t] <= req.now || e.params[t] != p) continue;
        found[g] = &e;
        // Within the limit's delay the request is Redis's to hold, not the cache's to refuse.
        rejects |=
            !limit::gcra_check(e.tat[t], req.now, req.cost, p, limit::delay_of(req, g)).allowed;
      }
    }
    if (!rejects) return false;
    // Every tier is told, from what is remembered or as unknown (tat = now: not binding).
    out = limit::decision{};
    for (std::uint8_t g = 0; g < req.group_count; ++g) {
      const limit::limit_spec& spec = *req.groups[g].spec;
      if (spec.is_quota()) {  // never remembered: told as unknown (nothing spent, not binding)
        const core::nanos end = core::window_of(spec.quota.period, req.now).end;
        out.limits[out.count++] = {end, 0, g, limit::tier::short_term, 0};
        continue;
      }
      for (std::size_t t = 0; t < 2; ++t) {
        const limit::gcra_params& p = spec.tiers[t];
        if (p.burst == 0) continue;
        const bool known = found[g] != nullptr && found[g]->params[t] == p;
        const limit::nanos stored = known ? found[g]->tat[t] : req.now;
        const limit::gcra_result r =
            limit::gcra_check(stored, req.now, req.cost, p, limit::delay_of(req, g));
        out.limits[out.count++] = {r.tat, r.allowed ? 0 : r.wait, g, static_cast<limit::tier>(t),
                                   0};
      }
    }
    limit::choose_binding(req, out);
    return true;
  }

  /// Remembers the tiers of `req`'s enforced limits that `d` (Redis's rejection) says reject.
  void remember(const limit::limit_request& req, const limit::decision& d) noexcept {
    if (d.admitted) return;
    for (std::uint8_t i = 0; i < d.count; ++i) {
      const limit::limit_outcome& o = d.limits[i];
      const limit::limit_spec& spec = *req.groups[o.group].spec;
      // Quotas are left to Redis: a count has no tat to remember.
      if (o.wait <= 0 || spec.shadow || spec.is_quota()) continue;
      const std::uint64_t key = req.groups[o.group].key;
      entry& e = slot(spec.scope, key);
      if (e.scope != spec.scope || e.key != key) e = entry{spec.scope, key, {}, {}};
      const auto t = static_cast<std::size_t>(o.tier);
      // A tier that admitted is not remembered: its tat in the decision is the one a commit
      // would have written, and nothing was committed.
      e.tat[t] = o.tat;
      e.params[t] = spec.tiers[t];
    }
  }

  /// Forgets everything (a reload may change what the limits are).
  void clear() noexcept { slots_->fill(entry{}); }

 private:
  struct entry {
    std::uint32_t scope = 0;                     ///< the limit (0: empty)
    std::uint64_t key = 0;                       ///< its key
    std::array<limit::nanos, 2> tat{};           ///< per tier: Redis's tat then (0: unknown)
    std::array<limit::gcra_params, 2> params{};  ///< the tier's constants then
  };

  const entry& slot(std::uint32_t scope, std::uint64_t key) const noexcept {
    return (*slots_)[index(scope, key)];
  }
  entry& slot(std::uint32_t scope, std::uint64_t key) noexcept {
    return (*slots_)[index(scope, key)];
  }
  static std::size_t index(std::uint32_t scope, std::uint64_t key) noexcept {
    std::uint64_t h = (key ^ (std::uint64_t{scope} << 32 | scope)) * 0x9e3779b97f4a7c15ULL;
    return static_cast<std::size_t>(h >> 51) & (capacity - 1);
  }

  std::unique_ptr<std::array<entry, capacity>> slots_;  ///< the table
};

}  // namespace tollgate::store
