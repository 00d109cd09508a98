#pragma once
/// A worker thread's world: its io_context, its upstream pool and its view of the current
/// snapshot. Connections are pinned to one worker for life, so none of this needs a lock.

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>

#include "gateway/core/clock.hpp"
#include "gateway/core/log_file.hpp"
#include "gateway/identity/token_cache.hpp"
#include "gateway/limit/held.hpp"
#include "gateway/limit/top_limited.hpp"
#include "gateway/metrics/counters.hpp"
#include "gateway/net/acme_tokens.hpp"
#include "gateway/net/address_slots.hpp"
#include "gateway/net/asio.hpp"
#include "gateway/net/deadline.hpp"
#include "gateway/net/scratch.hpp"
#include "gateway/net/snapshot.hpp"
#include "gateway/net/standing_share.hpp"
#include "gateway/net/stream_io.hpp"
#include "gateway/net/upstream_pool.hpp"
#include "gateway/net/websocket.hpp"
#include "gateway/policy/gate.hpp"
#include "gateway/policy/overrides.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/store/decision_store.hpp"

namespace tollgate::net {

/// What every worker shares with the others.
/// Thread safety: every member is thread-safe.
struct shared_state {
  store::decision_store& store;          ///< the limiter store
  const core::clock& clock;              ///< time for decisions and headers
  policy::pow_state& pow;                ///< challenges, replay cache, violation counters, bans
  policy::gate gate{pow};                ///< docs/design.md §5's order, over `pow`
  core::log_file* access_log = nullptr;  ///< where access log lines go, when on
  /// The tiers upstreams set (docs/design.md §15), for the life of the process.
  std::shared_ptr<policy::tier_memory> tiers_set = std::make_shared<policy::tier_memory>();
  /// The admin API's overrides (docs/design.md §15), for the life of the process.
  std::shared_ptr<policy::override_book> overrides = std::make_shared<policy::override_book>();
  /// With `store: redis`, where violations and spent proofs go so that every replica shares
  /// them (docs/design.md §18); null: this process alone.
  standing_share* standing = nullptr;
  /// The http-01 challenges the ACME client has under way (docs/design.md §17).
  std::shared_ptr<acme_tokens> acme = std::make_shared<acme_tokens>();
};

/// A listener as sessions see it.
struct listener_info {
  std::string name;             ///< from the configuration
  bool tls = false;             ///< X-Forwarded-Proto https
  bool proxy_protocol = false;  ///< connections start with a PROXY protocol header
  std::uint16_t metric = 0;     ///< label index of the listener
  bool http2 = false;           ///< HTTP/2 by ALPN, or with prior knowledge (docs/design.md §17)
};

/// Counts something for as long as it lives, in a counter only this worker writes: a plain
/// load and store, no locked instruction.
struct worker_count {
  explicit worker_count(std::atomic<std::uint64_t>& c) : count(c) {
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  ~worker_count() {
    count.store(count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  worker_count(const worker_count&) = delete;
  worker_count& operator=(const worker_count&) = delete;
  std::atomic<std::uint64_t>& count;  ///< the counter
};

/// One worker thread.
/// Thread safety: everything but `io` is touched only from `io`'s thread.
struct worker {
  explicit worker(shared_state& s) : shared(s) {
    std::random_device random;
    token_key_ = {(std::uint64_t{random()} << 32) | random(),
                  (std::uint64_t{random()} << 32) | random()};
  }
  // Members that sessions touch as they end come before `io`: the io_context is destroyed
  // last, and with it the frames of the sessions still suspended on it (a stop), whose
  // destructors give back scratch, leave the idle list and count the connection closed.
  shared_state& shared;  ///< limiter, clock
  /// Open client connections of this worker. Atomic only so that stop() may read it from
  /// another thread; written by this worker alone, so its cache line never bounces.
  std::atomic<std::uint64_t> connections{0};
  std::atomic<std::uint64_t> in_flight{0};  ///< requests between head read and response end
  std::uint64_t max_connections = 0;        ///< this worker's share of limits.max_connections
  std::uint32_t max_connections_total = 0;  ///< limits.max_connections in force, every worker's
  std::uint32_t index = 0;                  ///< 0..workers-1: its slice of every global limit
  address_slots* per_address = nullptr;     ///< open connections per client, all workers'
  address_slots* per_network = nullptr;     ///< open connections per client network, likewise
  /// Open WebSocket connections per client and category, all workers'.
  address_slots* tunnels_per_address = nullptr;
  /// Requests in flight per concurrency limit and key, all workers' (docs/design.md §15).
  limit::inflight_table* inflight = nullptr;
  /// Requests this worker holds per limit under on_excess (docs/design.md §16).
  limit::hold_counts held;
  tunnel_list tunnels;    ///< this worker's WebSocket tunnels
  idle_connections idle;  ///< keep-alive connections between requests
  scratch_pool scratch;   ///< buffers of connections with a request
  /// Refusals not yet logged (logged at most once per interval, so an attack cannot flood
  /// the log; every one is counted in the metrics at once).
  std::uint64_t refusals_unlogged = 0;
  std::chrono::steady_clock::time_point refusals_logged;  ///< when they were last logged
  metrics::worker_counters counters;                      ///< written by this worker only
  /// Rejections (429, pay-to-pass 428) per client over the last minute or two: counted on the
  /// rejection path only, read by the admin API (GET /admin/limited).
  limit::rejection_tally limited{60 * core::ns_per_s};
  /// Run by exactly one thread, and every socket and timer on it is used only from that
  /// thread (other threads only post), so the reactor needs no locks.
  asio::io_context io{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  upstream_pool pool{io.get_executor()};  ///< this worker's upstream connections
  /// The current snapshot through a control block of this worker's own, so that sessions
  /// copying it per request do not contend with other cores on one reference count.
  std::shared_ptr<const snapshot> current;

  /// The buffer every tunnel of this worker reads into once its socket is readable, and
  /// relays from before it reads again: a waiting tunnel holds no buffer of its own.
  std::array<char, 64 * 1024>& relay_buffer() {
    if (!relay_) relay_ = std::make_unique<std::array<char, 64 * 1024>>();
    return *relay_;
  }

  /// This worker's memory of verified tokens under snapshot `s`'s identity.jwt, or null
  /// when it has none (made at the first token, of the size configured).
  identity::token_cache* token_cache_for(const snapshot& s) {
    if (!s.jwt) return nullptr;
    const std::size_t capacity = s.config.identity.jwt->cache_entries;
    if (!tokens_ || tokens_capacity_ != capacity) {
      tokens_ = std::make_unique<identity::token_cache>(capacity, token_key_);
      tokens_capacity_ = capacity;
    }
    return tokens_.get();
  }
  core::siphash_key token_key_{};  ///< keys the token cache's hash (random, set at start)

  /// This worker's limits scaled by attack mode (docs/design.md §16) for snapshot `s`.
  policy::scaled_cache* scaled_for(const snapshot& s) {
    if (scaled_generation_ != s.generation) {
      scaled_.clear();
      scaled_generation_ = s.generation;
    }
    return &scaled_;
  }

  /// The overrides compiled for snapshot `s`, through a holder of this worker's own (copies
  /// count on it, not on a count every core shares); null when there are none. One load of
  /// the book's version per call while nothing changes.
  const std::shared_ptr<const policy::override_set>* overrides_for(const snapshot& s) {
    const std::uint64_t v = shared.overrides->version();
    if (v != overrides_version_ || s.generation != overrides_generation_) {
      overrides_version_ = v;
      overrides_generation_ = s.generation;
      overrides_.reset();
      if (auto set = shared.overrides->compiled(s.generation)) {
        auto holder = std::make_shared<std::shared_ptr<const policy::override_set>>(std::move(set));
        overrides_ = std::shared_ptr<const policy::override_set>(holder, holder->get());
      }
    }
    return overrides_ ? &overrides_ : nullptr;
  }

  /// Adopts `s` (call on this worker's thread). With consumer tiers, the counters of tiered
  /// rejections are made now, so that counting one never allocates.
  void adopt(std::shared_ptr<const snapshot> s) {
    if (s->consumer_tiers) counters.rate_limited_tiered.make();
    auto holder = std::make_shared<std::shared_ptr<const snapshot>>(std::move(s));
    current = std::shared_ptr<const snapshot>(holder, holder->get());
  }

 private:
  std::unique_ptr<std::array<char, 64 * 1024>> relay_;     ///< see relay_buffer
  policy::scaled_cache scaled_;                            ///< see scaled_for
  std::uint64_t scaled_generation_ = 0;                    ///< the snapshot it is for
  std::unique_ptr<identity::token_cache> tokens_;          ///< see token_cache_for
  std::size_t tokens_capacity_ = 0;                        ///< its capacity
  std::shared_ptr<const policy::override_set> overrides_;  ///< see overrides_for
  std::uint64_t overrides_version_ = ~0ull;                ///< the book's version it is of
  std::uint64_t overrides_generation_ = 0;                 ///< the snapshot it is for
};

/// Closes a connection just accepted, cheaply (a reset: no lingering state on either side),
/// and counts and logs the refusal of `peer`.
void refuse(worker& w, tcp_socket& socket, const listener_info& l, metrics::refusal why,
            const core::address& peer);

/// limits.max_connections_per_network, or when not written an eighth of the max_connections
/// in force (never below max_connections_per_address).
std::uint32_t network_cap(const worker& w);

/// Takes `client`'s places under the per-address and per-network connection caps into
/// `places`, or none for a client inside trusted_proxies (a balancer carries many clients,
/// bounded by max_connections and their own request limits); the cap that is full, if any.
std::optional<metrics::refusal> take_places(worker& w, const core::address& client,
                                            client_places& places);

}  // namespace tollgate::net
