#include "gateway/net/snapshot.hpp"

#include "gateway/config/error.hpp"

namespace tollgate::net {

namespace {

std::vector<std::vector<tcp::endpoint>> resolve_all(const config::gateway_config& c) {
  asio::io_context io;
  tcp::resolver resolver(io);
  std::vector<std::vector<tcp::endpoint>> out;
  for (const auto& u : c.upstreams) {
    auto& endpoints = out.emplace_back();
    for (const auto& e : u.endpoints) {
      error_code ec;
      const auto results =
          resolver.resolve(e.host, std::to_string(e.port), tcp::resolver::numeric_service, ec);
      if (ec || results.empty()) {
        throw config::error(c.file, 0, "upstreams." + u.name + ".endpoints",
                            "cannot resolve '" + e.host + "': " + ec.message());
      }
      // The first address of a name; several names make several endpoints.
      endpoints.push_back(results.begin()->endpoint());
    }
  }
  return out;
}

}  // namespace

snapshot::snapshot(config::gateway_config c, limit::scope_registry& scopes, core::siphash_key key,
                   metrics::registry& metrics)
    : config(std::move(c)),
      policy(config.policy, scopes, key),
      router(config, policy),
      upstream_endpoints(resolve_all(config)) {
  // Label indices are fixed here, so that counting a request never looks a label up.
  for (const auto& category : policy.categories()) {
    category_metric.push_back(metrics.categories.index(category.name));
  }
  for (const auto& u : config.upstreams)
    upstream_metric.push_back(metrics.upstreams.index(u.name));
  for (const auto& r : policy.violations().names)
    reason_metric.push_back(metrics.reasons.index(r));
}

}  // namespace tollgate::net
