#include "gateway/store/redis_store.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/prefer.hpp>

#include <stdexcept>

#include "gateway/store/over_limit_cache.hpp"
#include "gateway/store/redis_link.hpp"
#include "gateway/store/redis_wire.hpp"

namespace tollgate::store {

namespace {

using clock_type = std::chrono::steady_clock;
using metrics::store_error;
using metrics::store_source;

/// Completes `done` through its executor, never inline (the initiating function has not
/// returned yet).
void complete_later(decide_handler done, boost::system::error_code ec) {
  namespace execution = boost::asio::execution;
  const auto ex =
      boost::asio::prefer(boost::asio::get_associated_executor(done), execution::blocking.never);
  ex.execute([done = std::move(done), ec]() mutable { std::move(done)(ec); });
}

}  // namespace

/// One worker's connection to Redis, its over-limit cache and its counters. Everything but
/// `ready` and the counters' values is touched by that worker's thread only.
class redis_store::worker_side final : public redis::link_events {
 public:
  worker_side(redis_store& store, std::uint32_t index) : store_(store), index_(index) {}

  void attach(boost::asio::io_context& io) {
    redis::link_options o;
    o.host = store_.o_.host;
    o.port = store_.o_.port;
    o.username = store_.o_.username;
    o.password = store_.o_.password;
    o.timeout = store_.o_.timeout;
    o.connect_timeout = store_.o_.connect_timeout;
    o.tls = store_.tls_.get();
    o.server_name = store_.o_.tls_server_name;
    // Owned by its own coroutine on `io` (so that it dies with the io_context, before the
    // store); this side only points at it.
    auto l = redis::link::make(io, std::move(o), *this);
    link_ = l.get();
    l->start();
  }

  bool try_decide(const limit::limit_request& req, limit::decision& out) {
    if (cache_.reject(req, out)) {
      counters.decisions[static_cast<std::size_t>(store_source::cache)].add();
      return true;
    }
    if (link_ != nullptr && link_->ready()) return false;
    // Redis is away: fail_mode decides at once, without waiting for a timeout.
    return decide_without_redis(req, out);
  }

  void start_decide(const limit::limit_request& req, limit::decision& out, decide_handler done) {
    // (The handler is moved only by construction: see pending_call.)
    redis::pending_call c(&req, &out, std::move(done));
    redis::failure why = redis::failure::io;
    if (link_ != nullptr) {
      redis::build_call(args_, "EVALSHA", redis::gcra_sha(), store_.o_.key_prefix, req);
      command_.clear();
      if (redis::append_command(command_, args_)) {
        why = link_->call(command_, std::move(c));
        if (why == redis::failure::none) return;
      }
    }
    count_failure(why);
    if (decide_without_redis(req, out)) {
      complete_later(std::move(c.done), {});
    } else {
      complete_later(std::move(c.done), boost::asio::error::make_error_code(
                                            boost::asio::error::connection_refused));
    }
  }

  // ---- link_events ------------------------------------------------------------------------

  void on_reply(redis::pending_call& c, const redisReply* reply, redis::failure why) override {
    if (reply == nullptr) {
      count_failure(why);
      finish_without_redis(c);
      return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      const std::string_view text(reply->str, reply->len);
      const std::string_view kind = redis::error_kind(text);
      counters.errors[static_cast<std::size_t>(kind == "oom" ? store_error::oom
                                                             : store_error::script)]
          .add();
      if (kind == "noscript") link_->reload_script();
      log_error(text);
      finish_without_redis(c);
      return;
    }
    if (!redis::decode_decision(*reply, *c.req, *c.out)) {
      counters.errors[static_cast<std::size_t>(store_error::script)].add();
      log_error("a reply of the wrong shape");
      finish_without_redis(c);
      return;
    }
    counters.decisions[static_cast<std::size_t>(store_source::redis)].add();
    counters.latency.observe(
        std::chrono::duration<double>(clock_type::now() - c.sent).count(), metrics::store_buckets);
    cache_.remember(*c.req, *c.out);
    std::move(c.done)(boost::system::error_code{});
  }

  void on_state(bool ready, const std::string& why) override {
    this->ready.store(ready, std::memory_order_relaxed);
    if (ready) {
      spdlog::info("store: worker {} connected to redis {}", index_, why);
    } else {
      counters.errors[static_cast<std::size_t>(store_error::connect)].add();
      spdlog::warn("store: worker {} cannot use redis ({}); fail_mode {} decides until it can",
                   index_, why, mode_name());
    }
  }

  std::atomic<bool> ready{false};  ///< the link is usable
  metrics::store_counters counters;  ///< this worker's

 private:
  /// Decides by fail_mode: true with `out` filled (local, open), false for closed.
  bool decide_without_redis(const limit::limit_request& req, limit::decision& out) {
    switch (store_.o_.on_failure) {
      case fail_mode::local:
        counters.decisions[static_cast<std::size_t>(store_source::local)].add();
        store_.fallback_->try_decide(req, out);
        return true;
      case fail_mode::open:
        // Admitted, and no limit is told: nothing false reaches the headers.
        counters.decisions[static_cast<std::size_t>(store_source::open)].add();
        out = limit::decision{};
        out.admitted = true;
        return true;
      case fail_mode::closed:
        counters.decisions[static_cast<std::size_t>(store_source::closed)].add();
        return false;
    }
    return false;
  }

  /// A call that Redis did not answer: fail_mode decides it now.
  void finish_without_redis(redis::pending_call& c) {
    if (decide_without_redis(*c.req, *c.out)) {
      std::move(c.done)(boost::system::error_code{});
    } else {
      std::move(c.done)(boost::asio::error::make_error_code(boost::asio::error::timed_out));
    }
  }

  void count_failure(redis::failure why) {
    store_error e = store_error::io;
    if (why == redis::failure::timeout) e = store_error::timeout;
    if (why == redis::failure::overload) e = store_error::overload;
    counters.errors[static_cast<std::size_t>(e)].add();
  }

  /// Error replies are logged at most once a second per worker.
  void log_error(std::string_view text) {
    const auto now = clock_type::now();
    if (now - last_error_log_ < std::chrono::seconds(1)) return;
    last_error_log_ = now;
    spdlog::error("store: redis answered a decision with an error: {}", text);
  }

  std::string_view mode_name() const {
    switch (store_.o_.on_failure) {
      case fail_mode::local:
        return "local";
      case fail_mode::open:
        return "open";
      case fail_mode::closed:
        return "closed";
    }
    return "";
  }

  redis_store& store_;
  std::uint32_t index_;
  redis::link* link_ = nullptr;      ///< owned by its coroutine on this worker's io_context
  over_limit_cache cache_;           ///< keys Redis found over a limit
  redis::command_args args_;         ///< the call being built
  std::string command_;              ///< ... and formatted
  clock_type::time_point last_error_log_{};
};

redis_store::redis_store(redis_options o, std::uint32_t workers,
                         std::unique_ptr<local_store> fallback)
    : o_(std::move(o)), fallback_(std::move(fallback)) {
  if (!o_.tls_ca.empty()) {
    tls_ = std::make_unique<boost::asio::ssl::context>(boost::asio::ssl::context::tls_client);
    boost::system::error_code ec;
    tls_->load_verify_file(o_.tls_ca, ec);
    if (ec) throw std::runtime_error("store.tls.ca: " + o_.tls_ca + ": " + ec.message());
    if (!o_.tls_certificate.empty()) {
      tls_->use_certificate_chain_file(o_.tls_certificate, ec);
      if (ec) {
        throw std::runtime_error("store.tls.certificate: " + o_.tls_certificate + ": " +
                                 ec.message());
      }
      tls_->use_private_key_file(o_.tls_private_key, boost::asio::ssl::context::pem, ec);
      if (ec) {
        throw std::runtime_error("store.tls.private_key: " + o_.tls_private_key + ": " +
                                 ec.message());
      }
    }
  }
  for (std::uint32_t i = 0; i < std::max(1u, workers); ++i) {
    workers_.push_back(std::make_unique<worker_side>(*this, i));
  }
}

redis_store::~redis_store() = default;

void redis_store::attach(std::uint32_t index, boost::asio::io_context& io) {
  if (index < workers_.size()) workers_[index]->attach(io);
}

bool redis_store::try_decide(const limit::limit_request& req, limit::decision& out) {
  return workers_[req.home % workers_.size()]->try_decide(req, out);
}

void redis_store::start_decide(const limit::limit_request& req, limit::decision& out,
                               decide_handler done) {
  workers_[req.home % workers_.size()]->start_decide(req, out, std::move(done));
}

std::vector<table_size> redis_store::tracked() const { return fallback_->tracked(); }

std::optional<limit_state> redis_store::state_of(const limit::limit_spec& spec,
                                                 std::uint64_t key) {
  return fallback_->state_of(spec, key);
}

bool redis_store::degraded() const noexcept {
  for (const auto& w : workers_) {
    if (!w->ready.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

std::vector<const metrics::store_counters*> redis_store::counters() const {
  std::vector<const metrics::store_counters*> out;
  for (const auto& w : workers_) out.push_back(&w->counters);
  return out;
}

}  // namespace tollgate::store
