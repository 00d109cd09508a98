#include "gateway/store/redis_batches.hpp"

#include <hiredis/hiredis.h>

#include <boost/asio/post.hpp>

#include <algorithm>

#include "gateway/store/redis_worker.hpp"

namespace tollgate::store::redis {

batch_sender::batch_sender(worker_context& w) : w_(w), settler_(w.fail, out_) {}

void batch_sender::attach(boost::asio::io_context& io) {
  io_ = &io;
  settler_.attach(io);
}

void batch_sender::shutdown() {
  std::vector<pending_call> dropped;
  dropped.swap(waiting_);
  out_.clear();
  // The timer goes with the io_context (this side outlives it).
  settler_.shutdown();
}

void batch_sender::start(const limit::limit_request& req, limit::decision& out,
                         decide_handler&& done) {
  // The decisions made while a call is out wait for its reply and go in the next call
  // together (the first goes at the end of this turn of the event loop), so that under load
  // one script run decides many (a key repeated in a batch is read and written once) at the
  // cost of at most one more round trip.
  // The timeout runs from now, not from when the batch is written: a decision that waits for
  // the call before it must not wait a whole timeout more after it.
  waiting_.emplace_back(&req, &out, std::move(done));
  waiting_.back().deadline = clock_type::now() + w_.o.timeout;
  if (batches_out_ == 0) schedule();
}

void batch_sender::schedule() {
  if (flush_posted_) return;
  flush_posted_ = true;
  boost::asio::post(*io_, [this] { send_batches(); });
}

/// Sends the decisions waiting, max_batch to a call.
void batch_sender::send_batches() {
  flush_posted_ = false;
  std::vector<pending_call> waited, all;
  waited.swap(waiting_);
  all.reserve(waited.size());
  // Decisions whose own time ran out while they waited for the call before are answered by
  // fail_mode now, and not sent: Redis would charge what the client was already told.
  const auto now = clock_type::now();
  bool expired = false;
  for (auto& c : waited) {
    if (c.deadline > now) {
      all.emplace_back(std::move(c));
      continue;
    }
    expired = true;
    w_.fail.finish(c);
  }
  if (expired) w_.fail.count(failure::timeout);
  for (std::size_t first = 0; first < all.size(); first += max_batch) {
    auto b = std::make_shared<batch_decision>();
    const std::size_t last = std::min(all.size(), first + max_batch);
    b->items.reserve(last - first);
    entries_.clear();
    // Each item keeps its own deadline (asked + timeout): the settler answers it by
    // fail_mode when that passes first. The call waits for the latest of them.
    auto deadline = clock_type::time_point::min();
    for (std::size_t i = first; i < last; ++i) {
      deadline = std::max(deadline, all[i].deadline);
      b->items.emplace_back(std::move(all[i]));
      entries_.push_back({b->items.back().req});
    }
    b->settled.assign(b->items.size(), 0);
    node& to = w_.nodes[0];
    failure why = failure::io;
    if (to.up) {
      build_call(args_, "EVALSHA", gcra_sha(), w_.o.key_prefix, entries_);
      command_.clear();
      if (append_command(command_, args_)) {
        pending_call c;
        c.kind = batch;
        c.context = b;
        c.deadline = deadline;
        why = to.link->call(command_, std::move(c));
        if (why == failure::none) {
          ++batches_out_;
          out_.push_back(b);
          settler_.arm(b->items.front().deadline);  // the first asked is the first due
          continue;
        }
      }
    }
    w_.fail.count(why);
    for (auto& item : b->items)
      w_.fail.finish(item);
  }
}

void batch_sender::on_reply(node& from, pending_call& c, const redisReply* reply, failure why) {
  auto b = std::static_pointer_cast<batch_decision>(c.context);
  std::erase(out_, b);
  // The decisions that waited for this call go now.
  --batches_out_;
  if (!waiting_.empty()) schedule();
  if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
    if (reply == nullptr) {
      if (why != failure::timeout || !b->timeout_counted) w_.fail.count(why);
    } else {
      w_.count_error_reply(from, *reply);
    }
    for (std::size_t i = 0; i < b->items.size(); ++i) {
      if (!b->settled[i]) w_.fail.finish(b->items[i]);
    }
    return;
  }
  entries_.clear();
  for (const auto& item : b->items)
    entries_.push_back({item.req});
  core::nanos redis_now = 0;
  const bool shaped = read_now(*reply, entries_, redis_now);
  const double latency = std::chrono::duration<double>(clock_type::now() - c.sent).count();
  std::size_t at = 2;
  script_reply r;
  for (std::size_t i = 0; i < b->items.size(); ++i) {
    pending_call& item = b->items[i];
    if (!shaped || !read_entry(*reply, at, entries_[i], r)) {
      w_.fail.count_malformed();
      // Entries after a malformed one cannot be found: all of them by fail_mode.
      for (; i < b->items.size(); ++i) {
        if (!b->settled[i]) w_.fail.finish(b->items[i]);
      }
      return;
    }
    // Answered by fail_mode already: Redis's verdict comes too late to tell (what it
    // committed stays, as for any call that times out after Redis ran it).
    if (b->settled[i]) continue;
    assemble(*item.req, r, r.admitted, r.shadow_limited, *item.out);
    w_.answered(*item.req, *item.out, latency);
    std::move(item.done)(boost::system::error_code{});
  }
}

}  // namespace tollgate::store::redis
