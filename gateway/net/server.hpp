#pragma once
/// The public listeners and the worker threads that serve them: one io_context per thread, an
/// acceptor per listener on every worker (SO_REUSEPORT: the kernel spreads connections), and
/// connections pinned to the worker that accepted them.

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gateway/net/worker.hpp"

namespace tollgate::net {

/// Workers and listeners.
/// Thread safety: construct, bind and run from one thread; publish and stop from any.
class server {
 public:
  /// `workers` threads serving `initial`, sharing `shared`, with at most `max_connections`
  /// client connections (limits.max_connections, or fewer when descriptors are short).
  server(std::shared_ptr<const snapshot> initial, shared_state& shared, unsigned workers,
         std::uint32_t max_connections, metrics::registry& metrics);
  ~server();

  /// Binds every listener of the initial snapshot on every worker; throws on failure.
  void bind();
  /// The bound endpoint of each listener, by name (port 0 resolved).
  const std::vector<std::pair<std::string, tcp::endpoint>>& bound() const { return bound_; }
  /// Starts the worker threads.
  void start();
  /// Every worker's counters, for a scrape.
  std::vector<const metrics::worker_counters*> counters() const;
  /// Counts one ban in worker 0's counters, on its thread (from any thread: a ban a shared
  /// violation caused, docs/design.md §18).
  void count_ban();
  /// Counts a step of the penalty ladder entered (`a`), likewise.
  void count_transition(pow::penalty_action a);
  /// Every worker's rejections per client, for the admin API.
  std::vector<const limit::rejection_tally*> limited() const;
  /// Installs `s` on every worker; requests that start afterwards use it.
  void publish(std::shared_ptr<const snapshot> s);
  /// Stops accepting, gives requests in flight up to `grace` to finish, then stops the workers
  /// (closing idle connections) and joins their threads.
  void stop(std::chrono::nanoseconds grace);

 private:
  struct listening {
    std::unique_ptr<tcp_acceptor> acceptor;  ///< on its worker's io_context
    std::size_t listener;                    ///< index into infos_
  };
  metrics::registry& metrics_;               ///< label tables
  shared_state& shared_;                     ///< limiter, clock
  std::shared_ptr<const snapshot> initial_;  ///< listeners come from it
  /// Open connections per client, across workers; before workers_, whose sessions hold slots
  /// until their io_contexts are destroyed.
  address_slots per_address_;
  address_slots per_network_;                      ///< open connections per client network
  address_slots tunnels_per_address_;              ///< open WebSockets per client and category
  limit::inflight_table inflight_;                 ///< requests in flight per concurrency key
  std::vector<std::unique_ptr<worker>> workers_;   ///< one per thread
  std::vector<std::vector<listening>> acceptors_;  ///< per worker
  std::vector<listener_info> infos_;               ///< per listener
  std::vector<std::pair<std::string, tcp::endpoint>> bound_;  ///< per listener
  std::vector<std::thread> threads_;                          ///< one per worker
};

}  // namespace tollgate::net
