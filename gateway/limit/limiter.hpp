#pragma once
/// The interface the request path asks for decisions through.

#include "gateway/limit/request.hpp"

namespace tollgate::limit {

/// Called once when a decision that did not complete at once is ready.
struct completion {
  void (*fn)(void* context) = nullptr;  ///< invoked with `context`
  void* context = nullptr;              ///< the caller's state (kept alive until `fn` runs)
};

/// Evaluates and commits a request's set of limits all-or-nothing (DESIGN §3).
/// An in-process store answers at once; a remote one (Redis) completes later on the caller's
/// event loop, so callers are written once for both.
/// Thread safety: implementations are safe to call from any thread.
class limiter {
 public:
  virtual ~limiter() = default;
  /// Decides `req`. Returns true when `out` is filled before returning (then `done` is never
  /// called); otherwise `done` runs exactly once later, after `out` is filled. `req` and `out`
  /// must stay alive until then.
  virtual bool decide(const limit_request& req, decision& out, completion done) = 0;
  /// A hint that `req` will be decided soon: an in-process store starts loading the state it
  /// will touch, so the cache misses overlap with whatever the caller does in between.
  virtual void prepare(const limit_request& req) noexcept { (void)req; }
};

}  // namespace tollgate::limit
