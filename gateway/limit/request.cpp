#include "gateway/limit/request.hpp"

namespace tollgate::limit {

void choose_binding(const limit_request& req, decision& d) noexcept {
  std::uint8_t best = 0;
  if (!d.admitted) {
    for (std::uint8_t i = 1; i < d.count; ++i) {
      if (d.limits[i].wait > d.limits[best].wait) best = i;
    }
  } else {
    std::int64_t fewest = INT64_MAX;
    for (std::uint8_t i = 0; i < d.count; ++i) {
      const limit_outcome& o = d.limits[i];
      const auto& p = req.groups[o.group].params->tiers[static_cast<int>(o.tier)];
      const std::int64_t r = gcra_remaining(o.tat, req.now, p);
      if (r < fewest) {
        fewest = r;
        best = i;
      }
    }
  }
  d.binding = best;
}

}  // namespace tollgate::limit
