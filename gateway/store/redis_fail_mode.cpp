#include "gateway/store/redis_fail_mode.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/prefer.hpp>

namespace tollgate::store::redis {

using metrics::store_error;
using metrics::store_source;

const boost::system::error_code unavailable =
    boost::asio::error::make_error_code(boost::asio::error::timed_out);

void complete_later(decide_handler done, boost::system::error_code ec) {
  namespace execution = boost::asio::execution;
  const auto ex =
      boost::asio::prefer(boost::asio::get_associated_executor(done), execution::blocking.never);
  ex.execute([done = std::move(done), ec]() mutable { std::move(done)(ec); });
}

bool fail_mode_answers::decide(const limit::limit_request& req, limit::decision& out) {
  switch (mode_) {
    case fail_mode::local:
      counters_.decisions[static_cast<std::size_t>(store_source::local)].add();
      fallback_->try_decide(req, out);
      return true;
    case fail_mode::open:
      // Admitted, and no limit is told: nothing false reaches the headers.
      counters_.decisions[static_cast<std::size_t>(store_source::open)].add();
      out = limit::decision{};
      out.admitted = true;
      return true;
    case fail_mode::closed:
      counters_.decisions[static_cast<std::size_t>(store_source::closed)].add();
      return false;
  }
  return false;
}

void fail_mode_answers::finish(pending_call& c) {
  const bool decided = decide(*c.req, *c.out);
  std::move(c.done)(decided ? boost::system::error_code{} : unavailable);
}

void fail_mode_answers::finish_later(pending_call& c) {
  const bool decided = decide(*c.req, *c.out);
  complete_later(std::move(c.done), decided ? boost::system::error_code{} : unavailable);
}

void fail_mode_answers::count(failure why) {
  store_error e = store_error::io;
  if (why == failure::timeout) e = store_error::timeout;
  if (why == failure::overload) e = store_error::overload;
  counters_.errors[static_cast<std::size_t>(e)].add();
}

void fail_mode_answers::count_malformed() {
  counters_.errors[static_cast<std::size_t>(store_error::script)].add();
  log_error("a reply of the wrong shape");
}

void fail_mode_answers::count_error(std::string_view kind, std::string_view text) {
  counters_.errors[static_cast<std::size_t>(kind == "oom" ? store_error::oom : store_error::script)]
      .add();
  log_error(text);
}

void fail_mode_answers::log_error(std::string_view text) {
  const auto now = clock_type::now();
  if (now - last_error_log_ < std::chrono::seconds(1)) return;
  last_error_log_ = now;
  spdlog::error("store: redis answered a decision with an error: {}", text);
}

void deadline_settler::arm(clock_type::time_point at) {
  if (armed_ && at_ <= at) return;
  armed_ = true;
  at_ = at;
  timer_->expires_at(at);
  timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // re-armed sooner, or shutting down
    armed_ = false;
    settle_due();
  });
}

void deadline_settler::settle_due() {
  const auto now = clock_type::now();
  auto next = clock_type::time_point::max();
  // A copy: completing a decision may start others, which may send and finish batches.
  const auto batches = out_;
  for (const auto& b : batches) {
    for (std::size_t i = 0; i < b->items.size(); ++i) {
      if (b->settled[i]) continue;
      if (b->items[i].deadline > now) {
        next = std::min(next, b->items[i].deadline);
        continue;
      }
      if (!b->timeout_counted) {
        b->timeout_counted = true;
        fail_.count(failure::timeout);
      }
      b->settled[i] = 1;
      fail_.finish(b->items[i]);
    }
  }
  if (next != clock_type::time_point::max()) arm(next);
}

}  // namespace tollgate::store::redis
