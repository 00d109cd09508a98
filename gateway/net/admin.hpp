#pragma once
/// The admin listener (DESIGN §10): /metrics, /healthz, /readyz and the JSON admin API under
/// /admin/ (behind a bearer token when one is set). It runs on the control
/// io_context of the main thread, so scrapes never compete with the workers' event loops.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "gateway/net/asio.hpp"

namespace tollgate::net {

/// A small HTTP/1.1 server for operators.
/// Thread safety: used on its io_context only.
class admin_server {
 public:
  /// What the endpoints answer with.
  /// An answer of the admin API.
  struct reply {
    unsigned status = 200;  ///< HTTP status
    std::string body;       ///< JSON
  };
  struct handlers {
    std::function<std::string()> metrics;  ///< Prometheus text exposition
    /// /readyz: whether to take traffic (false while draining, or while a fail_mode closed
    /// store cannot reach Redis) and the line that says so ("ready", "draining", ...).
    std::function<std::pair<bool, std::string>()> ready;
    /// The admin API: method and path (under /admin/, query removed) to a JSON answer.
    std::function<reply(std::string_view method, std::string_view path)> api;
    std::string token;  ///< required as "Authorization: Bearer <token>" when not empty
  };
  /// Binds `endpoint` on `io` (throws on failure).
  admin_server(asio::io_context& io, const tcp::endpoint& endpoint, handlers h);
  /// The bound endpoint (port 0 resolved).
  tcp::endpoint endpoint() const { return acceptor_.local_endpoint(); }
  /// Starts accepting.
  void start();
  /// Stops accepting.
  void stop();

 private:
  tcp::acceptor acceptor_;  ///< the admin socket
  handlers handlers_;       ///< endpoint bodies
};

}  // namespace tollgate::net
