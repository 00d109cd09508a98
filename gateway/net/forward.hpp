#pragma once
/// The admitted half of a request: relayed to its upstream and the response relayed back, both
/// bodies streamed chunk by chunk. Internal to net/.

#include "gateway/net/http_helpers.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

/// What the forwarder needs to know about an admitted request.
struct forward_request {
  const snapshot& snap;         ///< configuration in force for this request
  const policy::route& route;   ///< its upstream
  core::address peer;           ///< the socket peer
  core::address client;         ///< the address it was charged to
  std::string_view peer_text;   ///< the socket peer as text
  bool tls = false;             ///< arrived over TLS
  bool keep_alive = false;      ///< the client asked to keep the connection
  unsigned version = 11;        ///< the client's HTTP version
  policy::client_subjects who;  ///< the client as violation counters know it
};

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
