#pragma once
/// What the admin listener answers (docs/design.md §10): /metrics (the exposition of the workers'
/// counters and of what is read at scrape time), /readyz (draining, the store's state) and the
/// admin API, each a named function of the running process's parts.

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "gateway/app/attack_watch.hpp"
#include "gateway/app/overrides.hpp"
#include "gateway/app/standing.hpp"
#include "gateway/core/clock.hpp"
#include "gateway/metrics/exposition.hpp"
#include "gateway/net/admin.hpp"
#include "gateway/net/server.hpp"
#include "gateway/net/snapshot.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/store/decision_store.hpp"

namespace tollgate::app {

/// The running process's parts the admin listener reads.
struct admin_sources {
  store::decision_store& store;                         ///< limiter state, its own report
  policy::pow_state& pow;                               ///< violation tables, bans
  const core::clock& clock;                             ///< now
  const std::shared_ptr<const net::snapshot>& current;  ///< the configuration in force
  net::server& server;                                  ///< the workers' counters
  metrics::registry& metrics;                           ///< label tables, reload counters
  const bool& draining;                                 ///< a stop signal came: not ready
  std::string_view version;                             ///< tollgate_build_info
  override_keeper& overrides;                           ///< the admin API's overrides
  attack_watch& attack;                                 ///< attack mode (docs/design.md §16)
  standing_keeper& standing;  ///< bans and resets shared by replicas (docs/design.md §18)
};

/// The admin listener's answers.
/// Thread safety: the control thread (the admin listener's, which also swaps `current`).
class admin_endpoints {
 public:
  explicit admin_endpoints(admin_sources s) : s_(s), shared_store_(s.store.report().shared) {}

  /// GET /metrics: the exposition, with what `admin` (the listener answering) itself counted.
  std::string metrics(const net::admin_server& admin) const;
  /// GET /readyz: whether to take traffic, and the line that says so.
  std::pair<bool, std::string> ready() const;
  /// A request under /admin/.
  net::admin_server::reply api(const net::admin_server::request& r) const;

  /// The handlers of `admin` (made later, with these handlers), which answer through this
  /// and require `token` (none when empty).
  net::admin_server::handlers handlers(const std::unique_ptr<net::admin_server>& admin,
                                       std::string token) const;

 private:
  admin_sources s_;    ///< what is read
  bool shared_store_;  ///< store: redis (a reset leaves Redis's state alone)
};

}  // namespace tollgate::app
