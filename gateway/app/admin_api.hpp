#pragma once
/// The JSON admin API (docs/design.md §10): bans (list, place by hand, lift), what the gateway
/// holds on one address (violation counters, ban, limiter state), a reset of an address or a
/// network, and the most limited clients. Every request that changes state leaves one audit line.

#include <boost/json/array.hpp>

#include <memory>
#include <string_view>
#include <vector>

#include "gateway/app/attack_watch.hpp"
#include "gateway/app/overrides.hpp"
#include "gateway/app/standing.hpp"
#include "gateway/core/key_block.hpp"
#include "gateway/limit/top_limited.hpp"
#include "gateway/net/admin.hpp"
#include "gateway/net/snapshot.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/store/decision_store.hpp"

namespace tollgate::app {

/// What the admin API reads and changes.
struct admin_context {
  policy::pow_state& pow;                               ///< counters, bans
  store::decision_store& store;                         ///< limiter state
  const core::clock& clock;                             ///< now
  const std::shared_ptr<const net::snapshot>& current;  ///< the configuration in force
  std::vector<const limit::rejection_tally*> limited;   ///< every worker's rejections
  bool shared_store = false;                            ///< store: redis
  override_keeper* overrides = nullptr;                 ///< the overrides (docs/design.md §15)
  attack_watch* attack = nullptr;                       ///< attack mode (docs/design.md §16)
  standing_keeper* standing = nullptr;  ///< bans and resets shared by replicas (§18)
};

/// ` replica=<name> shared=yes|no` for an audit line when the standing is shared (docs/design.md
/// §18), else "": `unshared` is why Redis did not take the change ("" when it did).
std::string shared_detail(const admin_context& c, const std::string& unshared);

/// Answers /admin/ requests.
/// Thread safety: used on the control thread, which also swaps `current`.
class admin_api {
 public:
  /// Longest manual ban.
  static constexpr core::nanos max_ban = 30 * 24 * 3600 * core::ns_per_s;

  explicit admin_api(admin_context c) : c_(std::move(c)) {}

  /// GET /admin/bans; PUT and DELETE /admin/bans/<address or CIDR>; GET /admin/addresses/
  /// <address>; DELETE /admin/addresses/<address or CIDR> (reset); GET /admin/limited?top=N;
  /// GET and PUT /admin/overrides, DELETE /admin/overrides/<id>; GET and DELETE /admin/clients/
  /// <address or limit/key>.
  net::admin_server::reply handle(const net::admin_server::request& r) const;

 private:
  using reply = net::admin_server::reply;
  using request = net::admin_server::request;

  reply bans() const;
  reply ban(const request& r, std::string_view target) const;
  reply lift(const request& r, std::string_view target) const;
  reply address(std::string_view target) const;
  reply reset(const request& r, std::string_view target) const;
  reply limited(const request& r) const;
  /// GET and DELETE /admin/clients/<address> or /admin/clients/<limit>/<key>: a client on the
  /// penalty ladder (docs/design.md §16).
  reply clients(const request& r, std::string_view target) const;
  /// GET and PUT /admin/attack-mode; DELETE /admin/attack-mode/<category> (docs/design.md §16).
  reply attack_mode(const request& r, std::string_view target) const;
  /// GET /admin/overrides; PUT /admin/overrides; DELETE /admin/overrides/<id>.
  reply overrides(const request& r) const;
  reply put_override(const request& r) const;
  reply delete_override(const request& r, std::string_view id) const;
  boost::json::array limits_of(const core::address& a, core::nanos now) const;
  /// The manual bans in force whose block overlaps `b` (only those that hold it whole, when
  /// `holding`), as text.
  boost::json::array manual_bans_over(const core::key_block& b, core::nanos now,
                                      bool holding = false) const;

  admin_context c_;
};

}  // namespace tollgate::app
