#pragma once
/// One deadline per client connection, watched by one timer. Moving the deadline is a store,
/// not a timer operation: the watchdog wakes at the old deadline, sees the new one and sleeps
/// again. Per-operation timeouts (tcp_socket::expires_after) would arm and cancel a
/// timer for every read and write.

#include <time.h>

#include <chrono>
#include <memory>

#include "gateway/net/asio.hpp"
#include "gateway/net/tcp_bytes.hpp"

namespace tollgate::net {

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
  /// Upstream socket `u` has `d` to connect, accept the request or answer; at the deadline
  /// only `u` is closed and `upstream_timed_out` set (the client gets a 504).
  void upstream_for(tcp_socket* u, std::chrono::nanoseconds d) {
    at = clock::now() + d;
    upstream = u;
    upstream_timed_out = false;
  }
  /// The upstream connection of the current phase is going away: forget it.
  void drop_upstream() { upstream = nullptr; }
  /// No phase runs: nothing comes due (an HTTP/2 connection between its streams' phases).
  void rest() {
    at = clock::time_point::max();
    upstream = nullptr;
  }
  /// Within `d` (the watchdog's granularity: up to a second later) the client's pending read
  /// is cancelled and `released` set, so that an idle connection can give back its buffers;
  /// nanoseconds::max() takes that back.
  void release_after(std::chrono::nanoseconds d) {
    released = false;
    release_at = d == std::chrono::nanoseconds::max() ? clock::time_point::max() : clock::now() + d;
  }
  /// Reads the client socket's byte counts from the kernel (TCP_INFO: bytes received, and
  /// bytes sent and acknowledged), once, just before the socket closes: one system call per
  /// connection, not per read or write, and TLS and WebSocket bytes included.
  void sample_wire_bytes() noexcept {
    if (!client.is_open()) return;
    tcp_bytes(client.native_handle(), bytes_received, bytes_sent);
  }
  /// Closes the client socket, its byte counts sampled first.
  void close_client() noexcept {
    sample_wire_bytes();
    error_code ignored;
    client.close(ignored);
  }
  /// The session is over: the watchdog stops without touching the sockets again.
  void end() {
    ended = true;
    alarm.cancel();
  }

  tcp_socket& client;     ///< closed when a client phase times out
  client_stream& stream;  ///< the client's bytes, plain or TLS (the session's, not the watchdog's)
  timer alarm;            ///< the watchdog's
  clock::time_point at = clock::time_point::max();  ///< current deadline
  tcp_socket* upstream = nullptr;                   ///< set during upstream phases
  bool upstream_timed_out = false;                  ///< the last upstream phase ran out of time
  bool ended = false;                               ///< the session is over
  clock::time_point release_at = clock::time_point::max();  ///< see release_after
  bool released = false;  ///< the watchdog cancelled an idle read at release_at
  /// When set, a client phase running out calls this with `due_context` instead of closing
  /// the socket (a WebSocket tunnel closes with a close frame); it sets the next deadline.
  void (*on_due)(void* context) = nullptr;
  void* due_context = nullptr;  ///< see on_due
  /// Links in its worker's list of idle keep-alive connections (idle_connections).
  deadline_watch* idle_prev = nullptr;
  deadline_watch* idle_next = nullptr;  ///< see idle_prev
  bool idle = false;                    ///< in that list now
  std::uint64_t bytes_received = 0;     ///< from the client, when sampled (sample_wire_bytes)
  std::uint64_t bytes_sent = 0;         ///< to the client and acknowledged, when sampled
};

/// The keep-alive connections of one worker that wait for their next request, oldest first:
/// at max_connections the oldest is closed to make room for a new client (an idle connection
/// costs its client only a reconnect; a refused client gets nothing). Intrusive, so waiting
/// allocates nothing.
/// Thread safety: none needed; one worker's.
class idle_connections {
 public:
  /// Adds `w` as the newest.
  void push(deadline_watch& w) noexcept {
    w.idle_prev = tail_;
    w.idle_next = nullptr;
    (tail_ != nullptr ? tail_->idle_next : head_) = &w;
    tail_ = &w;
    w.idle = true;
  }
  /// Takes `w` out, if it is in.
  void erase(deadline_watch& w) noexcept {
    if (!w.idle) return;
    (w.idle_prev != nullptr ? w.idle_prev->idle_next : head_) = w.idle_next;
    (w.idle_next != nullptr ? w.idle_next->idle_prev : tail_) = w.idle_prev;
    w.idle = false;
  }
  /// Closes the oldest idle connection (its session then ends); false when there is none.
  bool close_oldest() noexcept {
    if (head_ == nullptr) return false;
    deadline_watch& w = *head_;
    erase(w);
    w.close_client();
    return true;
  }

 private:
  deadline_watch* head_ = nullptr;  ///< oldest
  deadline_watch* tail_ = nullptr;  ///< newest
};

/// Watches `w` until the session ends or a client phase times out: a timer whose handler holds
/// `w` and re-arms itself (the idiom of Asio's cpp20/coroutines/timeout.cpp, as a plain handler:
/// a coroutine per connection would keep a frame for each idle connection). Beside the
/// session rather than joined to it with a parallel group, which would connect a cancellation
/// slot to every operation of the session.
void start_watchdog(std::shared_ptr<deadline_watch> w);

}  // namespace tollgate::net
