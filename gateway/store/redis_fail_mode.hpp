#pragma once
/// fail_mode (docs/design.md §11): what answers a decision Redis could not make (the in-process
/// store, admitting, or 503), the counting of why it could not, and the deadlines of decisions
/// waiting in a call: each answered by fail_mode when its own time runs out. Internal to
/// store/.

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "gateway/metrics/counters.hpp"
#include "gateway/store/local_store.hpp"
#include "gateway/store/redis_link.hpp"
#include "gateway/store/redis_store.hpp"

namespace tollgate::store::redis {

using clock_type = std::chrono::steady_clock;

/// What a decision completes with when neither Redis nor fail_mode made it (closed).
extern const boost::system::error_code unavailable;

/// Completes `done` through its executor, never inline (the initiating function has not
/// returned yet).
void complete_later(decide_handler done, boost::system::error_code ec);

/// Answers by fail_mode and counts the failures that make it answer.
/// Thread safety: the worker's thread only.
class fail_mode_answers {
 public:
  /// Answers by `mode` (`fallback`: the in-process store of fail_mode local) counted in
  /// `counters`.
  fail_mode_answers(fail_mode mode, local_store* fallback, metrics::store_counters& counters)
      : mode_(mode), fallback_(fallback), counters_(counters) {}

  /// Decides by fail_mode: true with `out` filled (local, open), false for closed.
  bool decide(const limit::limit_request& req, limit::decision& out);
  /// Decides `c` by fail_mode and completes it now.
  void finish(pending_call& c);
  /// The same from the function that initiated `c`: completes it later.
  void finish_later(pending_call& c);

  /// Counts a call that got no reply.
  void count(failure why);
  /// Counts a reply that does not have the script's shape.
  void count_malformed();
  /// Counts an error reply to a decision (oom, or script), and logs it.
  void count_error(std::string_view kind, std::string_view text);
  /// Logs an error reply, at most once a second.
  void log_error(std::string_view text);

  /// What answers.
  fail_mode mode() const noexcept { return mode_; }

 private:
  fail_mode mode_;                         ///< what answers
  local_store* fallback_;                  ///< fail_mode local's store
  metrics::store_counters& counters_;      ///< the worker's
  clock_type::time_point last_error_log_;  ///< when an error reply was last logged
};

/// Decisions sent together to one server (its calls' handlers, in the order of the batch).
struct batch_decision {
  std::vector<pending_call> items;  ///< the decisions, in the order of the call's reply
  /// Per item: answered already (by fail_mode, its own deadline having passed first).
  std::vector<char> settled;
  bool timeout_counted = false;  ///< one timeout counted for the call, however many items
};

/// Answers by fail_mode every decision of a batch out whose own deadline (its asking plus
/// store.timeout) has passed, however long the call it rides on has left.
/// Thread safety: the worker's thread only.
class deadline_settler {
 public:
  /// Settles the batches of `out` through `fail`.
  deadline_settler(fail_mode_answers& fail, const std::vector<std::shared_ptr<batch_decision>>& out)
      : fail_(fail), out_(out) {}

  /// Its timer runs on `io`.
  void attach(boost::asio::io_context& io) { timer_.emplace(io); }
  /// Lets the timer go (with its io_context, which this outlives).
  void shutdown() {
    timer_.reset();
    armed_ = false;
  }
  /// Arms the timer for `at`, unless it is armed sooner.
  void arm(clock_type::time_point at);

 private:
  /// Answers the decisions due; arms the timer for the next one.
  void settle_due();

  fail_mode_answers& fail_;                                  ///< what answers
  const std::vector<std::shared_ptr<batch_decision>>& out_;  ///< the batches out
  std::optional<boost::asio::steady_timer> timer_;           ///< the next decision due
  clock_type::time_point at_;                                ///< when it is armed for
  bool armed_ = false;                                       ///< whether it is
};

}  // namespace tollgate::store::redis
