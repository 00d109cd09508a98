#pragma once
/// The admin listener (docs/design.md §10): /metrics, /healthz, /readyz and the JSON admin API
/// under /admin/ (behind a bearer token when one is set). It runs on the control io_context of the
/// main thread, so scrapes never compete with the workers' event loops.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/net/asio.hpp"

namespace tollgate::net {

/// A small HTTP/1.1 server for operators.
/// Thread safety: used on its io_context only.
class admin_server {
 public:
  /// An answer of the admin API.
  struct reply {
    unsigned status = 200;                          ///< HTTP status
    std::string body;                               ///< JSON
    std::string content_type = "application/json";  ///< or application/problem+json
    std::string allow;                              ///< the Allow field of a 405
  };
  /// A request to the admin API, as far as its handler needs it.
  struct request {
    std::string_view method;  ///< GET, PUT, DELETE, ...
    std::string_view path;    ///< under /admin/, without the query
    std::string_view query;   ///< after '?', or ""
    std::string_view body;    ///< at most 8 KiB
    std::string peer;         ///< the operator's address and port (audit lines)
    bool token = false;       ///< an admin token was presented and accepted (audit lines)
  };
  /// What the endpoints answer with.
  struct handlers {
    std::function<std::string()> metrics;  ///< Prometheus text exposition
    /// /readyz: whether to take traffic (false while draining, or while a fail_mode closed
    /// store cannot reach Redis) and the line that says so ("ready", "draining", ...).
    std::function<std::pair<bool, std::string>()> ready;
    /// The admin API: a request under /admin/ to a JSON answer.
    std::function<reply(const request&)> api;
    std::string token;  ///< required as "Authorization: Bearer <token>" when not empty
  };
  /// Bounds on the admin connections (the admin section of the gateway file).
  struct bounds {
    std::uint32_t max_connections = 64;  ///< open at once; more are reset
    std::chrono::nanoseconds request_timeout = std::chrono::seconds(10);  ///< read, and idle
  };
  /// Binds `endpoint` on `io` (throws on failure).
  admin_server(asio::io_context& io, const tcp::endpoint& endpoint, bounds b, handlers h);
  /// The bound endpoint (port 0 resolved).
  tcp::endpoint endpoint() const { return acceptor_.local_endpoint(); }
  /// Starts accepting.
  void start();
  /// Stops accepting.
  void stop();

  /// Connections refused at max_connections so far (none was waiting on its peer).
  std::uint64_t refused() const noexcept { return refused_; }
  /// Connections closed at max_connections so far to make room for a newcomer.
  std::uint64_t closed_for_room() const noexcept { return closed_for_room_; }

 private:
  /// Accepts until stopped.
  asio::awaitable<void> accept_loop();
  /// Serves one operator's connection.
  asio::awaitable<void> serve(tcp::socket socket);

  tcp::acceptor acceptor_;             ///< the admin socket
  bounds bounds_;                      ///< connection cap and timeout
  handlers handlers_;                  ///< endpoint bodies
  std::uint32_t open_ = 0;             ///< connections being served
  std::uint64_t refused_ = 0;          ///< refused at the cap
  std::uint64_t closed_for_room_ = 0;  ///< closed at the cap for a newcomer
  /// Connections waiting on their peer (for a request, or to take an answer), longest first:
  /// at the cap the first is closed to make room, so that peers that send nothing, or read
  /// nothing, cannot lock operators and scrapers out. At most max_connections entries, each a
  /// session's own socket. (A session runs its handler without waiting, so every session but
  /// the one being answered is here.)
  std::vector<tcp::socket*> waiting_;
};

}  // namespace tollgate::net
