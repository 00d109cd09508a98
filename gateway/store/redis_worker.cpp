#include "gateway/store/redis_worker.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include <functional>

namespace tollgate::store::redis {

namespace {

/// What every link of a worker shares (host and port are the node's).
link_options common_options(const redis_options& o, boost::asio::ssl::context* tls) {
  link_options l;
  l.username = o.username;
  l.password = o.password;
  l.timeout = o.timeout;
  l.connect_timeout = o.connect_timeout;
  l.tls = tls;
  l.server_name = o.tls_server_name;
  return l;
}

/// Runs `on_shutdown` when its io_context shuts down, before the io_context is gone: what a
/// worker holds outside its io_context's handlers (decisions waiting for the next batch, whose
/// handlers own session frames) is let go then, as Asio lets go of its own pending handlers.
class shutdown_hook final : public boost::asio::execution_context::service {
 public:
  using key_type = shutdown_hook;
  static boost::asio::execution_context::id id;
  explicit shutdown_hook(boost::asio::execution_context& c)
      : boost::asio::execution_context::service(c) {}
  std::vector<std::function<void()>> on_shutdown;  ///< one per store side attached here

 private:
  void shutdown() override {
    for (auto& f : on_shutdown)
      f();
    on_shutdown.clear();
  }
};
boost::asio::execution_context::id shutdown_hook::id;

}  // namespace

void node::on_reply(pending_call& c, const redisReply* reply, failure why) {
  owner.on_reply(*this, c, reply, why);
}

void node::on_state(bool up, const std::string& why) {
  owner.on_node_state(*this, up, why);
}

worker_context::worker_context(worker& w, const redis_options& options,
                               boost::asio::ssl::context* tls, local_store* fallback,
                               std::uint32_t worker_index)
    : o(options),
      index(worker_index),
      nodes(w, common_options(options, tls)),
      slots(options, nodes, worker_index),
      fail(options.on_failure, fallback, counters) {
  for (const auto& [host, port] : o.nodes)
    nodes.add(host, port);
}

void worker_context::answered(const limit::limit_request& req, const limit::decision& out,
                              double latency) {
  counters.decisions[static_cast<std::size_t>(metrics::store_source::redis)].add();
  counters.latency.observe(latency, metrics::store_buckets);
  cache.remember(req, out);
}

void worker_context::count_error_reply(node& from, const redisReply& reply) {
  const std::string_view text(reply.str, reply.len);
  const std::string_view kind = error_kind(text);
  fail.count_error(kind, text);
  if (kind == "noscript") from.link->reload_script();
  // Also on one server: it may be a Cluster node (then its slot map is read, and logged).
  if (kind == "clusterdown" || kind == "redirect") slots.refresh();
}

worker::worker(const redis_options& o, boost::asio::ssl::context* tls, local_store* fallback,
               std::uint32_t index)
    : w_(*this, o, tls, fallback, index), batches_(w_), cluster_(w_) {}

void worker::attach(boost::asio::io_context& io) {
  io_ = &io;
  batches_.attach(io);
  boost::asio::use_service<shutdown_hook>(io).on_shutdown.emplace_back(
      [this] { batches_.shutdown(); });
  w_.nodes.attach(io);
}

void worker::clear_cache() {
  if (io_ == nullptr) return;
  boost::asio::post(*io_, [this] { w_.cache.clear(); });
}

bool worker::try_decide(const limit::limit_request& req, limit::decision& out) {
  if (w_.cache.reject(req, out)) {
    w_.counters.decisions[static_cast<std::size_t>(metrics::store_source::cache)].add();
    return true;
  }
  if (ready()) return false;
  // Redis is away: fail_mode decides at once, without waiting for a timeout (closed answers
  // through start_decide, which reports the failure).
  if (w_.fail.mode() == fail_mode::closed) return false;
  return w_.fail.decide(req, out);
}

void worker::start_decide(const limit::limit_request& req, limit::decision& out,
                          decide_handler done) {
  if (w_.o.cluster) return cluster_.start(req, out, std::move(done));
  if (!ready()) {
    // Known to be away: no call is made, and none fails.
    pending_call c(&req, &out, std::move(done));
    return w_.fail.finish_later(c);
  }
  batches_.start(req, out, std::move(done));
}

void worker::on_reply(node& from, pending_call& c, const redisReply* reply, failure why) {
  switch (c.kind) {
    case batch:
      return batches_.on_reply(from, c, reply, why);
    case whole:
      return cluster_.on_whole(from, c, reply, why);
    case part:
      return cluster_.on_part(from, c, reply, why);
    case refund:
      return cluster_.on_refund(reply, why);
   case slots:
      if (reply != nullptr && w_.slots.read(from, *reply)) update_ready();
      return;
    default:
      return;  // asking: +OK
  }
}

void worker::on_node_state(node& n, bool up, const std::string& why) {
  n.up = up;
  if (up) {
    spdlog::info("store: worker {} connected to redis {}", w_.index, why);
  } else {
    w_.counters.errors[static_cast<std::size_t>(metrics::store_error::connect)].add();
    spdlog::warn("store: worker {} cannot use redis ({}); fail_mode {} decides until it can",
                 w_.index, why, fail_mode_name(w_.fail.mode()));
  }
  // Connected: the slot map is asked for. A node gone may mean a failover: ask another node
  // where the slots are now.
  if (w_.o.cluster) w_.slots.refresh();
  update_ready();
}

void worker::update_ready() {
  const bool r = w_.o.cluster ? w_.slots.usable() : w_.nodes[0].up;
  ready_.store(r, std::memory_order_relaxed);
}

}  // namespace tollgate::store::redis
