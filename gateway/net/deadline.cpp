#include "gateway/net/deadline.hpp"

#include <algorithm>

namespace tollgate::net {

namespace {

using clock = deadline_watch::clock;

/// A deadline may move earlier than the time the timer is armed for (a short header timeout
/// after a long keep-alive pause); waking at least once a second notices that in time.
constexpr auto longest_sleep = std::chrono::seconds(1);

void check(std::shared_ptr<deadline_watch> watch);

/// Sleeps until the next thing to check; the timer's handler holds the watch.
void arm(std::shared_ptr<deadline_watch> watch, clock::time_point now) {
  deadline_watch& w = *watch;
  // Coarse time moves in ticks of a few milliseconds: sleep at least one millisecond, so that
  // waiting for the next tick does not spin.
  w.alarm.expires_after(std::clamp<clock::duration>(std::min(w.at, w.release_at) - now,
                                                    std::chrono::milliseconds(1), longest_sleep));
  w.alarm.async_wait(
      [watch = std::move(watch)](const error_code&) mutable { check(std::move(watch)); });
}

/// Acts on what has come due, then sleeps again (until the session ends).
void check(std::shared_ptr<deadline_watch> watch) {
  deadline_watch& w = *watch;
  for (;;) {
    if (w.ended) return;
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
      if (w.upstream == nullptr && w.on_due != nullptr) {
        w.at = clock::time_point::max();
        w.on_due(w.due_context);  // sets the next deadline, or ends the session
        continue;
      }
      if (w.upstream == nullptr) {
        // A client phase ran out: closing the socket ends the session's pending operation.
        w.close_client();
        return;
      }
      // An upstream phase ran out: only that connection goes; the client gets a 504.
      error_code ignored;
      w.upstream->close(ignored);
      w.upstream_timed_out = true;
      w.upstream = nullptr;
      w.at = clock::time_point::max();
      continue;
    }
    arm(std::move(watch), now);
    return;
  }
}

}  // namespace

void start_watchdog(std::shared_ptr<deadline_watch> watch) {
  check(std::move(watch));
}

}  // namespace tollgate::net
