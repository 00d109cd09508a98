#pragma once
/// What a request leaves behind besides its answer: admission's effects applied (counters,
/// violations), and once its response is sent, the response counted and the access log line
/// written. Internal to net/.

#include <cstdint>

#include "gateway/net/scratch.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

/// Applies admission's effects on the request in hand: counts its outcome, proof results and
/// challenge, records a failed proof's violation, counts what its limits did.
void apply_effects(worker& w, const request_in_hand& r);

/// Counts an upgrade of the request in hand refused for `why`.
void count_refused_upgrade(worker& w, const request_in_hand& r, metrics::upgrade_refusal why);

/// Phase 5, once the response to the request in hand is sent (its last byte: `written` so
/// far on the connection): counts it by status class and time (tollgate_responses_total,
/// tollgate_request_duration_seconds) and logs it when the access log is on (nothing is
/// formatted per request otherwise).
void finish_request(worker& w, connection_scratch& sc, std::uint64_t written);

}  // namespace tollgate::net
