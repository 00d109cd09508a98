#include "gateway/app/admin_endpoints.hpp"

#include <chrono>

#include "gateway/app/admin_api.hpp"

namespace tollgate::app {

namespace {

/// The label sets of the configuration in force: its categories and their limits, its
/// upstreams and the health of their endpoints.
void describe_in_force(const net::snapshot& s, metrics::scrape_values& values) {
  values.categories = s.category_metric;
  values.category_limits = s.limit_metric;
  values.category_tiers = s.tier_metric;
  values.upstreams = s.upstream_metric;
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  for (std::size_t u = 0; u < s.config.upstreams.size(); ++u) {
    const auto& up = s.config.upstreams[u];
    for (std::size_t e = 0; e < up.endpoints.size(); ++e) {
      const auto& ep = up.endpoints[e];
      const bool ejected = s.ejected_until[u][e].load(std::memory_order_relaxed) > now;
      const std::string host =
          ep.host.find(':') != std::string::npos ? "[" + ep.host + "]" : ep.host;
      values.endpoints.push_back({up.name, host + ":" + std::to_string(ep.port), !ejected});
    }
  }
}

/// The bounded tables' sizes: the store's and the violation counters'.
void describe_tables(const store::decision_store& store, const policy::pow_state& pow,
                     metrics::scrape_values& values) {
  for (const auto& t : store.tracked()) {
    values.tracked_keys.emplace_back(t.name, static_cast<double>(t.entries));
    values.tables.push_back({"limiter_" + t.name, static_cast<double>(t.entries),
                             static_cast<double>(t.capacity), static_cast<double>(t.evictions)});
  }
  auto add = [&](std::string_view name, std::size_t n, std::size_t cap, std::uint64_t ev) {
    values.tables.push_back({std::string(name), static_cast<double>(n), static_cast<double>(cap),
                             static_cast<double>(ev)});
  };
  pow.violations().for_each_table(add);
  pow.penalties().for_each_table(add);
}

}  // namespace

std::string admin_endpoints::metrics(const net::admin_server& admin) const {
  metrics::scrape_values values;
  describe_tables(s_.store, s_.pow, values);
  describe_in_force(*s_.current, values);
  values.version = std::string(s_.version);
  values.certificates = s_.metrics.certificates.all();
  s_.attack.describe(values);
  values.active_bans = static_cast<double>(s_.pow.violations().bans(s_.clock.now()).size() +
                                           s_.pow.manual_bans().list(s_.clock.now()).size());
  if (const pow::penalty_rules* ladder = s_.current->policy.penalties()) {
    // One walk of the ladder's table per scrape (bounded like the violation counters).
    const auto n = s_.pow.penalties().census(s_.clock.now(), *ladder);
    for (std::size_t i = 0; i < values.penalty_clients.size(); ++i)
      values.penalty_clients[i] = static_cast<double>(n[i + 1]);
  }
  store::store_report store = s_.store.report();
  values.store = std::move(store.counters);
  values.store_degraded = store.degraded;
  // This runs on the admin listener's own thread (it answers /metrics).
  values.admin_closed_for_room = static_cast<double>(admin.closed_for_room());
  values.admin_refused = static_cast<double>(admin.refused());
  return metrics::render(s_.server.counters(), s_.metrics, values);
}

std::pair<bool, std::string> admin_endpoints::ready() const {
  if (s_.draining) return {false, "draining"};
  const store::store_report store = s_.store.report();
  if (!store.degraded) return {true, "ready"};
  // Degraded: with fail_mode closed every request gets 503, so the balancer had better send
  // them elsewhere; otherwise this replica still serves.
  if (store.refusing) {
    return {false, "store degraded: redis unreachable, fail_mode " + std::string(store.fail_mode)};
  }
  return {true, "ready (store degraded: redis unreachable, fail_mode " +
                    std::string(store.fail_mode) + ")"};
}

net::admin_server::reply admin_endpoints::api(const net::admin_server::request& r) const {
  return admin_api({s_.pow, s_.store, s_.clock, s_.current, s_.server.limited(), shared_store_,
                    &s_.overrides, &s_.attack, &s_.standing})
      .handle(r);
}

net::admin_server::handlers admin_endpoints::handlers(
    const std::unique_ptr<net::admin_server>& admin, std::string token) const {
  return {[this, &admin] { return metrics(*admin); }, [this] { return ready(); },
          [this](const net::admin_server::request& r) { return api(r); }, std::move(token)};
}

}  // namespace tollgate::app
