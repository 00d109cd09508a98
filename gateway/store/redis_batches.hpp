#pragma once
/// One Redis server (docs/design.md §11) for one worker: the decisions made while a call is out
/// wait for its reply and go in the next call together, max_batch to a call. Internal to store/.

#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gateway/store/redis_fail_mode.hpp"
#include "gateway/store/redis_nodes.hpp"
#include "gateway/store/redis_wire.hpp"

namespace tollgate::store::redis {

struct worker_context;

/// Sends one server's decisions in batches and reads their replies.
/// Thread safety: the worker's thread only.
class batch_sender {
 public:
  /// The sender of the worker whose parts share `w`.
  explicit batch_sender(worker_context& w);

  /// Sends through `io` (the worker's).
  void attach(boost::asio::io_context& io);
  /// Lets go of the decisions waiting and the timer (the io_context shuts down).
  void shutdown();

  /// Sends the decision of `req` into `out` with the next batch; `done` completes once Redis
  /// (or fail_mode, when its deadline passes first) answered.
  void start(const limit::limit_request& req, limit::decision& out, decide_handler&& done);
  /// The reply to a batch call (nullptr: none came, `why`).
  void on_reply(node& from, pending_call& c, const redisReply* reply, failure why);

 private:
  /// Sends the decisions waiting at the end of this turn of the event loop.
  void schedule();
  /// Sends the decisions waiting, max_batch to a call (fail_mode for those already due).
  void send_batches();

  worker_context& w_;                                 ///< what the worker's parts share
  boost::asio::io_context* io_ = nullptr;             ///< the worker's
  std::vector<pending_call> waiting_;                 ///< decisions for the next batch
  bool flush_posted_ = false;                         ///< send_batches is on its way
  std::size_t batches_out_ = 0;                       ///< batch calls waiting for their replies
  std::vector<std::shared_ptr<batch_decision>> out_;  ///< those batches
  deadline_settler settler_;                          ///< answers those whose time ran out
  command_args args_;                                 ///< the call being built
  std::vector<batch_entry> entries_;                  ///< ... its requests
  std::string command_;                               ///< ... and formatted
};

}  // namespace tollgate::store::redis
