#include "gateway/net/snapshot.hpp"

#include <spdlog/spdlog.h>

#include "gateway/identity/setup.hpp"

#include <atomic>

#include <boost/asio/ssl/context.hpp>

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

std::vector<std::shared_ptr<asio::ssl::context>> make_tls_contexts(
    const config::gateway_config& c) {
  std::vector<std::shared_ptr<asio::ssl::context>> out;
  for (const auto& l : c.listeners) {
    if (!l.tls) {
      out.emplace_back();
      continue;
    }
    namespace ssl = asio::ssl;
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
    // TLS 1.2 and 1.3 only.
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                     ssl::context::single_dh_use);
    // OpenSSL's record buffers (about 34 KiB a connection) go back while a connection is idle,
    // as the plain path's buffers do (issue 8: memory per idle connection).
    SSL_CTX_set_mode(ctx->native_handle(), SSL_MODE_RELEASE_BUFFERS);
    error_code ec;
    ctx->use_certificate_chain_file(l.tls->certificate, ec);
    if (ec) {
      throw config::error(c.file, l.tls->certificate_line,
                          "listeners." + l.name + ".tls.certificate",
                          "cannot load '" + l.tls->certificate + "': " + ec.message());
    }
    ctx->use_private_key_file(l.tls->private_key, ssl::context::pem, ec);
    if (ec) {
      throw config::error(c.file, l.tls->private_key_line,
                          "listeners." + l.name + ".tls.private_key",
                          "cannot load '" + l.tls->private_key + "': " + ec.message());
    }
    out.push_back(std::move(ctx));
  }
  return out;
}

namespace {

/// identity.jwt's verifier, the keys of its set it leaves out logged.
std::shared_ptr<identity::verifier> make_jwt_verifier(const config::gateway_config& c,
                                                      const policy::tenants& p) {
  std::vector<std::string> skipped;
  auto v = identity::make_verifier(c, p.claim_paths(), &skipped);
  for (const std::string& s : skipped)
    spdlog::warn("identity.jwt.jwks_file: {} left out: {}", c.identity.jwt->jwks_file, s);
  return v;
}

}  // namespace

snapshot::snapshot(config::gateway_config c, core::siphash_key key, metrics::registry& metrics,
                   policy::pow_state& pow)
    : config(std::move(c)),
      policy(config.policy, key),
      hosts(config, policy, key),
      router(config, policy, &hosts),
      page(config.pow.page),
      jwt(make_jwt_verifier(config, hosts)),
      upstream_endpoints(resolve_all(config)),
      tls(make_tls_contexts(config)) {
  static std::atomic<std::uint64_t> generations{0};
  generation = generations.fetch_add(1, std::memory_order_relaxed) + 1;
  // Label indices are fixed here, so that counting a request never looks a label up. With
  // hosts, a category's label names its host entry too ("" for the top level).
  const bool labelled = !hosts.empty();
  auto add = [&](const policy::compiled_policy& p, std::string_view host) {
    std::vector<std::uint16_t> tiers;
    if (const policy::tier_rules* t = p.tiers(); t != nullptr) {
      for (const auto& name : t->names)
        tiers.push_back(metrics.consumer_tiers.index(name));
      consumer_tiers = true;
    }
    for (const auto& category : p.categories()) {
      category_metric.push_back(metrics.categories.index(
          labelled ? metrics::host_category(host, category.name) : category.name));
      auto& limits = limit_metric.emplace_back();
      for (const auto& l : category.limits)
        limits.push_back(metrics.limits.index(l.name));
      tier_metric.push_back(tiers);
    }
  };
  add(policy, "");
  for (const auto& t : hosts.entries())
    add(t.policy, t.label);
  attack = policy::attack_board(category_metric.size());
  for (const auto& u : config.upstreams) {
    upstream_metric.push_back(metrics.upstreams.index(u.name));
    ejected_until.push_back(std::make_unique<std::atomic<std::int64_t>[]>(u.endpoints.size()));
  }
  for (const auto& r : policy.violations().names) {
    reason_metric.push_back(metrics.reasons.index(r));
    reason_slot.push_back(pow.slot(r));
  }
}

}  // namespace tollgate::net
