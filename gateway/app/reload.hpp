#pragma once
/// A configuration reload (SIGHUP, docs/design.md §2): the files read off the control thread, then
/// put in force for requests that start afterwards, or logged and counted when they cannot be.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gateway/config/gateway.hpp"
#include "gateway/core/log_file.hpp"
#include "gateway/core/siphash.hpp"
#include "gateway/metrics/exposition.hpp"
#include "gateway/net/server.hpp"
#include "gateway/net/snapshot.hpp"
#include "gateway/policy/pow_gate.hpp"

namespace tollgate::app {

/// Seconds since 1970, now.
double unix_seconds_now();

/// What a reload needs of the running process.
struct reload_context {
  const std::string& path;                        ///< the gateway file
  core::siphash_key identity_key;                 ///< the process's key for identity values
  metrics::registry& metrics;                     ///< label tables and reload counters
  policy::pow_state& pow;                         ///< process-wide PoW state
  net::server& server;                            ///< where the new snapshot goes
  std::shared_ptr<const net::snapshot>& current;  ///< the snapshot in force; replaced
  core::log_file& access_log;                     ///< reopened, or pointed elsewhere
  /// Called with `current` already the new snapshot and before any worker has it: what the
  /// snapshot must carry from its first request (attack mode's levels, docs/design.md §16).
  std::function<void()> settle = {};
};

/// What a reload read from the files: the configuration, or why there is none.
struct reload_files {
  std::optional<config::gateway_config> loaded;  ///< read and checked
  std::string error;                             ///< otherwise, what was wrong
};

/// Puts `files`, read by a reload, in force for requests that start afterwards. Each changed
/// setting that takes effect only at restart is logged by name and keeps its running value;
/// the rest applies, the logging level included. A file that cannot be used is logged and
/// counted, and the running configuration stays.
void reload(const reload_context& r, reload_files files);

}  // namespace tollgate::app
