#pragma once
/// What a reload changes: the settings of a new configuration that take effect only at restart.
///
/// A running process keeps its sockets, threads and process-wide tables across a reload, so a
/// new value for what they were built from cannot apply: the listeners (bound, with their
/// PROXY protocol and TLS on or off fixed per socket), the admin listener, the worker threads,
/// each worker's share of limits.max_connections, the limiter store, and the PoW state (its
/// secret, challenge lifetime, replay cache and violation counters). Everything else applies
/// to requests that start after the reload: routes, upstreams, policies, the other limits,
/// trusted proxies, logging (spdlog's level changes live), TLS certificate and key files.

#include <string>
#include <vector>

#include "gateway/config/gateway.hpp"

namespace tollgate::config {

/// The restart-only settings of `next` that differ from `running`, each by its dotted key as
/// written in the files ("listeners.public.port", "workers", "admin.port", "store.type",
/// "pow.secret_env", "pow_counters.max_counter", ...); a listener present in only one of the
/// two is named alone ("listeners.extra"). Empty when a reload applies all of `next`. In file
/// order: listeners, admin, workers, limits, pow, store, pow_counters.
std::vector<std::string> restart_only_changes(const gateway_config& running,
                                              const gateway_config& next);

/// `next` with every restart-only setting as it is in `running`: what a reload puts in force,
/// so that the configuration in force describes what the process runs with. The listeners are
/// `running`'s, by name and in order, so that a session of a TLS listener always finds its
/// context; each TLS listener takes the certificate and key files of the TLS listener of the
/// same name in `next`, when there is one (certificates change live), and keeps its own
/// otherwise.
gateway_config keep_restart_only(const gateway_config& running, gateway_config next);

}  // namespace tollgate::config
