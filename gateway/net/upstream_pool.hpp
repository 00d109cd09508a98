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
#include "gateway/net/upstream_stream.hpp"

namespace tollgate::net {

/// One connection to an upstream endpoint, with its read buffer.
struct upstream_connection {
  explicit upstream_connection(const executor& ex) : socket(ex), stream(socket) {}
  tcp_socket socket;                                 ///< bounded by the connection's watchdog
  upstream_stream stream;                            ///< `socket`, or TLS over it
  beast::flat_buffer buffer;                         ///< bytes read past the last response
  std::uint64_t generation = 0;                      ///< of the snapshot it was opened under
  std::size_t upstream = 0;                          ///< index of its upstream in that snapshot
  std::size_t endpoint = 0;                          ///< index of its endpoint in that upstream
  bool reused = false;                               ///< came from the idle pool
  std::chrono::steady_clock::time_point idle_since;  ///< when it was returned
};

/// Why no connection could be had.
enum class connect_failure {
  none,
  refused,  ///< the endpoint refused it (or failed otherwise)
  timeout,  ///< not connected (or the TLS handshake not done) within connect_timeout
  tls,      ///< the TLS handshake failed (a certificate that does not verify, among others)
};

/// The pool of one worker thread. Its state (idle connections, failures, round-robin) belongs
/// to one snapshot, the newest it has been asked about, recognised by its generation: a
/// snapshot's address may be that of an earlier one since freed. A request still running on
/// an older snapshot gets a connection of its own, closed after use, and its failures are not
/// counted against endpoints (its upstream and endpoint indices are those of its snapshot).
/// Thread safety: none needed; used only on its worker's io_context.
class upstream_pool {
 public:
  /// A pool on executor `ex`.
  explicit upstream_pool(const executor& ex) : executor_(ex) {}

  /// An idle connection to the next endpoint of upstream `u` of `s`, or a new one. On failure
  /// returns nullptr and says why in `why`.
  task<std::unique_ptr<upstream_connection>> acquire(const snapshot& s, std::size_t u,
                                                     deadline_watch& watch, connect_failure& why);
  /// Returns a connection after a complete exchange under `s`; kept if it was opened under
  /// the pool's snapshot, `s` is that snapshot and the pool has room, closed otherwise.
  void release(const snapshot& s, std::unique_ptr<upstream_connection> c);
  /// Keeps the TLS session of `c`, after a complete exchange under `s`, to resume the next
  /// connection to its endpoint with (release does it for pooled connections; this is for
  /// one the upstream closes, whose session would be lost with it).
  void keep_session(const snapshot& s, const upstream_connection& c);
  /// Counts a failed exchange against endpoint `endpoint` of upstream `u` of `s` (ejects after
  /// too many); nothing when `s` is older than the pool's snapshot. `why`, when given, goes in
  /// the log line.
  void failed(const snapshot& s, std::size_t u, std::size_t endpoint, std::string_view why = {});
  /// Drops every idle connection and forgets failures (the next request starts afresh).
  void clear() {
    state_.clear();
    generation_ = 0;
  }

 private:
  struct endpoint_state {
    std::vector<std::unique_ptr<upstream_connection>> idle;  ///< most recent last
    std::uint32_t failures = 0;                              ///< consecutive
    std::chrono::steady_clock::time_point ejected_until;     ///< skipped until then
    /// TLS: the last session it handed out, resumed by the next new connection (each TLS
    /// connection after the first one costs no full handshake).
    tls_session session;
  };
  struct upstream_state {
    std::vector<endpoint_state> endpoints;  ///< by endpoint index
    std::size_t next = 0;                   ///< round-robin position
  };
  /// Whether `s` is older than the snapshot `state_` belongs to; if it is newer, `state_` is
  /// made anew for it first.
  bool stale(const snapshot& s);
  /// The endpoint of upstream `u` to connect to next (of the pool's snapshot).
  std::size_t pick(std::size_t u);
  /// A new connection to endpoint `e` of upstream `u` of `s`, or nullptr (`why` says why).
  task<std::unique_ptr<upstream_connection>> connect(const snapshot& s, std::size_t u,
                                                     std::size_t e, deadline_watch& watch,
                                                     connect_failure& why);

  executor executor_;                  ///< the worker's
  std::uint64_t generation_ = 0;       ///< of the snapshot `state_` is sized for; 0: none
  std::vector<upstream_state> state_;  ///< by upstream index of that snapshot
  std::size_t stale_next_ = 0;         ///< round-robin position for stale snapshots
};

}  // namespace tollgate::net
