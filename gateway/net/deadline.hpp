#pragma once
/// One deadline per client connection, watched by one timer. Moving the deadline is a store,
/// not a timer operation: the watchdog wakes at the old deadline, sees the new one and sleeps
/// again. Per-operation timeouts (tcp_socket::expires_after) would arm and cancel a
/// timer for every read and write.

#include <time.h>

#include <chrono>
#include <memory>

#include "gateway/net/asio.hpp"

namespace tollgate::net {

struct upstream_connection;
class client_stream;

/// The deadline of a connection's current phase and what to close when it passes. Shared by
/// the session and its watchdog coroutine; the session calls end() when it is over, after which
/// the watchdog touches nothing but this object.
/// Thread safety: none needed; used on its connection's worker only.
struct deadline_watch {
  /// Deadlines move several times per request and are seconds long: the kernel's coarse
  /// monotonic clock (a few milliseconds of resolution, no clock source read) is enough.
  struct clock {
    using duration = std::chrono::nanoseconds;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<clock>;
    static constexpr bool is_steady = true;
    static time_point now() noexcept {
      timespec ts;
      ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
      return time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
    }
  };
  deadline_watch(tcp_socket& c, client_stream& s) : client(c), stream(s), alarm(c.get_executor()) {}
  /// The client has `d` to complete the current read or write.
  void client_for(std::chrono::nanoseconds d) {
    at = clock::now() + d;
    upstream = nullptr;
  }
  /// Upstream connection `u` has `d` to connect, accept the request or answer; at the
  /// deadline only `u` is closed and `upstream_timed_out` set (the client gets a 504).
  void upstream_for(upstream_connection* u, std::chrono::nanoseconds d) {
    at = clock::now() + d;
    upstream = u;
    upstream_timed_out = false;
  }
  /// The upstream connection of the current phase is going away: forget it.
  void drop_upstream() { upstream = nullptr; }
  /// The session is over: the watchdog stops without touching the sockets again.
  void end() {
    ended = true;
    alarm.cancel();
  }

  tcp_socket& client;     ///< closed when a client phase times out
  client_stream& stream;  ///< the client's bytes, plain or TLS (the session's, not the watchdog's)
  timer alarm;            ///< the watchdog's
  clock::time_point at = clock::time_point::max();  ///< current deadline
  upstream_connection* upstream = nullptr;          ///< set during upstream phases
  bool upstream_timed_out = false;                  ///< the last upstream phase ran out of time
  bool ended = false;                               ///< the session is over
};

/// Watches `w` until the session ends or a client phase times out. Spawned on its own rather
/// than joined to the session with a parallel group: a group would connect a cancellation slot
/// to every operation of the session.
task<void> watch_deadline(std::shared_ptr<deadline_watch> w);

}  // namespace tollgate::net
