#pragma once
/// Connections from one worker to the upstreams: round-robin over endpoints, a keep-alive pool
/// per endpoint, and passive ejection of an endpoint after consecutive failures.

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "gateway/net/asio.hpp"
#include "gateway/net/deadline.hpp"
#include "gateway/net/snapshot.hpp"

namespace tollgate::net {

/// One connection to an upstream endpoint, with its read buffer.
struct upstream_connection {
  explicit upstream_connection(const executor& ex) : socket(ex) {}
  tcp_socket socket;                                 ///< bounded by the connection's watchdog
  beast::flat_buffer buffer;                         ///< bytes read past the last response
  std::size_t upstream = 0;                          ///< index of its upstream
  std::size_t endpoint = 0;                          ///< index of its endpoint in that upstream
  bool reused = false;                               ///< came from the idle pool
  std::chrono::steady_clock::time_point idle_since;  ///< when it was returned
};

/// Why no connection could be had.
enum class connect_failure { none, refused, timeout };

/// The pool of one worker thread.
/// Thread safety: none needed; used only on its worker's io_context.
class upstream_pool {
 public:
  /// A pool on executor `ex`.
  explicit upstream_pool(const executor& ex) : executor_(ex) {}

  /// An idle connection to the next endpoint of upstream `u`, or a new one. On failure returns
  /// nullptr and says why in `why`.
  task<std::unique_ptr<upstream_connection>> acquire(const snapshot& s, std::size_t u,
                                                     deadline_watch& watch, connect_failure& why);
  /// Returns a connection after a complete exchange; kept if the pool has room.
  void release(const snapshot& s, std::unique_ptr<upstream_connection> c);
  /// Counts a failed exchange against the connection's endpoint (ejects after too many).
  void failed(const snapshot& s, std::size_t u, std::size_t endpoint);
  /// Drops every idle connection (configuration reloaded: endpoints may have changed).
  void clear() { state_.clear(); }

 private:
  struct endpoint_state {
    std::vector<std::unique_ptr<upstream_connection>> idle;  ///< most recent last
    std::uint32_t failures = 0;                              ///< consecutive
    std::chrono::steady_clock::time_point ejected_until;     ///< skipped until then
  };
  struct upstream_state {
    std::vector<endpoint_state> endpoints;  ///< by endpoint index
    std::size_t next = 0;                   ///< round-robin position
  };
  upstream_state& state(const snapshot& s, std::size_t u);
  std::size_t pick(const snapshot& s, std::size_t u);

  executor executor_;                    ///< the worker's
  const snapshot* built_for_ = nullptr;  ///< the snapshot `state_` was sized for
  std::vector<upstream_state> state_;    ///< by upstream index
};

}  // namespace tollgate::net
