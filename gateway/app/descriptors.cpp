#include "gateway/app/descriptors.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace tollgate::app {

descriptor_budget fit_descriptors(const config::gateway_config& g, unsigned workers,
                                  std::uint64_t limit) {
  const std::uint64_t threads = std::max(1u, workers);
  descriptor_budget b;
  b.limit = limit;
  // Each worker binds each listener (SO_REUSEPORT); the admin listener is one socket.
  b.fixed = g.listeners.size() * threads + 1 + g.admin.max_connections;
  for (const auto& u : g.upstreams)
    b.fixed += u.endpoints.size() * u.max_idle_connections * threads;
  b.fixed += descriptor_reserve + 4 * threads;
  const std::uint64_t room = limit > b.fixed ? (limit - b.fixed) / 2 : 0;
  b.max_connections =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(room, g.limits.max_connections));
  return b;
}

std::uint64_t raise_descriptor_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : r.rlim_cur;
}

}  // namespace tollgate::app
