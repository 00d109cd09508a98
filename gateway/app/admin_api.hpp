#pragma once
/// The JSON admin API (DESIGN §10): list bans, lift a ban, and show what the gateway holds on
/// one address (violation counters, ban, limiter state).

#include <boost/json/array.hpp>

#include <memory>
#include <string_view>

#include "gateway/net/admin.hpp"
#include "gateway/net/snapshot.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/store/decision_store.hpp"

namespace tollgate::app {

/// Answers /admin/ requests.
/// Thread safety: used on the control thread, which also swaps `current`.
class admin_api {
 public:
  admin_api(policy::pow_state& pow, store::decision_store& store, const core::clock& clock,
            const std::shared_ptr<const net::snapshot>& current)
      : pow_(pow), store_(store), clock_(clock), current_(current) {}

  /// GET /admin/bans, DELETE /admin/bans/<address>, GET /admin/addresses/<address>.
  net::admin_server::reply handle(std::string_view method, std::string_view path) const;

 private:
  net::admin_server::reply bans() const;
  net::admin_server::reply lift(const core::address& a) const;
  net::admin_server::reply address(const core::address& a) const;
  boost::json::array limits_of(const core::address& a, core::nanos now) const;

  policy::pow_state& pow_;
  store::decision_store& store_;
  const core::clock& clock_;
  const std::shared_ptr<const net::snapshot>& current_;  ///< the configuration in force
};

}  // namespace tollgate::app
