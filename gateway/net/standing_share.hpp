#pragma once
/// What the request path hands to the standing replicas share (docs/design.md §18): with
/// `store: redis`, a violation is not applied where it happened but sent to every replica
/// (this one included), which apply it in one order; a proof is spent once across replicas.
/// app/standing.cpp implements it. Internal to net/.

#include <cstdint>
#include <string_view>

#include "gateway/core/address.hpp"
#include "gateway/core/clock.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/store/redis_journal.hpp"

namespace tollgate::net {

/// Thread safety: every member function may be called from any worker thread.
class standing_share {
 public:
  virtual ~standing_share() = default;
  /// Sends a violation of reason `reason` under `rule` by `who` at `now` to every replica;
  /// false when it cannot now (Redis away): the caller applies it here.
  virtual bool violation(const policy::client_subjects& who, std::string_view reason,
                         const pow::reason_rule& rule, core::nanos now) = 0;
  /// Spends the proof of `challenge` (valid until `expires`, Unix seconds) across replicas:
  /// `done` gets whether it was unspent, or an error when Redis could not say within the
  /// store's timeout (fail_mode decides).
  virtual void spend(std::string_view challenge, std::int64_t expires,
                     store::claim_handler done) = 0;
  /// Adds `points` on the penalty ladder for `client` (in logs: its `identity`, or when that
  /// is empty its `address`), counted by worker `worker`, to every replica: batched per client
  /// and sent every poll (one Redis call for every client of the interval, none per request).
  /// False when it cannot now (Redis away): the caller adds them here.
  virtual bool points(std::uint32_t worker, const pow::subject& client, std::uint32_t points,
                      std::string_view identity, const core::address& address, core::nanos now) = 0;
  /// Sets `tier` for `client` until `until` (an upstream's X-Tollgate-Tier) on every replica:
  /// gathered per worker (the latest per client) and sent every poll. False when it cannot
  /// now: the caller sets it here.
  virtual bool tier(std::uint32_t worker, const pow::subject& client, std::string_view tier,
                    core::nanos until) = 0;
  /// Whether fail_mode is closed: a proof Redis cannot judge gets 503, not this replica's word.
  virtual bool closed() const noexcept = 0;
};

}  // namespace tollgate::net
