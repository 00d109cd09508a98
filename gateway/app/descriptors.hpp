#pragma once
/// File descriptors at start: the process's soft RLIMIT_NOFILE raised to its hard limit, and
/// the connections that fit in it. Every client connection may hold two descriptors (its own
/// and its upstream's); listeners, the admin listener's connections, the upstream pools' idle
/// connections and a reserve for everything else (logs, Redis, the event loops) come first.
/// A limit too small for `limits.max_connections` lowers it, with a warning: a gateway that
/// runs out of descriptors stops accepting on every listener at once, while one at its
/// connection cap still refuses only the newcomers, cheaply, and makes room from idle ones.

#include <cstdint>

#include "gateway/config/gateway.hpp"

namespace tollgate::app {

/// What the descriptors allow.
struct descriptor_budget {
  std::uint64_t limit = 0;            ///< the soft limit, raised as far as the hard one
  std::uint64_t fixed = 0;            ///< reserved before client connections
  std::uint32_t max_connections = 0;  ///< client connections that fit, at most configured
};

/// Descriptors reserved for things other than the event loops' own: files, Redis links,
/// resolver sockets, and each worker's epoll, eventfd and timerfd.
inline constexpr std::uint64_t descriptor_reserve = 64;

/// The budget of `g` run by `workers` threads within `limit` descriptors (pure).
descriptor_budget fit_descriptors(const config::gateway_config& g, unsigned workers,
                                  std::uint64_t limit);

/// Raises the soft RLIMIT_NOFILE to the hard limit and returns it.
std::uint64_t raise_descriptor_limit();

}  // namespace tollgate::app
