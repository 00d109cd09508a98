#pragma once
/// The limiter store a gateway file asks for (docs/design.md §11): the in-process store, or Redis
/// over it; what it needs at start; and the key that hashes limit key values.

#include <cstdint>
#include <memory>
#include <string>

#include "gateway/config/gateway.hpp"
#include "gateway/core/siphash.hpp"
#include "gateway/store/decision_store.hpp"

namespace tollgate::app {

/// 64 random bits.
std::uint64_t random_u64();

/// The limiter store the configuration asks for. Throws std::runtime_error when it cannot be
/// made (a password variable that is not set, TLS files that do not load).
std::unique_ptr<store::decision_store> make_store(const config::store_config& c, unsigned workers);

/// What the store needs at start that the file alone does not show: the password's variable
/// set, the TLS files loadable. Throws std::runtime_error naming the key.
void check_store(const config::store_config& c);

/// The key that hashes limit key values (API keys, tokens). Random per process with the
/// in-process store; with Redis, replicas must hash alike to share a key's limit, so it is
/// derived from the PoW secret, which replicas already share.
core::siphash_key identity_key_for(const config::gateway_config& g, const std::string& secret,
                                   bool secret_given);

}  // namespace tollgate::app
