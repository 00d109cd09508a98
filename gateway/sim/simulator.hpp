#pragma once
/// One configuration's gateway, offline: the gateway's own admission (gateway/admission) over
/// the compiled policy and the in-process limiter store, with each request's own time as
/// `now`. No sockets, no upstream; proofs of work are never sent and admission's effects are
/// never applied, so no violation is recorded. A line the gateway logged `banned` is replayed
/// as a ban on its client at that instant (the violations behind it are not in the log).
/// Consumer tiers come from the logged tier and the tier sources a log can feed, in the
/// policy's order (logged_tiers.hpp).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/admission/admission.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/core/key_block.hpp"
#include "gateway/core/outcome.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/policy/gate.hpp"
#include "gateway/policy/router.hpp"
#include "gateway/sim/attack_replay.hpp"
#include "gateway/sim/log_reader.hpp"

namespace tollgate::sim {

/// What the simulation made of one request.
struct simulated {
  std::uint16_t category = 0;                     ///< index among the policy's categories
  core::outcome result = core::outcome::allowed;  ///< the answer (never error)
  const limit::limit_spec* limit = nullptr;    ///< the binding limit (limited, challenged) or the
                                               ///< shadowed one (shadow_limited); else null
  limit::tier tier = limit::tier::short_term;  ///< its tier
  bool exempt = false;                         ///< on the access allow list
  std::uint32_t unkeyed = 0;                   ///< slots of limits whose key the request lacked
  /// Its consumer tier (docs/design.md §15), by index among the policy's; policy::no_tier
  /// without tiers.
  std::uint8_t consumer_tier = policy::no_tier;

  /// Whether the request went upstream.
  bool admitted() const noexcept { return core::forwarded(result); }
  /// The same answer with the same binding limit (by name and tier).
  bool same_as(const simulated& o) const noexcept;
};

/// Appends `<limit>.<tier>` of `o`, or nothing when it has no limit.
void append_limit(std::string& out, const simulated& o);

/// Thread safety: none (one simulation, one thread).
class simulator {
 public:
  /// Compiles `c` and makes its store with the configuration's table capacities. A global
  /// limit is one bucket here; the gateway splits it per worker (docs/design.md §3).
  explicit simulator(config::gateway_config c);
  simulator(const simulator&) = delete;
  simulator& operator=(const simulator&) = delete;

  /// The route of `r`, carrying the WebSocket upgrade headers when `upgrade`; null when its
  /// target is no valid path (the gateway answers 400 and logs nothing).
  const policy::route* route(const log_record& r, bool upgrade);
  /// Decides `r` at r.time as the gateway would have; false when its target is no valid path.
  /// Requests are decided in time order: attack mode's ticks follow their times.
  bool decide(const log_record& r, bool upgrade, simulated& out);
  /// Prefetches the store slots `r`, routed to `to`, will use: called one request ahead of
  /// decide, so that their cache misses overlap the work in between. Changes no state.
  void prefetch(const log_record& r, const policy::route& to, bool upgrade);
  /// The same for `r` already routed to `to` (by route(r, upgrade)).
  void decide(const log_record& r, const policy::route& to, bool upgrade, simulated& out);
  /// The category of `r` when its line shows a CORS preflight the gateway answered itself and
  /// that category (by its logged name) has `cors` here; null otherwise. Such a preflight is
  /// replayed as the gateway answers it: charged nothing.
  const policy::category_limits* preflight_category(const log_record& r) const;

  /// The configuration.
  const config::gateway_config& config() const noexcept { return config_; }
  /// Its compiled policy, tier sources as with_logged_tiers makes them.
  const policy::compiled_policy& policy() const noexcept { return policy_; }
  /// Attack mode as replayed so far, and the time series of every category.
  const attack_replay& attack() const noexcept { return attack_; }

 private:
  /// Bans the client of `r` at r.time, for that instant; the block to lift afterwards.
  std::optional<core::key_block> ban_for(const log_record& r);

  config::gateway_config config_;   ///< as loaded
  policy::compiled_policy policy_;  ///< limits per category
  attack_replay attack_;            ///< attack mode's monitors, ticked from the log's times
  policy::router router_;           ///< routes
  limit::memory_store store_;       ///< limiter state, `now` from the log
  policy::pow_state pow_;           ///< bans and counters: stay empty
  policy::gate gate_;               ///< bans (none), proofs, violations' requirements
  std::string path_;                ///< the normalised path of the request in hand
  policy::route preflight_route_;   ///< the route of a logged preflight in hand
  admission::record record_;        ///< reused request after request
};

}  // namespace tollgate::sim
