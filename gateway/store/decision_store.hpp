#pragma once
/// The asynchronous decision seam (docs/design.md §3, §11): the request path asks a store to decide
/// a request's set of limits. An in-process store answers at once; a remote one (Redis) answers
/// later on the caller's event loop, and the caller awaits it with async_decide. The
/// store-neutral rules (the order of docs/design.md §5, pay to pass, shadow mode) live in
/// policy::gate, not here. Shape: Asio's example/cpp20/type_erasure (a virtual function taking
/// any_completion_handler, wrapped by an async_initiate template).

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/core/key_block.hpp"
#include "gateway/limit/request.hpp"

namespace boost::asio {
class io_context;
}

namespace tollgate::metrics {
struct store_counters;
}

namespace tollgate::store {

/// Called once when a decision that did not complete at once is ready; an error means none
/// was made (the store could not be reached in time).
using decide_handler = boost::asio::any_completion_handler<void(boost::system::error_code)>;

/// Entries one of a store's tables holds (the tollgate_tracked_keys gauge).
struct table_size {
  std::string name;             ///< label value: an address level's name, or "keyed"
  std::size_t entries = 0;      ///< entries held
  std::size_t capacity = 0;     ///< most entries it holds
  std::uint64_t evictions = 0;  ///< live entries dropped to make room (address rotation)
};

/// What a store holds for one key of one limit (the admin API).
struct limit_state {
  core::nanos tat[2] = {0, 0};  ///< stored tat of the short and the long tier
};

/// What a store says of itself to a scrape and to /readyz.
struct store_report {
  bool shared = false;         ///< its state is shared with other replicas (Redis)
  bool degraded = false;       ///< that state cannot be reached now: fail_mode decides
  bool refusing = false;       ///< ... and refuses every decision meanwhile (fail_mode closed)
  std::string_view fail_mode;  ///< what decides while degraded ("local", "open", "closed")
  /// The store's own counters, per worker (tollgate_store_*; none for the in-process store).
  std::vector<const metrics::store_counters*> counters;
};

/// A store of limiter state.
/// Thread safety: implementations are safe to call from any worker thread.
class decision_store {
 public:
  virtual ~decision_store() = default;

  /// Worker `index` runs `io` (called for each worker before any runs): a remote store opens
  /// its connections there, and later serves that worker's requests (limit_request::home) on
  /// them. The in-process store needs nothing.
  virtual void attach(std::uint32_t index, boost::asio::io_context& io) {
    (void)index;
    (void)io;
  }

  /// Decides `req` into `out` if that can be done at once, and says whether it was.
  virtual bool try_decide(const limit::limit_request& req, limit::decision& out) = 0;
  /// Decides `req` into `out` later: `done` runs once, on its associated executor, after `out`
  /// is filled. `req` and `out` stay alive until then. An implementation bounds its own wait
  /// (Redis: `store.timeout`, then `fail_mode`) and completes with an error rather than never:
  /// the session awaiting it is not on its socket, so the client's deadline cannot end it.
  virtual void start_decide(const limit::limit_request& req, limit::decision& out,
                            decide_handler done) = 0;

  /// Entries held, per table.
  virtual std::vector<table_size> tracked() const = 0;
  /// The state of `key` under `spec`, if the store holds any.
  virtual std::optional<limit_state> state_of(const limit::limit_spec& spec, std::uint64_t key) = 0;
  /// Forgets the in-process state of every address-level key overlapping `block` (keys masked
  /// to `prefixes`) in every category; returns the entries removed. A remote store forgets
  /// its in-process fallback's, not the shared state (docs/replicas.md says what stays); a store
  /// with no in-process state forgets nothing.
  virtual std::size_t forget(const core::key_block& block, const core::level_prefixes& prefixes) {
    (void)block;
    (void)prefixes;
    return 0;
  }

  /// What the store says of itself (scrape and readiness time, any thread). The in-process
  /// store has nothing to say: not shared, never degraded.
  virtual store_report report() const { return {}; }
};

/// Decides `req` into `out` through `s`, completing with `void(error_code)` by `token`
/// (`co_await async_decide(s, req, out, as_tuple(deferred))` in a coroutine).
template <class Token>
auto async_decide(decision_store& s, const limit::limit_request& req, limit::decision& out,
                  Token&& token) {
  return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
      [&s, &req, &out](auto handler) {
        s.start_decide(req, out, decide_handler(std::move(handler)));
      },
      token);
}

}  // namespace tollgate::store
