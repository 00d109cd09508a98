#include "gateway/app/store_setup.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <random>
#include <stdexcept>

#include "gateway/pow/crypto.hpp"
#include "gateway/store/local_store.hpp"
#include "gateway/store/redis_store.hpp"

namespace tollgate::app {

std::uint64_t random_u64() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

std::unique_ptr<store::decision_store> make_store(const config::store_config& c, unsigned workers) {
  const auto& cap = c.capacity;
  // Global limits are split into one slice per worker (limit::memory_store).
  auto local = std::make_unique<store::local_store>(
      limit::store_capacity{cap[0], cap[1], cap[2], cap[3], cap[4]}, random_u64(), workers);
  if (c.type == config::store_config::kind::memory) return local;
  store::redis_options o;
  for (const auto& e : c.redis)
    o.nodes.emplace_back(e.host, e.port);
  o.cluster = c.cluster;
  o.username = c.username;
  if (!c.password_env.empty()) {
    const char* p = std::getenv(c.password_env.c_str());
    if (p == nullptr || *p == '\0') {
      throw std::runtime_error("store.password_env: " + c.password_env + " is not set");
    }
    o.password = p;
  }
  o.key_prefix = c.key_prefix;
  o.timeout = c.timeout;
  o.connect_timeout = c.connect_timeout;
  switch (c.fail_mode) {
    case config::store_config::failure::local:
      o.on_failure = store::fail_mode::local;
      break;
    case config::store_config::failure::open:
      o.on_failure = store::fail_mode::open;
      break;
    case config::store_config::failure::closed:
      o.on_failure = store::fail_mode::closed;
      break;
  }
  if (c.tls) {
    o.tls_ca = c.tls->ca;
    o.tls_certificate = c.tls->certificate;
    o.tls_private_key = c.tls->private_key;
    o.tls_server_name = c.tls->server_name;
  }
  return std::make_unique<store::redis_store>(std::move(o), workers, std::move(local));
}

void check_store(const config::store_config& c) {
  if (c.type != config::store_config::kind::redis) return;
  if (!c.password_env.empty()) {
    const char* p = std::getenv(c.password_env.c_str());
    if (p == nullptr || *p == '\0') {
      throw std::runtime_error("store.password_env: " + c.password_env + " is not set");
    }
  }
  if (c.tls) {
    store::redis_options o;
    o.nodes = {{"check", 1}};
    o.tls_ca = c.tls->ca;
    o.tls_certificate = c.tls->certificate;
    o.tls_private_key = c.tls->private_key;
    store::redis_store(std::move(o), 1, nullptr);  // loads the files, connects nothing
  }
}

core::siphash_key identity_key_for(const config::gateway_config& g, const std::string& secret,
                                   bool secret_given) {
  if (g.store.type == config::store_config::kind::memory) return {random_u64(), random_u64()};
  if (!secret_given) {
    spdlog::warn(
        "{} is not set: limits keyed on headers, query parameters, cookies or bearer "
        "tokens are not shared with other replicas through redis",
        g.pow.secret_env);
  }
  const pow::digest d = pow::sha256("tollgate limit keys\n", secret);
  std::uint64_t k0 = 0, k1 = 0;
  for (int i = 0; i < 8; ++i) {
    k0 = k0 << 8 | d[i];
    k1 = k1 << 8 | d[8 + i];
  }
  return {k0, k1};
}

}  // namespace tollgate::app
