#pragma once
/// One complete, immutable configuration as the request path uses it. A reload builds a new
/// snapshot off the hot path and swaps it in whole.

#include <atomic>
#include <memory>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/identity/jwt.hpp"
#include "gateway/metrics/exposition.hpp"
#include "gateway/net/asio.hpp"
#include "gateway/policy/challenge_page.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/policy/router.hpp"
#include "gateway/policy/tenants.hpp"

namespace boost::asio::ssl {
class context;
}

namespace tollgate::net {

/// The TLS context of every listener of `c` (null for plain ones), certificates and keys
/// loaded now; throws config::error naming the listener's key when one cannot be loaded.
std::vector<std::shared_ptr<asio::ssl::context>> make_tls_contexts(const config::gateway_config& c);

/// The TLS context of every upstream of `c` (null for plain ones): trust, verification and
/// the client certificate loaded now; throws config::error naming the upstream's key when a
/// file cannot be loaded.
std::vector<std::shared_ptr<asio::ssl::context>> make_upstream_contexts(
    const config::gateway_config& c);

/// The gateway configuration, compiled.
/// Thread safety: immutable; shared by every worker.
struct snapshot {
  config::gateway_config config;   ///< as loaded
  policy::compiled_policy policy;  ///< limits per category of the top level
  /// The `hosts` entries (docs/design.md §15, "Tenants (per Host)"), each with its own policy
  /// and routes; `router` looks at them first.
  policy::tenants hosts;
  policy::router router;        ///< routes
  policy::challenge_page page;  ///< the browsers' 428 page
  /// Verifies tokens (identity.jwt, docs/design.md §15); null without one. Shared with the
  /// snapshot before when the key set comes from an unchanged jwks_url, whose fetcher keeps
  /// its keys fresh.
  std::shared_ptr<identity::verifier> jwt;
  std::vector<std::vector<tcp::endpoint>> upstream_endpoints;  ///< per upstream, resolved
  /// Metric label index per compiled category (by category_limits::index: the top level's,
  /// then each host entry's).
  std::vector<std::uint16_t> category_metric;
  std::vector<std::uint16_t> upstream_metric;  ///< metric label index per upstream
  std::vector<std::uint16_t> reason_metric;    ///< metric label index per violation reason
  std::vector<std::size_t> reason_slot;        ///< pow_state::slot per violation reason
  /// Per compiled category (by index), the label index (`level`) of each of its limits, by slot.
  std::vector<std::vector<std::uint16_t>> limit_metric;
  /// Per compiled category (by index), the label index (`consumer_tier`) of each tier of its
  /// policy, by tier (docs/design.md §15); empty for a policy without tiers.
  std::vector<std::vector<std::uint16_t>> tier_metric;
  bool consumer_tiers = false;  ///< some policy has tiers: tier_metric is not all empty
  /// Per listener, its TLS context (null: plain). Built with the snapshot, so a reload picks
  /// up renewed certificates for new connections.
  std::vector<std::shared_ptr<asio::ssl::context>> tls;
  /// Every header field a listener forwards a client certificate's facts in
  /// (`client_cert_headers`, docs/design.md §17): dropped from what clients send, on every
  /// listener.
  std::vector<std::string> certificate_fields;
  /// Per upstream, its TLS context (null: plain), shared by every worker's connections to it.
  std::vector<std::shared_ptr<asio::ssl::context>> upstream_tls;
  /// Distinct for every snapshot the process builds (1, 2, ...): what caches of per-snapshot
  /// state compare, since a later snapshot may be allocated at the address of a freed one.
  std::uint64_t generation = 0;
  /// Per upstream and endpoint, until when a worker has ejected it (steady clock, ns since its
  /// epoch): tollgate_upstream_endpoint_up. Written on an ejection only.
  mutable std::vector<std::unique_ptr<std::atomic<std::int64_t>[]>> ejected_until;
  /// Every category's attack mode status (docs/design.md §16), by index: written by the attack
  /// watch on the control thread each second, read by the workers per request.
  mutable policy::attack_board attack{0};

  /// Compiles `c`; resolves every upstream endpoint now (throws config::error when a name
  /// does not resolve).
  snapshot(config::gateway_config c, core::siphash_key key, metrics::registry& metrics,
           policy::pow_state& pow);

  /// The TLS context of listener `name`, or null.
  std::shared_ptr<asio::ssl::context> tls_context(std::string_view name) const {
    for (std::size_t i = 0; i < config.listeners.size(); ++i) {
      if (config.listeners[i].name == name) return tls[i];
    }
    return nullptr;
  }
  /// The index of `category` (of `policy` or of a host entry's) among every category.
  std::size_t index_of(const policy::category_limits& category) const noexcept {
    return category.index;
  }
  /// Its policies: the top level's, then each host entry's.
  std::vector<const policy::compiled_policy*> policies() const {
    std::vector<const policy::compiled_policy*> out{&policy};
    for (const policy::tenant& t : hosts.entries())
      out.push_back(&t.policy);
    return out;
  }
  /// The metric label index of `category` (of `policy` or of a host entry's).
  std::uint16_t metric_of(const policy::category_limits& category) const noexcept {
    return category_metric[index_of(category)];
  }
};

}  // namespace tollgate::net
