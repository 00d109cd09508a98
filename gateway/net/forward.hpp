#pragma once
/// The admitted half of a request: relayed to its upstream and the response relayed back, both
/// bodies streamed chunk by chunk. Internal to net/.

#include "gateway/net/http_helpers.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

/// Records a violation of reason `reason` (an index into the snapshot's violation rules) by
/// `who` at `now`: counts it, and logs and counts the ban it may cause.
void record_violation(worker& w, const snapshot& snap, const policy::client_subjects& who,
                      std::size_t reason, core::nanos now);

/// Forwards the request whose head `parser` holds, from the client of `watch`. Answers 502/504
/// itself when the upstream fails before its response starts. Returns whether the client connection
/// stays open.
task<bool> forward(worker& w, const forward_request& r, deadline_watch& watch,
                   beast::flat_buffer& client_buffer, request_parser& parser,
                   connection_scratch& scratch);

}  // namespace tollgate::net
