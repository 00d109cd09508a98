#include "gateway/limit/request.hpp"

namespace tollgate::limit {

void choose_binding(const limit_request& req, decision& d) noexcept {
  std::uint8_t best = no_binding, shadow = no_binding;
  std::int64_t fewest = INT64_MAX;
  for (std::uint8_t i = 0; i < d.count; ++i) {
    const limit_outcome& o = d.limits[i];
    const limit_spec& spec = *req.groups[o.group].spec;
    if (spec.shadow) {
      if (o.wait > 0 && (shadow == no_binding || o.wait > d.limits[shadow].wait)) shadow = i;
      continue;
    }
    if (!d.admitted) {
      if (o.wait > 0 && (best == no_binding || o.wait > d.limits[best].wait)) best = i;
      continue;
    }
    const std::int64_t r = remaining_of(spec, o, req.now);
    if (r < fewest) {
      fewest = r;
      best = i;
    }
  }
  d.binding = best;
  d.shadow_binding = shadow;
}

}  // namespace tollgate::limit
