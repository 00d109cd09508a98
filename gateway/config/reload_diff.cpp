#include "gateway/config/reload_diff.hpp"

#include <iterator>
#include <type_traits>
#include <utility>

namespace tollgate::config {

namespace {

/// Adds `key` to `out` when `a` and `b` differ.
template <class T>
void compare(std::vector<std::string>& out, std::string key, const T& a, const T& b) {
  if (!(a == b)) out.push_back(std::move(key));
}

/// The listener of `g` called `name`, or nullptr.
const listener_config* listener_named(const gateway_config& g, const std::string& name) {
  for (const auto& l : g.listeners) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

/// Listeners are compared by name: their order in the file changes nothing (sessions find
/// their listener's settings by name).
void compare_listeners(std::vector<std::string>& out, const gateway_config& running,
                       const gateway_config& next) {
  for (const auto& r : running.listeners) {
    const std::string key = "listeners." + r.name;
    const listener_config* n = listener_named(next, r.name);
    if (n == nullptr) {
      out.push_back(key);
      continue;
    }
    compare(out, key + ".address", r.address, n->address);
    compare(out, key + ".port", r.port, n->port);
    // TLS on or off is fixed per socket; which certificate it presents is not (see
    // keep_restart_only).
    compare(out, key + ".tls", r.tls.has_value(), n->tls.has_value());
    compare(out, key + ".proxy_protocol", r.proxy_protocol, n->proxy_protocol);
    compare(out, key + ".http2", r.http2, n->http2);
  }
  for (const auto& n : next.listeners) {
    if (listener_named(running, n.name) == nullptr) out.push_back("listeners." + n.name);
  }
}

/// The limiter store and its tables.
void compare_store(std::vector<std::string>& out, const store_config& r, const store_config& n) {
  compare(out, "store.type", r.type, n.type);
  compare(out, r.cluster ? "store.addresses" : "store.address", r.redis, n.redis);
  compare(out, "store.addresses", r.cluster, n.cluster);
  compare(out, "store.username", r.username, n.username);
  compare(out, "store.password_env", r.password_env, n.password_env);
  compare(out, "store.tls", r.tls, n.tls);
  compare(out, "store.key_prefix", r.key_prefix, n.key_prefix);
  compare(out, "store.timeout", r.timeout, n.timeout);
  compare(out, "store.connect_timeout", r.connect_timeout, n.connect_timeout);
  compare(out, "store.fail_mode", r.fail_mode, n.fail_mode);
  compare(out, "store.state_file", r.state_file, n.state_file);
  compare(out, "store.save_interval", r.save_interval, n.save_interval);
  // The names of store.capacity's keys, in the order of store_config::capacity.
  static constexpr const char* tables[] = {"ipv4_individual", "ipv4_network", "ipv6_subnet",
                                           "ipv6_provider", "keyed"};
  static_assert(std::size(tables) == std::extent_v<decltype(store_config::capacity)>);
  for (std::size_t i = 0; i < std::size(tables); ++i) {
    compare(out, std::string("store.capacity.") + tables[i], r.capacity[i], n.capacity[i]);
  }
}

/// What the process-wide PoW state was built from.
void compare_pow(std::vector<std::string>& out, const gateway_config& running,
                 const gateway_config& next) {
  const pow_settings& r = running.pow;
  const pow_settings& n = next.pow;
  compare(out, "pow.secret_env", r.secret_env, n.secret_env);
  compare(out, "pow.challenge_ttl", r.challenge_ttl, n.challenge_ttl);
  compare(out, "pow.replay_cache_entries", r.replay_cache_entries, n.replay_cache_entries);
  compare(out, "pow.solver_hash_rate", r.solver_hash_rate, n.solver_hash_rate);
}

/// The violation counters' settings (a policy file's `pow_counters`).
void compare_pow_counters(std::vector<std::string>& out, const pow_counters_config& r,
                          const pow_counters_config& n) {
  compare(out, "pow_counters.max_counter", r.max_counter, n.max_counter);
  compare(out, "pow_counters.decay_interval", r.decay_interval, n.decay_interval);
  compare(out, "pow_counters.max_individual_entries", r.max_individual_entries,
          n.max_individual_entries);
  compare(out, "pow_counters.max_network_entries", r.max_network_entries, n.max_network_entries);
  compare(out, "pow_counters.network_min_sources", r.network_min_sources, n.network_min_sources);
}

}  // namespace

std::vector<std::string> restart_only_changes(const gateway_config& running,
                                              const gateway_config& next) {
  std::vector<std::string> out;
  compare_listeners(out, running, next);
  compare(out, "admin.address", running.admin.address, next.admin.address);
  compare(out, "admin.port", running.admin.port, next.admin.port);
  // The descriptors reserved for admin connections are counted once, at start.
  compare(out, "admin.max_connections", running.admin.max_connections, next.admin.max_connections);
  compare(out, "admin.request_timeout", running.admin.request_timeout, next.admin.request_timeout);
  compare(out, "workers", running.workers, next.workers);
  // Each worker's share of it is fixed when the workers are made.
  compare(out, "limits.max_connections", running.limits.max_connections,
          next.limits.max_connections);
  compare_pow(out, running, next);
  compare_store(out, running.store, next.store);
  compare_pow_counters(out, running.policy.pow_counters, next.policy.pow_counters);
  return out;
}

gateway_config keep_restart_only(const gateway_config& running, gateway_config next) {
  std::vector<listener_config> listeners = running.listeners;
  for (auto& l : listeners) {
    const listener_config* n = listener_named(next, l.name);
    if (l.tls && n != nullptr && n->tls) l.tls = n->tls;
  }
  next.listeners = std::move(listeners);
  next.admin = running.admin;
  next.workers = running.workers;
  next.limits.max_connections = running.limits.max_connections;
  // The secret, the lifetime and the replay cache are the process's; the browsers' page is
  // only a rendering and clearance is read per request: both change live.
  pow_page_config page = std::move(next.pow.page);
  const pow_settings::clearance_config clearance = next.pow.clearance;
  next.pow = running.pow;
  next.pow.page = std::move(page);
  next.pow.clearance = clearance;  // read per request: changes live
  next.store = running.store;
  next.policy.pow_counters = running.policy.pow_counters;
  return next;
}

}  // namespace tollgate::config
