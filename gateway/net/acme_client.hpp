#pragma once
/// The ACME client (RFC 8555, docs/design.md §17) of one TLS listener's `tls.acme`, on the
/// control thread's event loop (never on a worker): the account key made once and kept in
/// storage, an order for the listener's domains proved by http-01, the certificate and its key
/// stored 0600 and handed to `installed`; a stored certificate still valid is reused, and
/// renewed when two thirds of its lifetime have passed, with exponential backoff and jitter
/// after a failure. Every step of an order is logged.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gateway/config/gateway.hpp"
#include "gateway/net/acme_tokens.hpp"
#include "gateway/net/asio.hpp"

namespace tollgate::net {

/// Thread safety: used from the thread that runs `io` only; `tokens` is read by the workers.
class acme_client {
 public:
  /// Called on `io`'s thread with a certificate's expiry (Unix seconds) whenever one is in
  /// storage: the stored one at start, and each new one once stored.
  using on_certificate = std::function<void(std::int64_t not_after, bool fresh)>;

  /// Starts keeping a certificate for `acme` of listener `listener`.
  acme_client(asio::io_context& io, std::string listener, config::acme_config acme,
              std::shared_ptr<acme_tokens> tokens, on_certificate installed);
  /// Stops: an order under way is abandoned.
  ~acme_client();
  acme_client(const acme_client&) = delete;
  acme_client& operator=(const acme_client&) = delete;

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace tollgate::net
