#include "gateway/net/deadline.hpp"

#include <algorithm>

#include "gateway/net/upstream_pool.hpp"

namespace tollgate::net {

task<void> watch_deadline(std::shared_ptr<deadline_watch> watch) {
  using clock = deadline_watch::clock;
  deadline_watch& w = *watch;
  // A deadline may move earlier than the time the timer is armed for (a short header timeout
  // after a long keep-alive pause); waking at least once a second notices that in time.
  constexpr auto longest_sleep = std::chrono::seconds(1);
  while (!w.ended) {
    const auto now = clock::now();
    if (now >= w.release_at) {
      // An idle connection's read is cancelled (no system call) so that it can wait without
      // its buffers.
      w.release_at = clock::time_point::max();
      w.released = true;
      error_code ignored;
      w.client.cancel(ignored);
    }
    if (now >= w.at) {
      if (w.upstream == nullptr) {
        // A client phase ran out: closing the socket ends the session's pending operation.
        error_code ignored;
        w.client.close(ignored);
        co_return;
      }
      // An upstream phase ran out: only that connection goes; the client gets a 504.
      error_code ignored;
      w.upstream->socket.close(ignored);
      w.upstream_timed_out = true;
      w.upstream = nullptr;
      w.at = clock::time_point::max();
      continue;
    }
    // Coarse time moves in ticks of a few milliseconds: sleep at least one millisecond, so
    // that waiting for the next tick does not spin.
    w.alarm.expires_after(std::clamp<clock::duration>(std::min(w.at, w.release_at) - now,
                                                      std::chrono::milliseconds(1), longest_sleep));
    co_await w.alarm.async_wait(use_tuple);
  }
}

}  // namespace tollgate::net
