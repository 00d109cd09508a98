#pragma once
/// The Redis store (docs/design.md §11): replicas share limiter state in one Redis. Each decision
/// is one EVALSHA of the GCRA script on the worker's own pipelined connection; a key Redis found
/// over its limit is answered from the worker's over-limit cache until its wait ends; when
/// Redis cannot answer within `timeout`, `fail_mode` decides (local: the in-process store,
/// open: admit without headers, closed: 503 store_unavailable), and the links reconnect by
/// themselves.
///
/// Each worker's side (redis_worker) is made of parts with one job each: redis_batches (one
/// server: a turn's decisions in one call), redis_cluster (the slot map, a decision split by
/// slot, refunds, redirections), redis_fail_mode (answers without Redis, and each decision's
/// own deadline), over the worker's nodes (redis_nodes), their links (redis_link) and what is
/// said on them (redis_wire).

#include <boost/asio/ssl/context.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/metrics/counters.hpp"
#include "gateway/store/decision_store.hpp"
#include "gateway/store/local_store.hpp"
#include "gateway/store/redis_link.hpp"

namespace tollgate::store {

namespace redis {
class worker;
}

/// What `fail_mode` does while Redis cannot answer.
enum class fail_mode : std::uint8_t { local, open, closed };

/// Its configuration name ("local", "open", "closed").
constexpr std::string_view fail_mode_name(fail_mode m) noexcept {
  constexpr std::string_view names[] = {"local", "open", "closed"};
  return names[static_cast<std::size_t>(m)];
}

/// The Redis store's settings (from config::store_config).
struct redis_options {
  /// The server, or the Cluster's seed nodes (host, port).
  std::vector<std::pair<std::string, std::uint16_t>> nodes;
  bool cluster = false;                                               ///< Redis Cluster
  std::string username;                                               ///< ACL user, or ""
  std::string password;                                               ///< "": no AUTH
  std::string key_prefix = "tg:";                                     ///< of every key
  std::chrono::nanoseconds timeout{std::chrono::milliseconds(5)};     ///< per decision
  std::chrono::nanoseconds connect_timeout{std::chrono::seconds(1)};  ///< per attempt
  fail_mode on_failure = fail_mode::local;                            ///< fail_mode
  /// TLS toward Redis: CA bundle (empty: no TLS), client certificate and key, server name.
  std::string tls_ca, tls_certificate, tls_private_key, tls_server_name;
};

/// The options of a control connection to `host`:`port` under `o` (redis_records,
/// redis_journal): AUTH and TLS as the store's, and a per-call timeout of max(connect_timeout,
/// 1 s) rather than the per-decision one, for calls that may take a while.
redis::link_options control_link(const redis_options& o, boost::asio::ssl::context* tls,
                                 const std::string& host, std::uint16_t port,
                                 std::size_t max_in_flight);

/// Thread safety: try_decide and start_decide on the worker's thread of limit_request::home
/// (the one attached under that index); the rest from any thread.
class redis_store final : public decision_store {
 public:
  /// A store for `workers` workers; `fallback` is the in-process store of fail_mode local.
  /// Throws std::runtime_error when the TLS files cannot be loaded.
  redis_store(redis_options o, std::uint32_t workers, std::unique_ptr<local_store> fallback);
  ~redis_store() override;

  void attach(std::uint32_t index, boost::asio::io_context& io) override;
  bool try_decide(const limit::limit_request& req, limit::decision& out) override;
  void start_decide(const limit::limit_request& req, limit::decision& out,
                    decide_handler done) override;
  /// The in-process fallback's tables (what fail_mode local holds).
  std::vector<table_size> tracked() const override;
  /// The in-process fallback's state (Redis's is not read from the admin thread).
  std::optional<limit_state> state_of(const limit::limit_spec& spec, std::uint64_t key) override;
  /// The in-process fallback's state, and every worker's over-limit cache (emptied on the
  /// worker's thread soon after); Redis's keys are the caller's (app/standing.cpp).
  std::size_t forget(const core::key_block& block, const core::level_prefixes& prefixes) override;

  /// Shared; degraded while some worker cannot reach Redis (fail_mode decides its requests);
  /// every worker's counters.
  store_report report() const override;

  /// Its settings, and its TLS context toward Redis (null without TLS): what a records
  /// follower (redis_records) connects with.
  const redis_options& options() const noexcept { return o_; }
  boost::asio::ssl::context* tls() const noexcept { return tls_.get(); }

 private:
  /// Whether some worker cannot reach Redis (fail_mode decides its requests).
  bool degraded() const noexcept;
  /// Every worker's counters, for a scrape.
  std::vector<const metrics::store_counters*> counters() const;

  redis_options o_;                                      ///< settings
  std::unique_ptr<boost::asio::ssl::context> tls_;       ///< TLS toward Redis, when configured
  std::unique_ptr<local_store> fallback_;                ///< fail_mode local
  std::vector<std::unique_ptr<redis::worker>> workers_;  ///< by index
};

}  // namespace tollgate::store
