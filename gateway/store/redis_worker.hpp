#pragma once
/// One worker's side of the Redis store (docs/design.md §11): its connections (one per server, or
/// per Cluster primary), its over-limit cache and counters, and the parts that decide: one server's
/// batches, Cluster routing, fail_mode. Internal to store/.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include <atomic>
#include <cstdint>
#include <string>

#include "gateway/metrics/counters.hpp"
#include "gateway/store/over_limit_cache.hpp"
#include "gateway/store/redis_batches.hpp"
#include "gateway/store/redis_cluster.hpp"
#include "gateway/store/redis_fail_mode.hpp"
#include "gateway/store/redis_nodes.hpp"
#include "gateway/store/redis_store.hpp"

namespace tollgate::store::redis {

/// What the parts of one worker's side share.
/// Thread safety: the worker's thread only, but the counters' values (any thread).
struct worker_context {
  /// The context of `w`, worker `worker_index`, with the store's settings and TLS context, and
  /// fail_mode local's store.
  worker_context(worker& w, const redis_options& options, boost::asio::ssl::context* tls,
                 local_store* fallback, std::uint32_t worker_index);

  /// A decision Redis made for `req`, `latency` seconds after its call was sent: counted,
  /// timed and remembered by the over-limit cache.
  void answered(const limit::limit_request& req, const limit::decision& out, double latency);
  /// An error reply to a decision from `from`: counted and logged; after NOSCRIPT the scripts
  /// are loaded again, after a Cluster error the slot map is asked for.
  void count_error_reply(node& from, const redisReply& reply);

  const redis_options& o;            ///< the store's settings
  std::uint32_t index;               ///< the worker's
  metrics::store_counters counters;  ///< the worker's
  over_limit_cache cache;            ///< keys Redis found over a limit
  node_set nodes;                    ///< the servers
  slot_map slots;                    ///< Cluster: which serves each slot
  fail_mode_answers fail;            ///< answers when Redis cannot
};

/// One worker's side of the store.
/// Thread safety: the worker's thread only, but `ready` and the counters' values.
class worker {
 public:
  /// The side of worker `index`; `fallback` is fail_mode local's store.
  worker(const redis_options& o, boost::asio::ssl::context* tls, local_store* fallback,
         std::uint32_t index);

  /// Connects through `io`, the worker's.
  void attach(boost::asio::io_context& io);
  /// As decision_store::try_decide: the over-limit cache, or fail_mode while Redis is away.
  bool try_decide(const limit::limit_request& req, limit::decision& out);
  /// As decision_store::start_decide.
  void start_decide(const limit::limit_request& req, limit::decision& out, decide_handler done);

  /// A node's reply to `c` (nullptr: none came, `why`).
  void on_reply(node& from, pending_call& c, const redisReply* reply, failure why);
  /// A node's link became usable (or stopped being so).
  void on_node_state(node& n, bool up, const std::string& why);

  /// Empties the over-limit cache, on the worker's thread (from any thread: an admin reset,
  /// docs/design.md §18).
  void clear_cache();

  /// The worker's counters.
  const metrics::store_counters& counters() const noexcept { return w_.counters; }
  /// Whether Redis (every node the slot map names) can be used.
  bool ready() const noexcept { return ready_.load(std::memory_order_relaxed); }

 private:
  /// Sets `ready_`: the server is up; with Cluster, the slot map is known and every node it
  /// names is up.
  void update_ready();

  worker_context w_;                       ///< what the parts share
  batch_sender batches_;                   ///< one server
  cluster_router cluster_;                 ///< Redis Cluster
  std::atomic<bool> ready_{false};         ///< Redis can be used
  boost::asio::io_context* io_ = nullptr;  ///< the worker's, once attached
};

}  // namespace tollgate::store::redis
