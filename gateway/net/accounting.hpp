#pragma once
/// What a request leaves behind besides its answer: admission's effects applied (counters,
/// violations), and once its response is sent, the response counted and the access log line
/// written. Internal to net/.

#include <cstdint>

#include "gateway/net/scratch.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

/// Applies admission's effects `a` on a request served under `snap`: counts its outcome, proof
/// results and challenge, records a failed proof's violation, counts what its limits did.
void apply_effects(worker& w, const snapshot& snap, const admission::record& a);
/// The same for the request in hand.
inline void apply_effects(worker& w, const request_in_hand& r) {
  apply_effects(w, *r.snap, r.adm);
}

/// Counts an upgrade of the request in hand refused for `why`.
void count_refused_upgrade(worker& w, const request_in_hand& r, metrics::upgrade_refusal why);

/// Phase 5, once the response to the request in hand is sent (its last byte: `written` so
/// far on the connection): counts it by status class and time (tollgate_responses_total,
/// tollgate_request_duration_seconds) and logs it when the access log is on (nothing is
/// formatted per request otherwise).
void finish_request(worker& w, connection_scratch& sc, std::uint64_t written);

/// A request's end as finish_exchange counts and logs it, whatever protocol carried it.
struct exchange_end {
  std::string_view method;                        ///< as sent
  std::string_view target;                        ///< as sent
  unsigned version = 11;                          ///< 10, 11, or 20 for an HTTP/2 stream
  unsigned status = 0;                            ///< of the response sent; 0: none
  std::chrono::steady_clock::time_point started;  ///< its head in hand
  double upstream_seconds = -1;  ///< to the upstream's response head; < 0: not sent
  std::uint64_t bytes = 0;       ///< sent to the client for it
};

/// finish_request for request `a` served under `snap` that ended as `e`; `line` is a buffer
/// the access log line is built in.
void finish_exchange(worker& w, const snapshot& snap, const admission::record& a,
                     const exchange_end& e, std::string& line);

}  // namespace tollgate::net
