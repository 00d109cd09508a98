#pragma once
/// The admitted half of a request: relayed to its upstream and the response relayed back, both
/// bodies streamed chunk by chunk. Internal to net/.

#include "gateway/net/local_answer.hpp"
#include "gateway/net/scratch.hpp"
#include "gateway/net/stream_io.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

/// Records a violation of reason `reason` (an index into the snapshot's violation rules) by
/// the client of `a` at `now`: counts it, logs and counts the ban it may cause, and adds the
/// points the penalty ladder gives it.
void record_violation(worker& w, const snapshot& snap, const admission::record& a,
                      std::size_t reason, core::nanos now);

/// Adds `points` on the penalty ladder (docs/design.md §16) to the client of `a` at `now`,
/// for `event`; counts and logs the step it may enter. Nothing without a ladder or points.
void add_points(worker& w, const snapshot& snap, const admission::record& a, std::uint32_t points,
                std::string_view event, core::nanos now);

/// Most bytes of an upstream's response head, and of its chunk metadata or trailers.
inline constexpr std::size_t max_response_head = 64 * 1024;

/// Whether RFC 9110 §9.2.2 lets a request be sent again after a failure: an idempotent method.
bool idempotent(http::verb v) noexcept;

/// Whether `ec` says the upstream closed the connection before any byte of an answer, the one
/// failure of a pooled connection that may be retried: an unparseable answer or an unasked-for
/// 101 says the upstream did see the request.
bool closed_before_answer(const error_code& ec) noexcept;

/// The problem+json body of a 502 (`timeout` false) or 504 about upstream `name`.
std::string upstream_problem(bool timeout, const std::string& name, const std::string& what);

/// Records the violations an upstream response `rp` to `r` reports: its X-Tollgate-Violation
/// fields and a status the category maps to a reason. Unknown reasons are ignored (logged at
/// debug).
void record_response_violations(worker& w, const request_in_hand& r, const response_parser& rp);

/// Remembers the consumer tier an upstream response `rp` to `r` sets in X-Tollgate-Tier for its
/// client, for tier_ttl, when the route's policy takes tiers from upstreams (docs/design.md
/// §15). A name that is not one of its tiers is ignored (logged at debug).
void record_response_tier(worker& w, const request_in_hand& r, const response_parser& rp);

/// Forwards the request in hand of `scratch` (admitted, its head read) from the client of
/// `watch`. Answers 502/504 itself when the upstream fails before its response starts.
/// Returns whether the client connection stays open.
task<bool> forward(worker& w, deadline_watch& watch, connection_scratch& scratch);

}  // namespace tollgate::net
